"""The long-context study's quoted numbers (``Longctx...`` macros) and its claims' verdicts, from the
tidy table, slopes and crossovers of :mod:`kernels.longctx.tidy`, built on :mod:`kernels.paper.report_kit`.

Verdicts (the claims table's), from the slopes' 95 % intervals
(:func:`kernels.paper.report_kit.scaling_verdict`): the move from softmax to linear attention turns
O(n²) into O(n) (``LongctxLinearVerdict``: every Gated DeltaNet prefill time's slope shows power 1,
at most linear, and every attention's power 2, :func:`kernels.paper.report_kit.follows_power`; "partly
holds (k of n)" when k of the n do); FlashAttention-style kernels keep attention's memory O(N)
(``LongctxMemoryVerdict``: every attention's prefill peak-memory slope shows power 1); the slopes of
power 1 whose interval lies below 1 are named apart (:func:`sublinear`); linear attention is the faster above
:data:`OVERTAKE_SEQLEN` tokens (``LongctxOvertakeVerdict``: :func:`kernels.paper.report_kit.claim_verdict`
of our chunked kernel's ``speedup_vs_attention`` in prefill at those lengths against 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.longctx.impls import IMPLS
from kernels.longctx.scaling import NO_SLOPE
from kernels.longctx.tidy import (ATTENTION, GDN, ORDER, SERIES, _at, _config, _label, _paired, _rows, _tidy,
                                  _vs_attention, crossover_bounds, crossover_of, slopes)

#: The context length above which the source expects linear attention to win (its "above 100K").
OVERTAKE_SEQLEN = 100_000


def _headline_length() -> int:
    return _config()["table_seqlens"][-1]


#: The study's headline numbers that :func:`macros` gives, by macro, in words (the
#: reproduction appendix sets them beside the second run's).
HEADLINES = {f"LongctxSpeedupChunkFwdT{kit.size_name(_headline_length())}":
             "Gated DeltaNet prefill (ours) over the fastest attention at the longest table length, ×",
             "LongctxCrossoverChunkFwd": "length from which Gated DeltaNet prefill (ours) is the faster, tokens"}

#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro.
CLAIMS = {"LongctxLinearVerdict": "linear attention turns O(n²) into O(n)",
          "LongctxMemoryVerdict": "FlashAttention/FlexAttention: attention memory from O(N²) to O(N)",
          "LongctxOvertakeVerdict": "linear attention faster than softmax attention above 100K tokens"}

#: Each claim of :data:`CLAIMS` in a few words, by verdict macro: the label of its values in the
#: across-GPU table (:mod:`kernels.paper.uncertainty`).
CLAIM_NAMES = {"LongctxLinearVerdict": "prefill slope",
               "LongctxMemoryVerdict": "attention memory slope",
               "LongctxOvertakeVerdict": "linear against softmax"}

#: The implementations each verdict of :data:`CLAIMS` cannot be decided without, by verdict macro: on
#: a GPU where one of them has rows and none timed ok, the claim is "not testable"
#: (:func:`kernels.paper.quick.untestable`).
CLAIM_IMPLS = {"LongctxLinearVerdict": ("chunk", "sdpa_cudnn"),
               "LongctxMemoryVerdict": ("sdpa_cudnn",),
               "LongctxOvertakeVerdict": ("chunk", "sdpa_cudnn")}

#: The values each verdict of :data:`CLAIMS` compares, by verdict macro: ``(macro, words)`` pairs, each
#: printed as its value, the words and its interval (:func:`kernels.paper.models.evidence_text`: each
#: GPU model's claims side by side).
EVIDENCE = {"LongctxLinearVerdict": tuple((f"LongctxSlope{kit.camel(i)}Fwd", f" {_label(i)}") for i in (*GDN, *ATTENTION)
                                           if "prefill" in IMPLS[i].tags),
            "LongctxMemoryVerdict": tuple((f"LongctxSlope{kit.camel(i)}Mem", f" {_label(i)}") for i in ATTENTION
                                          if "prefill" in IMPLS[i].tags),
            "LongctxOvertakeVerdict": ((next(iter(HEADLINES)), f"× at {style.tokens(_headline_length())} tokens"),
                                       ("LongctxCrossoverChunkFwd", " tokens and up faster"))}


#: The implementations whose slopes of each series the verdicts read, those that should show
#: power 1 and those that should show 2: prefill time, Gated DeltaNet against attention
#: (``LongctxLinearVerdict``); prefill peak memory, attention alone (``LongctxMemoryVerdict``).
VERDICT_SLOPES = {"Fwd": (GDN, ATTENTION), "Mem": (ATTENTION, ())}


def _verdict_slopes(fitted: dict, series: str) -> tuple[list[tuple], list[tuple]]:
    """The 95 % intervals ``(low, high)`` of the slopes of ``series`` that should show power 1 and of
    those that should show 2 (:data:`VERDICT_SLOPES`)."""
    return tuple([(s.low, s.high) for (n, i), s in fitted.items() if n == series and i in impls and s.n]
                 for impls in VERDICT_SLOPES[series])


def verdicts(df: pd.DataFrame) -> dict[str, str]:
    """``LongctxLinearVerdict``, ``LongctxMemoryVerdict``, ``LongctxOvertakeVerdict`` (module docstring)."""
    fitted = slopes(df)
    gdn, attn = _verdict_slopes(fitted, "Fwd")
    mem, _ = _verdict_slopes(fitted, "Mem")
    d = _rows(df, "prefill")
    over = d[(d["impl"] == "chunk") & (d["seqlen"] > OVERTAKE_SEQLEN)]["speedup_vs_attention"].dropna()
    return {"LongctxLinearVerdict": kit.scaling_verdict(gdn, attn) if gdn and attn else style.MISSING,
            "LongctxMemoryVerdict": kit.scaling_verdict(mem),
            "LongctxOvertakeVerdict": kit.claim_verdict(list(over), 1.0)}


def _fitted_rows(df: pd.DataFrame, series: str, impl: str) -> pd.DataFrame:
    """The rows of ``impl`` that its slope of ``series`` is fitted from, by length: ``seqlen`` and the
    series' column, from ``fit_min_seqlen`` up (:func:`slopes`)."""
    _, phase, pas, col = next(x for x in SERIES if x[0] == series)
    d = _rows(df, phase, pas)
    d = d[(d["impl"] == impl) & (d["status"] == "ok") & (d["seqlen"] >= _config()["fit_min_seqlen"])]
    d = d[pd.to_numeric(d[col], errors="coerce") > 0]
    return d[["seqlen", col]].astype(float).sort_values("seqlen").rename(columns={col: "value"})


