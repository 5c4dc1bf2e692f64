"""The FlexAttention study's quoted numbers (``Flex...`` macros) and its claims' verdicts, from the
tidy table of :mod:`kernels.flex.tidy`, built on kernels.paper.report_kit.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.flex.tidy import (BACKENDS, MASK_LABEL, SCORE_MOD_LABEL, SHAPE, _at_reference, _main_gpu, _num, _ok,
                               _ok_base, _rank_corr, _row_model, _seqlen_series, _sparse, _where, row_cost_fit)


#: The study's headline numbers that :func:`macros` gives, by macro, in words (the
#: reproduction appendix sets them beside the second run's).
HEADLINES = {"FlexFwdCausalTflops": "FlexAttention causal forward, TFLOP/s",
             "FlexFwdCausalVsFlash": "the same over FlashAttention-2, ×",
             "FlexFwdCausalVsCudnn": "the same over cuDNN, ×",
             "FlexFlashFwdCausalVsCudnn": "its FLASH backend over cuDNN, ×"}
#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro (in its order).
CLAIMS = {"FlexMemoryVerdict": "FlexAttention: dense mask memory from O(N²) to O(N)",
          "FlexPrefillVerdict": "FlexAttention (Triton backend): 2–4× faster prefill",
          "FlexSparsityVerdict": "FlexAttention (Triton backend) speed follows sparsity (at least 80 % of the "
                                 "ideal speedup)",
          "FlexFlashPrefillVerdict": "FlexAttention (FLASH backend): 2–4× faster prefill",
          "FlexFlashSparsityVerdict": "FlexAttention (FLASH backend) speed follows sparsity (at least 80 % of "
                                      "the ideal speedup)"}

#: Each claim of :data:`CLAIMS` in a few words, by verdict macro: the label of its values in the
#: across-GPU table (:mod:`kernels.paper.uncertainty`).
CLAIM_NAMES = {"FlexMemoryVerdict": "mask memory slope",
               "FlexPrefillVerdict": "Triton prefill",
               "FlexSparsityVerdict": "Triton sparsity",
               "FlexFlashPrefillVerdict": "FLASH prefill",
               "FlexFlashSparsityVerdict": "FLASH sparsity"}

#: The implementations each verdict of :data:`CLAIMS` cannot be decided without, by verdict macro: on
#: a GPU where one of them has rows and none timed ok, the claim is "not testable"
#: (:func:`kernels.paper.quick.untestable`).
CLAIM_IMPLS = {"FlexMemoryVerdict": ("flex",),
               "FlexPrefillVerdict": ("flex", "sdpa_flash"),
               "FlexSparsityVerdict": ("flex",),
               "FlexFlashPrefillVerdict": ("flex_flash", "sdpa_flash"),
               "FlexFlashSparsityVerdict": ("flex_flash",)}

#: The values each verdict of :data:`CLAIMS` compares, by verdict macro: ``(macro, words)`` pairs, each
#: printed as its value, the words and its interval (:func:`kernels.paper.models.evidence_text`: each
#: GPU model's claims side by side).
EVIDENCE = {"FlexMemoryVerdict": (("FlexNaiveMemSlope", " naive"), ("FlexSdpaMaskedMemSlope", " masked SDPA"),
                                  ("FlexFlexMemSlope", " flex")),
            "FlexPrefillVerdict": (("FlexFwdCausalVsFlash", "× over FA2"), ("FlexFwdCausalVsCudnn", "× over cuDNN")),
            "FlexSparsityVerdict": (("FlexWindowFwdPctIdealMedian", " % windows"),
                                    ("FlexDocumentFwdPctIdealMedian", " % documents")),
            "FlexFlashPrefillVerdict": (("FlexFlashFwdCausalVsFlash", "× over FA2"),
                                        ("FlexFlashFwdCausalVsCudnn", "× over cuDNN")),
            "FlexFlashSparsityVerdict": (("FlexFlashWindowFwdPctIdealMedian", " % windows"),
                                         ("FlexFlashDocumentFwdPctIdealMedian", " % documents"))}
#: The passes in macro names.
PASS_NAMES = {"fwd": "Fwd", "bwd": "Bwd", "fwdbwd": "Fwdbwd"}
#: Longest quoted refusal message (characters; longer ones end in an ellipsis).
MESSAGE_CHARS = 160


def backend_macros(d: pd.DataFrame, impl: str, prefix: str) -> dict[str, str]:
    """The macros of one FlexAttention backend ``impl``, each named ``<prefix>...`` (:data:`BACKENDS`).

    ``d`` is the derived tidy table's ok rows of one GPU (refused rows are not read). At the
    reference shape: the causal time, TFLOP/s and speed over FA2 and cuDNN per pass
    (``<prefix><Pass>Causal{Ms,Tflops,VsFlash,VsCudnn}``), and, as context that no verdict reads,
    over SDPA given the causal mask materialised (``<prefix><Pass>CausalVsMasked``), the sliding
    window 1024's forward speedup over the backend's own causal
    (``<prefix>FwdWindowThousandSpeedup``), each speedup's 95 % interval
    (``...Ci``, :func:`kernels.paper.report_kit.interval`) and the verdict on "2-4x
    faster prefill" from the causal forward over FA2 and cuDNN (``<prefix>PrefillVerdict``). At N >=
    8K: the sliding windows' and documents' percentage of the ideal speedup over the backend's own
    causal (``<prefix><Family><Pass>PctIdeal{Min,Median}``, ``...TargetMet``: cases >= 80 %; the
    median's 95 % interval, ``...PctIdealMedianCi``, :func:`kernels.paper.report_kit.median_ratio` of the
    speedups over causal as fractions of the ideal, written as percentages), the
    verdict on "speed follows sparsity" from the forward cases (``<prefix>SparsityVerdict``), the
    fixed cost per query-block row fitted to their tile costs (:func:`row_cost_fit`:
    ``<prefix><Pass>RowCost{Tiles,Rsq}``, rank correlations, mean residuals per family, the worst
    case of each family). Its compile times (cold: in the compile-ahead child where one prepared
    the case): ``<prefix>CompileSecondsMedian`` over the cases that compiled,
    ``<prefix>CasesWithoutRecompile``. Every value not measured reads n/a.
    """
    out: dict[str, str] = {}
    base = _at_reference(d)

    def reps(pas, **where):
        return kit.first(_where(base, score_mod="none", **{"pass": pas}, **where), kit.DEVICE_REPS)

    vs_dense = {}  # (pass, dense baseline): the causal case's speedup over it, with its interval
    for pas, pname in PASS_NAMES.items():
        causal = _where(base, impl=impl, mask="causal", score_mod="none", **{"pass": pas})
        out[f"{prefix}{pname}CausalMs"] = kit.fmt(kit.first(causal, "device_ms"), 3)
        out[f"{prefix}{pname}CausalVsFlash"] = kit.fmt(kit.first(causal, "speedup_vs_flash"), 2)
        out[f"{prefix}{pname}CausalVsCudnn"] = kit.fmt(kit.first(causal, "speedup_vs_cudnn"), 2)
        for other, oname in (("sdpa_flash", "Flash"), ("sdpa_cudnn", "Cudnn")):
            vs_dense[pas, other] = kit.ratio(reps(pas, impl=other, mask="causal"), kit.first(causal, kit.DEVICE_REPS))
            out[f"{prefix}{pname}CausalVs{oname}Ci"] = kit.interval(vs_dense[pas, other])
        out[f"{prefix}{pname}CausalTflops"] = kit.fmt(kit.first(causal, "tflops_elements"), 0)
        # beside the verdict, not in it: over SDPA given the causal mask materialised (a boolean N x N mask)
        masked = _where(base, impl="sdpa_masked", mask="causal", score_mod="none", **{"pass": pas})
        out[f"{prefix}{pname}CausalVsMasked"] = kit.fmt(
            kit.first(masked, "device_ms") / kit.first(causal, "device_ms"), 2)
        out[f"{prefix}{pname}CausalVsMaskedCi"] = kit.interval(kit.ratio(kit.first(masked, kit.DEVICE_REPS),
                                                                          kit.first(causal, kit.DEVICE_REPS)))
    # the >= 80 % of ideal target, sliding windows and document packing at N >= 8K
    rows = d[(d["impl"] == impl) & (d["score_mod"] == "none") & (d["seqlen"] >= 8191)]
    rows = rows.assign(causal_reps=_ok_base(d, d["mask"] == "causal", SHAPE + ["impl", "score_mod"], kit.DEVICE_REPS))
    fwd_pcts: list[kit.Ratio] = []
    for fam, fname in (("window", "Window"), ("document", "Document")):
        for pas, pname in PASS_NAMES.items():
            cases = rows[(rows["mask"] == fam) & (rows["pass"] == pas)].dropna(subset=["pct_of_ideal"])
            pct = cases["pct_of_ideal"]
            out[f"{prefix}{fname}{pname}PctIdealMin"] = kit.fmt(pct.min() if len(pct) else np.nan, 0)
            out[f"{prefix}{fname}{pname}PctIdealMedian"] = kit.fmt(pct.median() if len(pct) else np.nan, 1)
            # the median's interval: the speedups over causal as fractions of their ideal, resampled
            fraction = kit.median_ratio(zip(cases["causal_reps"], cases[kit.DEVICE_REPS], 1.0 / cases["ideal_ratio"]))
            out[f"{prefix}{fname}{pname}PctIdealMedianCi"] = kit.interval(fraction, 1, scale=100.0)
            out[f"{prefix}{fname}{pname}TargetMet"] = (f"{int((pct >= 80).sum())} of {len(pct)}" if len(pct)
                                                       else style.MISSING)
            if pas == "fwd":  # each case's share of its ideal, with its interval
                fwd_pcts.extend(kit.with_intervals(pct.tolist(), [
                    kit.ratio(c, r, 100.0 / ideal)
                    for c, r, ideal in zip(cases["causal_reps"], cases[kit.DEVICE_REPS], cases["ideal_ratio"])]))
    # verdict on "speed follows sparsity": forward cases of both families at >= 80 % of the ideal
    out[f"{prefix}SparsityVerdict"] = kit.claim_verdict(fwd_pcts, 80.0)
    fwd = _where(base, impl=impl, mask="causal", score_mod="none", **{"pass": "fwd"})
    out[f"{prefix}PrefillVerdict"] = kit.claim_verdict(kit.with_intervals(
        [kit.first(fwd, "speedup_vs_flash"), kit.first(fwd, "speedup_vs_cudnn")],
        [vs_dense["fwd", other] for other in ("sdpa_flash", "sdpa_cudnn")]), 2.0, 4.0)
    w = _where(base, impl=impl, mask="window", window=1024, score_mod="none", **{"pass": "fwd"})
    out[f"{prefix}FwdWindowThousandSpeedup"] = kit.fmt(kit.first(w, "speedup_vs_causal"), 2)
    out[f"{prefix}FwdWindowThousandSpeedupCi"] = kit.interval(
        kit.ratio(reps("fwd", impl=impl, mask="causal"), kit.first(w, kit.DEVICE_REPS)))
    mine = d[d["impl"] == impl]
    # the cases that compiled in the timed job (one process, in sweep order), and their cold compile
    # seconds: in the compile-ahead child where one prepared the case (a fresh process each)
    reused = _num(mine, "recompiles")
    cold = _num(mine, "ahead_compile_s").fillna(_num(mine, "compile_s"))[reused > 0]
    out[f"{prefix}CompileSecondsMedian"] = kit.fmt(cold.median() if len(cold) else np.nan, 1)
    out[f"{prefix}CasesWithoutRecompile"] = f"{int((reused == 0).sum())} of {int(reused.notna().sum())}" \
        if reused.notna().any() else style.MISSING
    # why the sparse masks fall short: tile cost against tiles per query-block row and fill
    sparse = _sparse(d, impl)
    for pas, pname in PASS_NAMES.items():
        p = sparse[sparse["pass"] == pas]
        k, r2 = row_cost_fit(p)
        out[f"{prefix}{pname}RowCostTiles"] = kit.fmt(k, 1)
        out[f"{prefix}{pname}RowCostRsq"] = kit.fmt(r2, 3)
        out[f"{prefix}{pname}TileCostRankCorrRows"] = kit.fmt(_rank_corr(p["tile_cost"], p["tiles_per_row"]), 2)
        out[f"{prefix}{pname}TileCostRankCorrFill"] = kit.fmt(_rank_corr(p["tile_cost"], p["tile_fill"]), 2)
        per_row = p["tiles_per_row"]
        residual = p["tile_cost"] - _row_model(k, per_row, per_row * p["ideal_ratio"])
        for sel, sname in (("window", "Window"), ("uniform", "DocUniform"), ("heavy", "DocHeavy")):
            r = residual[(p["mask"] == sel) | ((p["mask"] == "document") & (p["doc_dist"] == sel))].dropna()
            out[f"{prefix}{pname}FitResidual{sname}"] = kit.fmt(r.mean() if len(r) else np.nan, 2)
        for fam, fname in (("window", "Window"), ("document", "Document")):
            f = p[p["mask"] == fam].dropna(subset=["tile_cost"])
            worst = f.loc[[f["tile_cost"].idxmax()]] if len(f) else f
            out[f"{prefix}{fname}{pname}WorstTileCost"] = kit.fmt(kit.first(worst, "tile_cost"), 2)
            out[f"{prefix}{fname}{pname}WorstTilesPerRow"] = kit.fmt(kit.first(worst, "tiles_per_row"), 1)
            out[f"{prefix}{fname}{pname}WorstFillPct"] = kit.fmt(100 * kit.first(worst, "tile_fill"), 0)
            per_row = kit.first(worst, "tiles_per_row")
            fit = _row_model(k, per_row, per_row * kit.first(worst, "ideal_ratio"))
            out[f"{prefix}{fname}{pname}WorstTileCostFit"] = kit.fmt(fit, 2)
    return out


def _refused_case(row) -> str:
    """A refused row's configuration in words: its mask family, with its score modification."""
    mask = MASK_LABEL.get(row["mask"], str(row["mask"]))
    mod = row["score_mod"]
    return mask if mod == "none" else f"{mask} with {SCORE_MOD_LABEL.get(mod, mod)}"


