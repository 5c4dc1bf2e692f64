"""The SwiGLU study's quoted numbers (``Swiglu...`` macros) and its claims' verdicts, from the tidy
table of :mod:`kernels.swiglu.tidy`, built on kernels.paper.report_kit.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.paper.rows import PEAK_GBPS
from kernels.swiglu.study import PROFILE_ROLE, TOLERANCE
from kernels.swiglu.tidy import DECODE_ROLE, GEMM_MODELS, MODELS, SHAPE, SWEEP, _ok, _prepared, _quoted

LARGE = 2**26  # "large" elementwise sizes for the bandwidth verdict

#: The study's headline numbers that :func:`macros` gives, by macro, in words (the
#: reproduction appendix sets them beside the second run's).
HEADLINES = {"SwigluTritonFwdPctCopyRange": "our fused SwiGLU forward kernel, % of the copy bandwidth (64 Mi elements and more)",
             "SwigluTritonSpeedupLargeRange": "the same over eager, ×",
             "SwigluTritonLatencySpeedupLargeRange": "our fused kernel over eager by latency, ×"}


#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro.
CLAIMS = {"SwigluClaimLatencyVerdict": "SwiGLU fusion cuts activation latency 2.5–3.5×",
          "SwigluClaimBandwidthVerdict": "SwiGLU kernel reaches 85–92 % of peak HBM bandwidth",
          "SwigluClaimFusionVerdict": "Fusing memory-bound pointwise operations: 2–4× faster",
          "SwigluClaimGraphVerdict": "CUDA graphs remove the launch overhead of small-batch decode"}

#: Each claim of :data:`CLAIMS` in a few words, by verdict macro: the label of its values in the
#: across-GPU table (:mod:`kernels.paper.uncertainty`).
CLAIM_NAMES = {"SwigluClaimLatencyVerdict": "fusion, latency",
               "SwigluClaimBandwidthVerdict": "HBM bandwidth",
               "SwigluClaimFusionVerdict": "fusion",
               "SwigluClaimGraphVerdict": "CUDA graphs"}

#: The implementations each verdict of :data:`CLAIMS` cannot be decided without, by verdict macro: on
#: a GPU where one of them has rows and none timed ok, the claim is "not testable"
#: (:func:`kernels.paper.quick.untestable`).
CLAIM_IMPLS = {"SwigluClaimLatencyVerdict": ("seed", "eager"),
               "SwigluClaimBandwidthVerdict": ("seed",),
               "SwigluClaimFusionVerdict": ("seed", "eager"),
               "SwigluClaimGraphVerdict": ("eager",)}

#: The values each verdict of :data:`CLAIMS` compares, by verdict macro: ``(macro, words)`` pairs, each
#: printed as its value, the words and its interval (:func:`kernels.paper.models.evidence_text`: each
#: GPU model's claims side by side).
EVIDENCE = {"SwigluClaimLatencyVerdict": (("SwigluSeedLatencySpeedupLargeRange", "× latency, source kernel"),),
            "SwigluClaimBandwidthVerdict": (("SwigluSeedFwdPctPeakRange", " % of the datasheet, source kernel"),),
            "SwigluClaimFusionVerdict": (("SwigluSeedSpeedupLargeRange", "× source kernel"),
                                         ("SwigluTritonSpeedupLargeRange", "× ours")),
            "SwigluClaimGraphVerdict": (("SwigluGraphRemovedPctRange", " % of host overhead removed"),)}
#: The share of a launched call's host overhead (latency minus device time) that replaying the same
#: call from a CUDA graph must remove, at every decode size, for the claim that graphs remove it, %.
GRAPH_REMOVED_PCT = 90.0


def model_macro_name(model: str) -> str:
    """A model's name in a macro name: its size in words, ``Llama-3-8B`` -> ``EightB``,
    ``Llama-3-70B`` -> ``SeventyB`` (:func:`kernels.paper.report_kit.words`)."""
    return kit.words(int(re.search(r"([0-9]+)B$", model).group(1))) + "B"


def _model(models: dict, key, what: str) -> str:
    """The model name of ``key`` in ``models`` (:data:`MODELS` or :data:`GEMM_MODELS`).
    ValueError naming the config key when the sweep's ``models`` has none."""
    if key not in models:
        raise ValueError(f"config swiglu.sweep.models: no model with {what} {key}")
    return models[key]