def sublinear(df: pd.DataFrame, fitted: dict) -> dict[str, str]:
    """The slopes that the verdicts count as linear (:func:`kernels.paper.report_kit.follows_power`)
    although their interval lies wholly below 1 (:func:`kernels.paper.report_kit.below_one`), per series
    of :data:`VERDICT_SLOPES`: ``LongctxSublinear<Series>`` ("true" when there is one, the paper's
    switch ``\\ifLongctxSublinear<Series>``) and ``...Slopes``, each as "GDN FlashQLA 0.81 [0.71, 0.91]
    (0.98 between its two longest lengths, 128K and 512K)"; for prefill time, ``LongctxSublinearFwdStep``:
    where each one's time per token falls most between two neighbouring lengths of the fit ("GDN
    FlashQLA: from 35.8 ns at 16K to 19.7 ns at 64K"). ``fitted``: :func:`slopes` of ``df``."""
    out, steps = {}, []
    for series, (linear, _) in VERDICT_SLOPES.items():
        below = [impl for impl in linear if kit.below_one(fitted.get((series, impl), NO_SLOPE).high)]
        texts = []
        for impl in below:
            s, r = fitted[(series, impl)], _fitted_rows(df, series, impl)
            (t0, y0), (t1, y1) = r.iloc[-2], r.iloc[-1]
            end = np.log2(y1 / y0) / np.log2(t1 / t0)
            texts.append(f"{_label(impl)} {kit.fmt(s.p)} [{kit.fmt(s.low)}, {kit.fmt(s.high)}] "
                         f"({kit.fmt(end)} between its two longest lengths, {style.tokens(t0)} and {style.tokens(t1)})")
            if series == "Fwd":
                ns = (r["value"] * 1e6 / r["seqlen"]).to_numpy()  # ms per call -> ns per token
                i = int(np.argmax(ns[:-1] - ns[1:]))
                steps.append(f"{_label(impl)}: from {kit.fmt(ns[i], 1)} ns at {style.tokens(r['seqlen'].iloc[i])} to "
                             f"{kit.fmt(ns[i + 1], 1)} ns at {style.tokens(r['seqlen'].iloc[i + 1])}")
        out[f"LongctxSublinear{series}"] = "true" if below else "false"
        out[f"LongctxSublinear{series}Slopes"] = kit.and_list(texts) or style.MISSING
    out["LongctxSublinearFwdStep"] = "; ".join(steps) or style.MISSING
    return out