def _message(error, impl: str) -> str:
    """A refusal's message as the backend wrote it: the row's ``error`` without the harness's
    ``Unsupported:`` and the implementation's name in front, at most :data:`MESSAGE_CHARS`."""
    text = str(error).strip()
    for head in ("Unsupported:", f"{impl}:"):
        text = text[len(head):].strip() if text.startswith(head) else text
    return kit.clip(text, MESSAGE_CHARS)


def refusal_macros(df: pd.DataFrame, impl: str, prefix: str) -> dict[str, str]:
    """What ``impl`` refused on the main GPU (rows with status ``unsupported``), in three macros:
    ``<prefix>UnsupportedRows`` ("26 of 60": its refused rows of all its rows),
    ``<prefix>UnsupportedCases`` (each refused configuration, :func:`_refused_case`, with its number
    of rows, most first) and ``<prefix>UnsupportedErrors`` (each distinct message, :func:`_message`,
    with its number of rows, most first; escaped for LaTeX). "none" for the last two when it refused
    nothing; n/a for all three without rows of ``impl``. ``<prefix>UnsupportedText``: the paper's
    sentence on them ("It refused none of its 60 cases." or the cases and messages)."""
    d = _main_gpu(df)
    mine = d[d["impl"] == impl]
    if mine.empty:
        return {f"{prefix}Unsupported{name}": style.MISSING for name in ("Rows", "Cases", "Errors", "Text")}
    refused = mine[mine["status"] == "unsupported"]

    def counted(values: pd.Series) -> str:
        counts = values.value_counts(sort=False).sort_values(ascending=False, kind="stable")
        return "; ".join(f"{v} ({n} {'row' if n == 1 else 'rows'})" for v, n in counts.items()) or "none"

    cases = refused.apply(_refused_case, axis=1) if not refused.empty else pd.Series(dtype=str)
    errors = refused["error"].map(lambda e: _message(e, impl))
    out = {f"{prefix}UnsupportedRows": f"{len(refused)} of {len(mine)}",
           f"{prefix}UnsupportedCases": kit.escape_latex(counted(cases)),
           f"{prefix}UnsupportedErrors": kit.escape_latex(counted(errors))}
    out[f"{prefix}UnsupportedText"] = (
        f"It refused none of its {len(mine)} cases." if refused.empty else
        f"It refused {len(refused)} of its {len(mine)} cases ({out[f'{prefix}UnsupportedCases']}), each recorded "
        f"as unsupported with the backend's message ({out[f'{prefix}UnsupportedErrors']}).")
    return out


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text (``Flex...`` macros); "n/a" where not measured. Each backend of
    :data:`BACKENDS` gets :func:`backend_macros`; the FLASH backend also :func:`refusal_macros`, and
    ``FlexFlashTimed`` ("true" when it has a timed row, else "false": the paper's switch
    ``\\ifFlexFlashTimed`` leaves its numbers out of the text without one)."""
    d = _ok(_main_gpu(df))
    out: dict[str, str] = {"FlexFlashTimed": "true" if (d["impl"] == "flex_flash").any() else "false"}
    for impl, prefix in BACKENDS.items():
        out.update(backend_macros(d, impl, prefix))
    out.update(refusal_macros(df, "flex_flash", BACKENDS["flex_flash"]))
    base = _at_reference(d)
    for mod, mname in (("alibi", "Alibi"), ("softcap", "Softcap"), ("softcap_sigmoid", "SoftcapSigmoid"),
                       ("alibi_softcap", "AlibiSoftcap")):
        for (impl, prefix), (pas, pname) in itertools.product(BACKENDS.items(), PASS_NAMES.items()):
            r = _where(base, impl=impl, mask="causal", score_mod=mod, **{"pass": pas})
            out[f"{prefix}{pname}{mname}Slowdown"] = kit.fmt(kit.first(r, "slowdown_vs_plain"), 2)
    # memory: largest seqlen each materialised baseline ran, and its memory over flex's there
    causal = _where(d, mask="causal", score_mod="none", **{"pass": "fwd"})
    for impl, iname in (("naive", "Naive"), ("sdpa_masked", "SdpaMasked")):
        r = causal[causal["impl"] == impl]
        out[f"Flex{iname}MaxSeqlen"] = str(int(r["seqlen"].max())) if not r.empty else "n/a"
        both = r.merge(causal[causal["impl"] == "flex"], on=SHAPE, suffixes=("", "_flex")).sort_values("seqlen")
        ratio = np.nan
        if not both.empty:
            ratio = (_num(both, "peak_mem_bytes") / _num(both, "peak_mem_bytes_flex")).iloc[-1]
        out[f"Flex{iname}MemOverFlex"] = kit.fmt(ratio, 1)
    out.update(memory_slopes(d))
    return out


#: The implementations whose memory slope the memory claim judges, by their macros' name part:
#: the two that materialise the N x N scores or mask, and flex.
MEMORY_SLOPED = {"naive": "Naive", "sdpa_masked": "SdpaMasked", "flex": "Flex"}


def memory_fits(d: pd.DataFrame) -> dict:
    """Each of :data:`MEMORY_SLOPED`'s log-log slope of peak memory per sequence (peak over batch)
    against N, in the causal forward of the sequence-length series (a constant batch x N), with its
    95 % interval (:class:`kernels.longctx.scaling.Slope`, :func:`~kernels.longctx.scaling.fit_slope`),
    by implementation."""
    from kernels.longctx.scaling import fit_slope

    rows = _where(_seqlen_series(d), mask="causal", score_mod="none", **{"pass": "fwd"})
    return {impl: fit_slope(rows.loc[rows["impl"] == impl, "seqlen"],
                            (_num(rows, "peak_mem_bytes") / _num(rows, "batch"))[rows["impl"] == impl])
            for impl in MEMORY_SLOPED}


def memory_slopes(d: pd.DataFrame) -> dict[str, str]:
    """O(N²) against O(N) memory: the log-log slope of each implementation's peak memory per
    sequence against N (:func:`memory_fits`), with its 95 % interval:
    ``Flex<Impl>MemSlope``, ``...Low``, ``...High`` of naive attention (``Naive``), materialised-mask
    SDPA (``SdpaMasked``) and flex (``Flex``); an attention whose memory holds the N x N scores or mask has slope 2, one that holds only
    the inputs, the output and their statistics slope 1. ``FlexMemoryVerdict``:
    :func:`kernels.paper.report_kit.scaling_verdict`, flex's slope against 1 and the two
    materialised baselines' against 2."""
    out, fitted = {}, memory_fits(d)
    for impl, iname in MEMORY_SLOPED.items():
        s = fitted[impl]
        for end, value in (("", s.p), ("Low", s.low), ("High", s.high)):
            out[f"Flex{iname}MemSlope{end}"] = kit.fmt(value, 2)
    out["FlexMemoryVerdict"] = kit.scaling_verdict(
        [(fitted["flex"].low, fitted["flex"].high)] if fitted["flex"].n else [],
        [(s.low, s.high) for impl, s in fitted.items() if impl != "flex" and s.n])
    return out