def _gemm_shapes() -> list[tuple[int, int]]:
    """The (gemm_in, hidden) of the sweep's GEMM groups (config series ``gemm``), in order."""
    shapes = [(s["gemm_in"], s["hidden"]) for g in SWEEP["groups"] if g["series"] == "gemm"
              for s in g.get("shapes", [])]
    return list(dict.fromkeys(shapes))


def _graph_removed(dec: pd.DataFrame) -> list[kit.Ratio]:
    """Of decode rows ``dec`` (ok, forward), for each implementation and shape timed both launched
    (``stream``) and replayed from a CUDA graph: the share of the launched call's host overhead
    (latency minus device time) that the replay removes, (launched latency - replayed latency) /
    launched host overhead, in %, of the medians (of each one's median where several
    rows share a case), with its :data:`~kernels.paper.report_kit.LEVEL` percentile-bootstrap interval:
    each of :data:`~kernels.paper.report_kit.RESAMPLES` resamples draws the launched row's latencies
    (``times_ms``), its device times (``device_times_ms``: timed in a loop of their own, so drawn
    independently) and the replayed row's latencies with replacement, and takes the share of the three
    medians; the interval runs between that share's 2.5 % and 97.5 % quantiles (seeded with
    :data:`~kernels.paper.report_kit.SEED` per case; the repetitions of rows that share a case pooled).
    A case without repetitions has a NaN interval."""
    keys = ["impl", "dtype", *SHAPE]
    launched, replayed = (dec[dec["launch"].eq(launch)] for launch in ("stream", "graph"))
    stream, graph = (d.groupby(keys)[["latency_us", "us"]].median() for d in (launched, replayed))
    both = stream.index.intersection(graph.index)
    shares = (stream.loc[both, "latency_us"] - graph.loc[both, "latency_us"]) / (
        stream.loc[both, "latency_us"] - stream.loc[both, "us"])
    launched, replayed = (dict(list(d.groupby(keys))) for d in (launched, replayed))

    def pooled(rows: pd.DataFrame, col: str) -> np.ndarray:
        return np.concatenate([kit.repetitions(c) for c in rows[col]] or [np.empty(0)])

    out = []
    for case, share in shares.items():
        reps = (pooled(launched[case], kit.LATENCY_REPS), pooled(launched[case], kit.DEVICE_REPS),
                pooled(replayed[case], kit.LATENCY_REPS))
        if min(r.size for r in reps) == 0:
            out.append(kit.Ratio(float(100.0 * share), np.nan, np.nan))
            continue
        rng = np.random.default_rng(kit.SEED)
        lat, dev, graph_lat = (kit.resampled_medians(rng, r) for r in reps)
        low, high = kit.level_bounds(100.0 * (lat - graph_lat) / (lat - dev))
        out.append(kit.Ratio(float(100.0 * share), low, high))
    return out


def _bandwidth_shares(frame: pd.DataFrame, impl: str) -> dict[str, list[kit.Ratio]]:
    """Of ``impl``'s rows of ``frame`` (ok, elementwise), the bandwidth as a share of the datasheet's
    (``peak``: ``pct_peak`` / 100, :data:`PEAK_GBPS`; rows of other GPUs left out) and of the same
    run's copy at the same gpu, dtype, pass and numel (``copy``: ``pct_copy`` / 100), each a
    :class:`~kernels.paper.report_kit.Ratio` with its interval: the bytes are exact, so the interval
    is that of the device-time repetitions (the copy's too, for ``copy``)."""
    mine, keys = frame[frame["impl"].eq(impl)], ["gpu", "dtype", "pass", "numel"]
    copies = {}
    for _, row in frame[frame["impl"].eq("copy")].iterrows():
        copies.setdefault(tuple(row[k] for k in keys), row)
    peak, copy = [], []
    for _, row in mine.iterrows():
        if row["gpu"] in PEAK_GBPS:  # bytes / (ms * 1e6) is GB/s
            peak.append(kit.ratio([1.0], row[kit.DEVICE_REPS], float(row["bytes"]) / (1e6 * PEAK_GBPS[row["gpu"]])))
        if (c := copies.get(tuple(row[k] for k in keys))) is not None:
            copy.append(kit.ratio(c[kit.DEVICE_REPS], row[kit.DEVICE_REPS], float(row["bytes"]) / float(c["bytes"])))
    return {"peak": peak, "copy": copy}