def _cross_text(cross, end: float, d: pd.DataFrame) -> str:
    if np.isfinite(end):
        return style.tokens(end)
    lengths = d["seqlen"].dropna()
    if lengths.empty:
        return style.MISSING
    return f"below {style.tokens(lengths.min())}" if cross.where == "below" else f"above {style.tokens(lengths.max())}"


def _bracket(df: pd.DataFrame, impl: str, pas: str, at: float) -> tuple[float, float]:
    """The measured lengths on either side of a crossover at ``at`` tokens (GDN ``impl``'s prefill
    against the fastest attention, pass ``pas``): the longest length at or below it and the shortest
    above it at which both were timed, between which :func:`crossover_of` interpolates; NaN where
    there is none."""
    if not np.isfinite(at):
        return np.nan, np.nan
    both = list(_paired(df, impl, pas)["seqlen"])
    below, above = [t for t in both if t <= at], [t for t in both if t > at]
    return (below[-1] if below else np.nan), (above[0] if above else np.nan)


def crossover_texts(df: pd.DataFrame, impl: str, pas: str = "fwd") -> tuple[str, str]:
    """:func:`crossover_bounds` as the paper quotes them, computed once: the interval ``[L, H]``
    (``[below 1K, 2K]`` where no length is wholly slower, ``[8K, above 512K]`` where the longest is not
    wholly faster) and the same in words, for the sentences that quote the crossover without its
    interpolated length ("between 8K and 16K", "at most 2K", "beyond 8K");
    :data:`~kernels.paper.style.MISSING` for both without a length with a finite interval."""
    bounds = crossover_bounds(df, impl, pas)
    if bounds is None:
        return style.MISSING, style.MISSING
    (low, high), lengths = bounds, list(_paired(df, impl, pas)["seqlen"])
    first, last = style.tokens(lengths[0]), style.tokens(lengths[-1])
    interval = (f"[{style.tokens(low) if np.isfinite(low) else f'below {first}'}, "
                f"{style.tokens(high) if np.isfinite(high) else f'above {last}'}]")
    if np.isfinite(high):
        words = f"between {style.tokens(low)} and {style.tokens(high)}" if np.isfinite(low) else f"at most {style.tokens(high)}"
    else:
        words = f"beyond {style.tokens(low) if np.isfinite(low) else last}"
    return interval, words


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text: each implementation's slope of each series with its interval
    (``LongctxSlope<Impl><Series>``, ``...Low``, ``...High``); where our and the other GDN kernels
    overtake the fastest attention in prefill (``LongctxCrossover<Impl><Pass>``, in K tokens, ``...Between``, the measured lengths it is interpolated between,
    :func:`_bracket`, and ``...Ci``, those between which it lies given the speedups' 95 % intervals,
    and ``...Span``, the same in words: :func:`crossover_texts`); at each table length (``T<size>``, :func:`kernels.paper.report_kit.size_name`)
    the prefill times (``LongctxMs<Impl><Pass>T...``, ms), the prefill forward's peak memory
    (``LongctxPeakGib<Impl>T...``, GiB: the ``peak_mem_gib`` of :func:`~kernels.longctx.tidy.derive`) and the bytes of its
    inputs and outputs (``LongctxIoGib<Impl>T...``, GiB: the row's ``bytes``, the least the call reads
    and writes), the decode step (``LongctxDecodeUs<Impl>T...``, device time; its latency launched
    from Python, ``LongctxDecodeLatencyUs<Impl>T...``, and replayed from a CUDA graph,
    ``LongctxDecodeGraphLatencyUs<Impl>T...``, µs), decode's memory (``LongctxCacheMib<Impl>T...``)
    and the GDN speedups over the fastest attention (``LongctxSpeedup<Impl><Pass>T...``, and ``...Ci`` their
    95 % intervals, :func:`kernels.paper.report_kit.interval`) with the attentions timed there, of
    which it is the fastest (``LongctxAttentions<Pass>T...``, their labels); the layer's
    shapes (``LongctxAttentionShape``, ``LongctxGdnShape``), the lengths (``LongctxSeqlenRange``,
    ``LongctxFitMin``, ``LongctxCheckSeqlen``), the largest check error (``LongctxErrMax``),
    ``LongctxMeasured`` ("true" when a row was timed, else "false": the paper's switch
    ``\\ifLongctxMeasured``), the :func:`verdicts` and the slopes below 1 that they count as linear
    (:func:`sublinear`)."""
    cfg = _config()
    d = _tidy(df)
    m = {}
    fitted = slopes(d)
    for (series, phase, pas, _), impl in [(x, i) for x in SERIES for i in ORDER
                                          if x[1] in IMPLS[i].tags and x[2] in IMPLS[i].passes]:
        s = fitted.get((series, impl), NO_SLOPE)
        for end, value in (("", s.p), ("Low", s.low), ("High", s.high)):  # + 0.0: no "-0.00"
            m[f"LongctxSlope{kit.camel(impl)}{series}{end}"] = kit.fmt(round(value, 2) + 0.0 if s.n else None, 2)
    for impl in GDN:
        if "prefill" not in IMPLS[impl].tags:
            continue
        for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):
            rows = _rows(d, "prefill", pas)
            cross = crossover_of(d, impl, pas)
            name = f"LongctxCrossover{kit.camel(impl)}{pname}"
            m[name] = _cross_text(cross, cross.seqlen, rows) if cross.where != "none" else style.MISSING
            m[name + "Ci"], m[name + "Span"] = (crossover_texts(d, impl, pas) if cross.where != "none"
                                                 else (style.MISSING, style.MISSING))
            lo, hi = _bracket(d, impl, pas, cross.seqlen)
            m[name + "Between"] = f"{style.tokens(lo)} and {style.tokens(hi)}" if np.isfinite(hi) else style.MISSING
    for t in cfg["table_seqlens"]:
        tag = f"T{kit.size_name(t)}"
        for impl in ORDER:
            c = kit.camel(impl)
            for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):
                m[f"LongctxMs{c}{pname}{tag}"] = kit.fmt(_at(d, impl, "prefill", pas, t), 3)
                if impl in GDN:
                    m[f"LongctxSpeedup{c}{pname}{tag}"] = kit.fmt(_at(d, impl, "prefill", pas, t,
                                                                      "speedup_vs_attention"), 1)
                    m[f"LongctxSpeedup{c}{pname}{tag}Ci"] = kit.interval(_vs_attention(d, impl, pas, t), 1)
            m[f"LongctxDecodeUs{c}{tag}"] = kit.fmt(_at(d, impl, "decode", "fwd", t) * 1e3, 1)
            m[f"LongctxDecodeLatencyUs{c}{tag}"] = kit.fmt(_at(d, impl, "decode", "fwd", t, "latency_ms") * 1e3, 1)
            m[f"LongctxDecodeGraphLatencyUs{c}{tag}"] = kit.fmt(
                _at(d, impl, "decode", "fwd", t, "latency_ms", "graph") * 1e3, 1)
            if "prefill" in IMPLS[impl].tags:
                m[f"LongctxPeakGib{c}{tag}"] = kit.fmt(_at(d, impl, "prefill", "fwd", t, "peak_mem_gib"), 1)
                m[f"LongctxIoGib{c}{tag}"] = kit.fmt(
                    pd.to_numeric(_at(d, impl, "prefill", "fwd", t, "bytes"), errors="coerce") / 2**30, 1)
            m[f"LongctxCacheMib{c}{tag}"] = kit.fmt(_at(d, impl, "decode", "fwd", t, "cache_mib"), 1)
        for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):
            rows = _rows(d, "prefill", pas)
            timed = set(rows.loc[rows["impl"].isin(ATTENTION) & (rows["seqlen"] == t) & rows["device_ms"].notna(),
                                 "impl"])
            m[f"LongctxAttentions{pname}{tag}"] = (kit.and_list([_label(i) for i in ORDER if i in timed])
                                                     or style.MISSING)
    a, g = cfg["attention"], cfg["gdn"]
    m["LongctxAttentionShape"] = style.shape(B=cfg["batch"], H=a["heads"], KV=a["kv_heads"], D=a["head_dim"])
    m["LongctxGdnShape"] = style.shape(B=cfg["batch"], H=g["heads"], HV=g["value_heads"], D=g["head_dim"])
    lengths = cfg["prefill"]["seqlens"]
    m["LongctxSeqlenRange"] = f"{style.tokens(min(lengths))}--{style.tokens(max(lengths))}"
    m["LongctxFitMin"] = style.tokens(cfg["fit_min_seqlen"])
    m["LongctxCheckSeqlen"] = str(int(cfg["check_seqlen"]))
    m["LongctxMeasured"] = "true" if (d["status"] == "ok").any() else "false"
    err = pd.to_numeric(d.loc[d["status"] == "ok", "rel_err"], errors="coerce")
    m["LongctxErrMax"] = kit.fmt(err.max() if err.notna().any() else None, 4)
    m.update(verdicts(d))
    m.update(sublinear(d, fitted))
    return m