def _liger_over_ours(large: pd.DataFrame) -> dict[int, list[kit.Ratio]]:
    """Of the forward rows ``large`` (ok, bfloat16, launched per call, from :data:`LARGE` elements up), per
    FFN hidden size of :data:`MODELS` that the sweep's ``grid`` series measured: Liger's device time
    over ours (``triton``) at each number of tokens, with its interval (above 1: Liger is slower)."""
    grid = large[large["series"].eq("grid")]
    keys = ["gpu", "dtype", "pass", "launch", *SHAPE]
    out = {}
    for hidden in MODELS:
        at = grid[grid["hidden"].astype(float).eq(hidden)]
        if rs := kit.ratios(at[at["impl"].eq("liger")], at[at["impl"].eq("triton")], keys):
            out[hidden] = rs
    return out


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text (plain strings; 'n/a' when not measured): among them the speedups
    over eager of the source kernel and ours in the bfloat16 forward, at the sizes from
    :data:`LARGE` up and at every size, by device time (``Swiglu<Impl>Speedup{Large,All}Range``) and,
    from :data:`LARGE` up, by latency, the host's launch included
    (``Swiglu<Impl>LatencySpeedupLargeRange``), each with its 95 % interval (``...Ci``,
    :func:`kernels.paper.report_kit.interval`); the verdicts on the source's claims, its latency claim
    judged by latency (``SwigluClaimLatencyVerdict``), its bandwidth claim by
    ``pct_peak`` (``SwigluClaimBandwidthVerdict``), its claim that fusing pointwise operations gains
    2–4× by the fused forwards' (ours and the source kernel's) speedups over eager by device time from
    :data:`LARGE` up, where the bytes set the time (``SwigluClaimFusionVerdict``), and its claim that
    CUDA graphs remove the launch overhead in decode by the share of each decode size's launched host
    overhead that the graph replay removes (``SwigluGraphRemovedPctRange``, in %, ``SwigluClaimGraphVerdict``:
    holds from :data:`GRAPH_REMOVED_PCT` up, a share whose interval holds it on the line) and its interval, from the lowest lower end of the
    shares' intervals to the highest upper end (``SwigluGraphRemovedPctRangeCi``, :func:`_graph_removed`);
    the GEMM epilogue's speedup over cuBLAS plus our
    activation at each GEMM group's shape (``SwigluGemmFusedSpeedup<model>``) with its interval
    (``...Ci``) and its word (``...Tie``: "a tie" when the interval holds 1.0, else "faster" or
    "slower", :func:`kernels.paper.report_kit.tie_word`); the bandwidth shares of the source kernel's and
    our forward from :data:`LARGE` up, in % of the datasheet's and of the copy's, with their intervals
    (``Swiglu<Impl>FwdPct{Peak,Copy}Range`` and ``...Ci``, :func:`_bandwidth_shares`), and that datasheet
    bandwidth, of the rows' GPU model, in TB/s (``SwigluPeakTBps``, :data:`PEAK_GBPS`: "4.8" on an H200,
    "3.35" on an H100); Liger's forward
    time over ours at the model width where it is largest (``SwigluLigerSlowHidden``, ``...Model``,
    ``SwigluLigerSlowOverTritonRange``) and at the other widths (``SwigluLigerOtherOverTritonRange``),
    with intervals, and both kernels' shares of the copy's bandwidth at that width
    (``Swiglu{Liger,Triton}SlowPctCopyRange``, :func:`_liger_over_ours`); the dtype that the source
    kernel's bfloat16 rows write (``SwigluSeedBfSixteenOutDtype``), the tolerance their check applies
    (``SwigluToleranceBfSixteen``) and the largest RMSE/RMS of its and our bfloat16 rows
    (``Swiglu{Seed,Triton}BfSixteenMaxErr``)."""
    d = _ok(df)
    ew = d[d["gemm_in"].astype(float).eq(0) & d["launch"].eq("stream")]
    bf = ew[ew["dtype"].eq("bfloat16")]
    fwd = bf[bf["pass"].eq("fwd")]
    large = fwd[fwd["numel"].astype(float) >= LARGE]
    out = {}

    def col(frame, impl, name):
        return frame[frame["impl"].eq(impl)][name]

    out["SwigluCopyTBps"] = kit.fmt(col(large, "copy", "gbps").max() / 1e3, 2)
    peaks = {PEAK_GBPS[gpu] for gpu in large["gpu"].dropna().unique() if gpu in PEAK_GBPS}
    out["SwigluPeakTBps"] = f"{peaks.pop() / 1e3:g}" if len(peaks) == 1 else style.MISSING
    out["SwigluTritonFwdPctCopyMin"] = kit.fmt(col(large, "triton", "pct_copy").min(), 1)
    out["SwigluTritonFwdPctCopyRange"] = kit.span(col(large, "triton", "pct_copy"), 1)
    out["SwigluTritonFwdPctPeakRange"] = kit.span(col(large, "triton", "pct_peak"), 1)
    out["SwigluSeedFwdPctPeakRange"] = kit.span(col(large, "seed", "pct_peak"), 1)
    out["SwigluSeedFwdPctCopyRange"] = kit.span(col(large, "seed", "pct_copy"), 1)
    out["SwigluCompileFwdPctCopyRange"] = kit.span(col(large, "compile", "pct_copy"), 1)
    # the intervals of the bandwidth shares the claims table quotes (in %, of the repetitions)
    for impl, iname in (("seed", "Seed"), ("triton", "Triton")):
        shares = _bandwidth_shares(large, impl)
        out[f"Swiglu{iname}FwdPctPeakRangeCi"] = kit.interval(shares["peak"], 1, scale=100.0)
        out[f"Swiglu{iname}FwdPctCopyRangeCi"] = kit.interval(shares["copy"], 1, scale=100.0)
    # Liger's forward against ours per model width: the width where it falls furthest behind, and the others
    liger = _liger_over_ours(large)
    slow = max(liger, key=lambda h: np.median(kit.values(liger[h])), default=None)
    others = [r for h, rs in liger.items() if h != slow for r in rs]
    out["SwigluLigerSlowHidden"] = str(slow) if slow is not None else style.MISSING
    out["SwigluLigerSlowModel"] = MODELS[slow] if slow is not None else style.MISSING
    out["SwigluLigerSlowOverTritonRange"] = kit.span(kit.values(liger.get(slow, [])))
    out["SwigluLigerSlowOverTritonRangeCi"] = kit.interval(liger.get(slow, []))
    out["SwigluLigerOtherOverTritonRange"] = kit.span(kit.values(others))
    out["SwigluLigerOtherOverTritonRangeCi"] = kit.interval(others)
    at_slow = large[large["hidden"].astype(float).eq(slow)] if slow is not None else large.iloc[0:0]
    for impl, iname in (("liger", "Liger"), ("triton", "Triton")):
        out[f"Swiglu{iname}SlowPctCopyRange"] = kit.span(col(at_slow, impl, "pct_copy"), 1)
        out[f"Swiglu{iname}SlowPctCopyRangeCi"] = kit.interval(_bandwidth_shares(at_slow, impl)["copy"], 1,
                                                               scale=100.0)
    out["SwigluSeedSpeedupLargeRange"] = kit.span(col(large, "seed", "speedup_eager"))
    out["SwigluTritonSpeedupLargeRange"] = kit.span(col(large, "triton", "speedup_eager"))
    out["SwigluTritonSpeedupAllRange"] = kit.span(col(fwd, "triton", "speedup_eager"))
    out["SwigluSeedSpeedupAllRange"] = kit.span(col(fwd, "seed", "speedup_eager"))
    # each speedup over eager with its interval, by device time and by latency (the host's launch included)
    keys = ["gpu", "dtype", "pass", "launch", *SHAPE]
    latency, fused = {}, []
    for impl, iname in (("seed", "Seed"), ("triton", "Triton")):
        for frame, fname in ((large, "Large"), (fwd, "All")):
            eager, mine = frame[frame["impl"].eq("eager")], frame[frame["impl"].eq(impl)]
            speedups = kit.ratios(eager, mine, keys)
            out[f"Swiglu{iname}Speedup{fname}RangeCi"] = kit.interval(speedups)
            if fname == "Large":
                fused += speedups
        eager, mine = large[large["impl"].eq("eager")], large[large["impl"].eq(impl)]
        latency[impl] = kit.ratios(eager, mine, keys, kit.LATENCY_REPS)
        out[f"Swiglu{iname}LatencySpeedupLargeRange"] = kit.span(kit.values(latency[impl]))
        out[f"Swiglu{iname}LatencySpeedupLargeRangeCi"] = kit.interval(latency[impl])
    # Source claims: 2.5-3.5x latency over eager (judged by latency) and 85-92 % of peak bandwidth.
    out["SwigluClaimLatencyVerdict"] = kit.claim_verdict(latency["seed"], 2.5, 3.5)
    out["SwigluClaimBandwidthVerdict"] = kit.claim_verdict(col(large, "seed", "pct_peak"), 85.0, 92.0)
    # Source claim: fusing memory-bound pointwise operations gains 2-4x (by device time, where bytes set it).
    out["SwigluClaimFusionVerdict"] = kit.claim_verdict(fused, 2.0, 4.0)
    # the prefill shape the text quotes (its rows also carry a per-kernel breakdown)
    tag = model_macro_name(_model(MODELS, _quoted(PROFILE_ROLE).get("hidden"), "the profiled case's hidden size"))
    model = kit.with_role(bf, PROFILE_ROLE)
    for impl, name in (("eager", "Eager"), ("compile", "Compile"), ("compile_no_cudagraphs", "CompileNoGraphs"),
                       ("triton", "Triton"), ("liger", "Liger"), ("seed", "Seed")):
        out[f"Swiglu{name}FwdUs{tag}"] = kit.fmt(kit.median(model, "us", impl=impl, **{"pass": "fwd"}), 1)
        if impl != "seed":  # the source kernel has no backward
            out[f"Swiglu{name}FwdbwdUs{tag}"] = kit.fmt(kit.median(model, "us", impl=impl, **{"pass": "fwdbwd"}), 1)
    step = bf[bf["pass"].eq("fwdbwd") & bf["impl"].eq("triton")]
    out["SwigluTritonFwdbwdSpeedupAllRange"] = kit.span(step["speedup_eager"])
    out[f"SwigluTritonFwdbwdSpeedup{tag}"] = kit.fmt(kit.median(model, "speedup_eager", impl="triton",
                                                       **{"pass": "fwdbwd"}), 2)
    out[f"SwigluTritonFwdbwdLatencySpeedup{tag}"] = kit.fmt(
        kit.median(model, "latency_us", impl="eager", **{"pass": "fwdbwd"})
        / kit.median(model, "latency_us", impl="triton", **{"pass": "fwdbwd"}), 2)
    for impl, name in (("eager", "Eager"), ("triton", "Triton"), ("liger", "Liger")):
        for p, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):
            host = kit.median(model, "host_overhead_ms", impl=impl, **{"pass": p})
            out[f"Swiglu{name}{pname}HostUs{tag}"] = kit.fmt(host * 1e3, 1)
    out[f"SwigluCompileSeconds{tag}"] = kit.fmt(kit.median(model, "compile_s", impl="compile", **{"pass": "fwd"}), 1)
    dec = kit.with_role(d[d["pass"].eq("fwd")], DECODE_ROLE)
    out["SwigluDecodeGraphUs"] = kit.fmt(kit.median(dec, "us", impl="decode", launch="graph"), 2)
    out["SwigluDecodeStreamUs"] = kit.fmt(kit.median(dec, "us", impl="decode", launch="stream"), 2)
    out["SwigluDecodeEagerUs"] = kit.fmt(kit.median(dec, "us", impl="eager", launch="stream"), 2)
    out["SwigluDecodeEagerGraphUs"] = kit.fmt(kit.median(dec, "us", impl="eager", launch="graph"), 2)
    out["SwigluDecodeTritonUs"] = kit.fmt(kit.median(dec, "us", impl="triton", launch="stream"), 2)
    out["SwigluDecodeCompileUs"] = kit.fmt(kit.median(dec, "us", impl="compile", launch="stream"), 2)
    out["SwigluDecodeCompileNoGraphsUs"] = kit.fmt(
        kit.median(dec, "us", impl="compile_no_cudagraphs", launch="stream"), 2)
    for impl, launch, name in (("decode", "graph", "Graph"), ("decode", "stream", "Stream"),
                               ("eager", "stream", "Eager"), ("eager", "graph", "EagerGraph"),
                               ("liger", "stream", "Liger")):
        # latencies to 0.1 us: they differ by more between runs (host-bound)
        out[f"SwigluDecode{name}LatencyUs"] = kit.fmt(kit.median(dec, "latency_us", impl=impl, launch=launch), 1)
    # Source claim: CUDA graphs remove the launch overhead in decode. Per decode size and implementation
    # timed both ways, the share of the launched call's host overhead that the graph replay removes.
    removed = _graph_removed(kit.with_role(d[d["pass"].eq("fwd")], "decode"))
    out["SwigluGraphRemovedPctRange"] = kit.span(kit.values(removed), 0)
    out["SwigluGraphRemovedPctRangeCi"] = kit.interval(removed, 0, ties=False)
    out["SwigluGraphRemovedPctClaim"] = kit.fmt(GRAPH_REMOVED_PCT, 0)
    out["SwigluClaimGraphVerdict"] = kit.claim_verdict(removed, GRAPH_REMOVED_PCT)
    gemm = d[d["gemm_in"].astype(float) > 0]
    for k, n in _gemm_shapes():
        name = model_macro_name(_model(GEMM_MODELS, (k, n), "a GEMM group's (gemm_in, hidden)"))
        g = gemm[gemm["gemm_in"].eq(k) & gemm["hidden"].eq(n)]
        speedup = kit.ratio(*(kit.first(g[g["impl"].eq(impl)], kit.DEVICE_REPS) for impl in ("matmul", "gemm_fused")))
        out[f"SwigluGemmFusedSpeedup{name}"] = kit.fmt(speedup.value, 2)
        out[f"SwigluGemmFusedSpeedup{name}Ci"] = kit.interval(speedup)
        out[f"SwigluGemmFusedSpeedup{name}Tie"] = kit.tie_word(speedup)
        out[f"SwigluGemmFusedTflops{name}"] = kit.fmt(kit.median(g, "tflops", impl="gemm_fused"), 0)
        out[f"SwigluGemmMatmulTflops{name}"] = kit.fmt(kit.median(g, "tflops", impl="matmul"), 0)
        for impl, iname in (("gemm_fused", "Fused"), ("matmul", "Matmul")):
            for q, qname in (("q10_ms", "QTen"), ("q90_ms", "QNinety")):
                out[f"SwigluGemm{iname}{qname}Ms{name}"] = kit.fmt(kit.median(g, q, impl=impl), 3)
    out["SwigluGemmWarmupMs"] = kit.fmt(kit.median(gemm, "warmup_ms", impl="gemm_fused"), 0)
    # the source kernel's output dtype (its rows' out_dtype) and the input dtypes of its wrong rows
    rows = _prepared(df)
    seed = rows[rows["impl"].eq("seed")]
    dtypes = sorted(seed.loc[seed["status"].eq("ok"), "out_dtype"].dropna().unique())
    out["SwigluSeedOutDtype"] = ", ".join(dtypes) or style.MISSING
    wrong = sorted(seed.loc[seed["status"].eq("wrong"), "dtype"].unique()) if not seed.empty else []
    out["SwigluSeedWrongDtypes"] = (", ".join(wrong) or "none") if not seed.empty else style.MISSING
    # its bfloat16 rows (those the claims table quotes): the dtype they wrote and how close their values were
    bf_rows = rows[rows["status"].eq("ok") & rows["dtype"].eq("bfloat16")]
    seed_bf = bf_rows[bf_rows["impl"].eq("seed")]
    out["SwigluSeedBfSixteenOutDtype"] = ", ".join(sorted(seed_bf["out_dtype"].dropna().unique())) or style.MISSING
    out["SwigluToleranceBfSixteen"] = f"{TOLERANCE['bfloat16']:g}"
    for impl, iname in (("seed", "Seed"), ("triton", "Triton")):
        err = pd.to_numeric(bf_rows.loc[bf_rows["impl"].eq(impl), "rel_err"], errors="coerce").max()
        out[f"Swiglu{iname}BfSixteenMaxErr"] = kit.fmt(err, 5)
    return out
