"""The SwiGLU report on a small synthetic tidy table: derive, every figure, table and macro."""

import json
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

from kernels.paper import style
from kernels.swiglu import numbers, report


def _row(impl, p, numel, us, tokens=None, hidden=8192, series="flat", launch="stream", gemm_in=0,
         status="ok", dtype="bfloat16", flops=0, roles=()):
    tokens = tokens or numel // hidden
    per_pass = {"fwd": 3, "bwd": 5, "fwdbwd": 8}[p]
    nbytes = per_pass * numel * 2 if not gemm_in else (tokens * gemm_in + gemm_in * 2 * hidden + numel) * 2
    ms = us / 1e3 if status == "ok" else np.nan
    return dict(study="swiglu", impl=impl, **{"pass": p}, dtype=dtype, series=series, launch=launch,
                tokens=tokens, hidden=hidden, numel=numel, gemm_in=gemm_in, status=status,
                error=None if status == "ok" else "x", device_ms=ms, q10_ms=ms, q90_ms=ms, n_reps=10,
                latency_ms=ms + 0.005 if status == "ok" else np.nan, host_overhead_ms=0.005,
                bytes=nbytes, flops=flops, gbps=nbytes / (ms / 1e3) / 1e9, tflops=flops / (ms / 1e3) / 1e12,
                gpu="h200", rel_err=1e-3, compile_s=9.5 if impl.startswith("compile") else np.nan,
                roles=" ".join([series, *roles]), device_times_ms=json.dumps([ms] * 10 if status == "ok" else []),
                times_ms=json.dumps([ms + 0.005] * 10 if status == "ok" else []))


@pytest.fixture
def tidy():
    rows = []
    for k in (20, 26, 30):
        n = 2**k
        copy_us = 6 * n / 4.27e3 / 1e3  # 4.27 TB/s at 6 B/element
        for impl, f in (("copy", 1.0), ("eager", 1.7), ("triton", 1.03), ("seed", 1.05), ("liger", 1.04)):
            rows.append(_row(impl, "fwd", n, copy_us * f))
        for p, scale in (("bwd", 5 / 3), ("fwdbwd", 8 / 3)):
            for impl, f in (("copy", 1.0), ("eager", 1.9), ("triton", 1.05)):
                rows.append(_row(impl, p, n, copy_us * scale * f))
    rows.append(_row("liger", "bwd", 2**26, np.nan, status="unsupported"))
    for p in ("fwd", "fwdbwd"):  # model shapes
        for impl, us in (("eager", 286.0), ("compile", 167.0), ("triton", 168.0)):
            rows.append(_row(impl, p, 8192 * 14336, us * (2.7 if p == "fwdbwd" else 1), tokens=8192,
                             hidden=14336, series="grid", roles=["profile"]))
    for t in (1, 16, 64):  # decode
        for impl, launch, us in (("eager", "stream", 8.6), ("eager", "graph", 4.0), ("decode", "graph", 2.5),
                                 ("decode", "stream", 9.0), ("triton", "stream", 18.4)):
            rows.append(_row(impl, "fwd", t * 14336, us, tokens=t, hidden=14336, series="decode", launch=launch,
                             roles=["quoted_decode"] if t == 16 else []))
    for (k, n), (mf, mm) in {(4096, 14336): (2.9, 3.1), (8192, 28672): (11.0, 11.6)}.items():
        flops = 2 * 8192 * k * 2 * n
        for impl, ms in (("gemm_fused", mf), ("matmul", mm), ("eager", mm + 0.2)):
            rows.append(_row(impl, "fwd", 8192 * n, ms * 1e3, tokens=8192, hidden=n, gemm_in=k, series="gemm",
                             flops=flops) | {"warmup_ms": 1000})
    return pd.DataFrame(rows)


def test_derive_adds_metrics(tidy):
    df = report.derive(tidy)
    for col in ("us", "q10_us", "q90_us", "pct_copy", "pct_peak", "speedup_eager"):
        assert col in df
    assert len(df) == len(tidy)
    row = df[(df["impl"] == "triton") & (df["pass"] == "fwd") & (df["numel"] == 2**26)].iloc[0]
    assert row["pct_copy"] == pytest.approx(100 / 1.03)
    assert row["speedup_eager"] == pytest.approx(1.7 / 1.03)
    assert row["pct_peak"] == pytest.approx(100 * 4270 / 1.03 / 4800, rel=1e-3)
    assert df[df["gemm_in"] > 0]["pct_copy"].isna().all()
    # derive is idempotent (the tidy CSV is derived already when figures read it)
    again = report.derive(df)
    assert np.allclose(again["speedup_eager"].fillna(-1), df["speedup_eager"].fillna(-1))


@pytest.mark.parametrize("name", sorted(report.FIGURES))
@pytest.mark.parametrize("subset", ["full", "cpu_partial", "empty", "no_columns"])
def test_figures_draw(tidy, name, subset):
    df = report.derive(tidy)
    if subset == "cpu_partial":
        df = df[df["impl"].isin(["eager", "triton"]) & (df["pass"] == "fwd")].assign(gpu="cpu")
    elif subset == "empty":
        df = df.iloc[0:0]
    elif subset == "no_columns":  # the tidy CSV of a study without rows, read back
        df = pd.DataFrame()
    fig = report.FIGURES[name](df)
    assert isinstance(fig, matplotlib.figure.Figure)
    matplotlib.pyplot.close(fig)


def test_implementations_stay_apart_where_their_values_agree(tidy):
    """Liger 0.1 % off ours: each implementation has its own marker, shifted sideways, so that no
    series hides another (none needs revealing: every marker keeps the style's size)."""
    ours = tidy["impl"].eq("triton") & tidy["pass"].eq("fwd") & tidy["series"].eq("flat")
    liger = tidy["impl"].eq("liger") & tidy["pass"].eq("fwd")
    tidy.loc[liger, "device_ms"] = tidy.loc[ours, "device_ms"].to_numpy() * 1.001  # 0.1 % apart
    fig = report.fig_bandwidth_speedup(report.derive(tidy))
    assert len(fig.axes) == 6 and style.hidden_series(fig.axes) == []
    lines = {ln.get_label(): ln for ln in fig.axes[3].lines if not ln.get_label().startswith("_")}
    assert {report._label(i) for i in ("triton", "seed", "liger")} <= set(lines) and "eager" not in lines
    marked = [ln for ln in lines.values() if ln.get_marker() != "None"]  # all but the copy's line
    assert len({(ln.get_marker(), ln.get_markerfacecolor() == "white") for ln in marked}) == len(marked) == 3
    assert all(ln.get_markersize() == matplotlib.rcParams["lines.markersize"] for ln in lines.values())
    ours, liger = lines[report._label("triton")], lines[report._label("liger")]
    assert np.all(liger.get_xdata() > ours.get_xdata())  # shifted sideways: same sizes, apart on the page
    matplotlib.pyplot.close(fig)


def test_tables(tidy):
    df = report.derive(tidy)
    shapes = report.TABLES["swiglu_model_shapes"](df)
    assert list(shapes.columns) == ["eager", "compile", "Triton (ours)", "Triton fixed (ours)"]
    assert shapes.loc[("forward", "Llama-3-8B, 16 × 14336"), "Triton fixed (ours)"] == 9.0
    assert shapes.loc[("forward", "Llama-3-8B, 8192 × 14336"), "eager"] == 286.0
    gemm = report.TABLES["swiglu_gemm"](df)
    assert gemm.loc["Llama-3-8B, 8192 × 4096 to 2 × 14336", ("speedup", "fused")] == pytest.approx(3.1 / 2.9, abs=0.01)
    assert ("TFLOP/s", "fused epilogue") in gemm.columns
    for empty in (df.iloc[0:0], pd.DataFrame()):
        for table in (report.TABLES[n](empty) for n in report.TABLES):
            assert table.empty  # rendered as "not measured", not a crash


def test_macros(tidy):
    m = report.macros(report.derive(tidy))
    assert all(name.isalpha() and name.startswith("Swiglu") for name in m)
    assert m["SwigluTritonFwdPctCopyMin"] == f"{100 / 1.03:.1f}"
    assert m["SwigluClaimLatencyVerdict"] == "not reached"  # 1.7/1.05 < 2.5
    # the latency claim is judged by latency (the host's 5 us included), each ratio with its interval
    large = [6 * 2**k / 4.27e3 / 1e6 for k in (26, 30)]  # the copy's ms at the sizes from 2^26 up
    assert m["SwigluSeedLatencySpeedupLargeRange"] == "--".join(
        f"{(1.7 * c + 0.005) / (1.05 * c + 0.005):.2f}" for c in large)
    assert m["SwigluSeedSpeedupLargeRange"] == f"{1.7 / 1.05:.2f}"
    r = 1.7 / 1.05  # every repetition the same: the interval is the ratio, rounded outwards to its decimals
    assert m["SwigluSeedSpeedupLargeRangeCi"] == f"[{math.floor(100 * r) / 100:.2f}, {math.ceil(100 * r) / 100:.2f}]"
    assert m["SwigluTritonFwdbwdSpeedupEightB"] == f"{286 / 168:.2f}"
    assert m["SwigluDecodeGraphUs"] == "2.50" and m["SwigluDecodeEagerUs"] == "8.60"
    assert m["SwigluGemmFusedSpeedupEightB"] == f"{3.1 / 2.9:.2f}"
    assert m["SwigluGemmFusedSpeedupEightBTie"] == "faster"  # every repetition the same: no tie
    # fusing the pointwise operations gains 1.7/1.03 and 1.7/1.05 at the large sizes: not the claimed 2-4x
    assert m["SwigluClaimFusionVerdict"] == "not reached"
    # decode, in us: eager launched 8.6 + 5 (host overhead 5) against 4.0 + 5 replayed; ours 9.0 + 5 against
    # 2.5 + 5: each replay removes more than the launched call's host overhead (its device time is shorter)
    removed = [100 * (8.6 - 4.0) / 5, 100 * (9.0 - 2.5) / 5]
    assert m["SwigluGraphRemovedPctRange"] == f"{min(removed):.0f}--{max(removed):.0f}"
    assert m["SwigluClaimGraphVerdict"] == "holds"  # every share from 90 % up
    assert (m["SwigluGemmFusedQNinetyMsEightB"], m["SwigluGemmMatmulQTenMsEightB"]) == ("2.900", "3.100")
    assert m["SwigluGemmWarmupMs"] == "1000"
    assert m["SwigluCompileSecondsEightB"] == "9.5"
    for empty in (report.macros(tidy.iloc[0:0]), report.macros(pd.DataFrame())):
        criteria = ("SwigluGraphRemovedPctClaim", "SwigluToleranceBfSixteen")  # a criterion, not data
        measured = {k: v for k, v in empty.items() if k not in criteria}
        assert set(empty) == set(m) and set(measured.values()) == {"n/a"}
    seed = tidy[tidy["impl"] == "seed"].iloc[:2].assign(out_dtype="float16", status=["ok", "wrong"],
                                                        dtype=["bfloat16", "float32"])
    assert {k: report.macros(seed)[k] for k in ("SwigluSeedOutDtype", "SwigluSeedWrongDtypes")} == {
        "SwigluSeedOutDtype": "float16", "SwigluSeedWrongDtypes": "float32"}
    # its bfloat16 rows write float16; their values checked against bfloat16's tolerance
    assert (report.macros(seed)["SwigluSeedBfSixteenOutDtype"], m["SwigluToleranceBfSixteen"]) == ("float16", "0.01")
    assert m["SwigluSeedBfSixteenMaxErr"] == "0.00100"


def test_the_bandwidth_shares_carry_their_intervals(tidy):
    """The shares of the datasheet's and of the copy's bandwidth, in %, each with the interval of its
    repetitions: the bytes are exact, the device times resampled."""
    m = report.macros(report.derive(tidy))
    # the seed at 1.05 times the copy's time, at 2^26 and 2^30 elements: 100/1.05 % of the copy at both
    assert m["SwigluSeedFwdPctCopyRange"] == f"{100 / 1.05:.1f}"
    assert m["SwigluSeedFwdPctCopyRangeCi"] == f"[{math.floor(1000 / 1.05) / 10:.1f}, {math.ceil(1000 / 1.05) / 10:.1f}]"
    d = report.derive(tidy)
    peak = d[d["impl"].eq("triton") & d["pass"].eq("fwd") & (d["numel"] >= numbers.LARGE)]["pct_peak"]
    assert m["SwigluTritonFwdPctPeakRange"] == f"{peak.min():.1f}--{peak.max():.1f}"
    assert m["SwigluTritonFwdPctPeakRangeCi"] == (f"[{math.floor(10 * peak.min()) / 10:.1f}, "
                                                  f"{math.ceil(10 * peak.max()) / 10:.1f}]")
    # spread repetitions widen the interval around the same median
    spread = tidy.copy()
    seeds = spread["impl"].eq("seed")
    spread.loc[seeds, "device_times_ms"] = [json.dumps(list(ms * np.linspace(0.9, 1.1, 11)))
                                            for ms in spread.loc[seeds, "device_ms"]]
    low, high = map(float, report.macros(report.derive(spread))["SwigluSeedFwdPctPeakRangeCi"].strip("[]").split(","))
    assert low < float(m["SwigluSeedFwdPctPeakRange"]) < high and high - low > 1


def test_the_share_of_host_overhead_a_graph_removes_carries_its_interval(tidy):
    """The share of a launched decode call's host overhead that a CUDA graph's replay removes, per case,
    with the percentile-bootstrap interval of the three timings' repetitions resampled apart (the launched
    latencies, its device times, the replayed latencies); of the range, from its lowest to its highest end."""
    from kernels.paper import report_kit as kit

    m = report.macros(report.derive(tidy))
    assert m["SwigluGraphRemovedPctRangeCi"] == "[92, 130]"  # every repetition the same: the shares themselves
    rng = np.random.default_rng(1)
    noisy = tidy.copy()
    for i in noisy.index[noisy["series"].eq("decode")]:
        device = noisy.at[i, "device_ms"] * (1 + 0.05 * rng.standard_normal(40))
        latency = (noisy.at[i, "device_ms"] + 0.005) * (1 + 0.05 * rng.standard_normal(30))
        noisy.loc[i, ["device_ms", "latency_ms"]] = np.median(device), np.median(latency)
        noisy.at[i, "device_times_ms"], noisy.at[i, "times_ms"] = json.dumps(list(device)), json.dumps(list(latency))
    d = report.derive(noisy)
    shares = numbers._graph_removed(kit.with_role(d[d["status"].eq("ok") & d["pass"].eq("fwd")], "decode"))
    assert len(shares) == 6 and all(r.low < r.value < r.high for r in shares)  # eager and ours at 3 sizes each
    # the first case (ours, "decode", at 1 token): its interval by hand
    rows = d[d["series"].eq("decode") & d["impl"].eq("decode") & d["tokens"].eq(1)]
    launched, replayed = rows[rows["launch"].eq("stream")].iloc[0], rows[rows["launch"].eq("graph")].iloc[0]
    draw = np.random.default_rng(kit.SEED)
    lat, dev, graph = (kit.resampled_medians(draw, kit.repetitions(c)) for c in
                       (launched["times_ms"], launched["device_times_ms"], replayed["times_ms"]))
    low, high = kit.level_bounds(100 * (lat - graph) / (lat - dev))
    assert (shares[0].low, shares[0].high) == pytest.approx((low, high))
    assert shares[0].value == pytest.approx(100 * (launched["latency_us"] - replayed["latency_us"])
                                            / (launched["latency_us"] - launched["us"]))
    text = report.macros(d)["SwigluGraphRemovedPctRangeCi"]
    assert text == f"[{math.floor(min(r.low for r in shares))}, {math.ceil(max(r.high for r in shares))}]"


@pytest.mark.parametrize("gpu, peak, label", [("h200", 4800.0, "H200"), ("h100-80gb-hbm3", 3350.0, "H100 SXM")])
def test_each_measured_gpu_model_has_its_datasheet_bandwidth(tidy, gpu, peak, label):
    """The H200's and the H100's rows (data/raw/h200, data/raw/h100-80gb-hbm3) are each compared with their
    own datasheet's HBM bandwidth: the shares of it, the bandwidth claim's verdict and the TB/s the text
    quotes are numbers, never n/a, and the figure's line is labelled with the model's name."""
    from kernels.paper import rows

    assert set(report.PEAK_GBPS) <= set(rows.MODELS)
    d = report.derive(tidy.assign(gpu=gpu))
    row = d[(d["impl"] == "triton") & (d["pass"] == "fwd") & (d["numel"] == 2**26)].iloc[0]
    assert row["pct_peak"] == pytest.approx(100 * 4270 / 1.03 / peak, rel=1e-3)
    m = report.macros(d)
    assert m["SwigluPeakTBps"] == f"{peak / 1e3:g}"
    for name in ("SwigluSeedFwdPctPeakRange", "SwigluSeedFwdPctPeakRangeCi", "SwigluTritonFwdPctPeakRange",
                 "SwigluTritonFwdPctPeakRangeCi", "SwigluClaimBandwidthVerdict"):
        assert m[name] != "n/a", name
    fig = report.fig_bandwidth_speedup(d)
    bandwidth = fig.axes[:3]  # the top row: TB/s
    assert {t.get_text() for ax in bandwidth for t in ax.texts} == {f"{label} datasheet"}
    assert {ln.get_ydata()[0] for ax in bandwidth for ln in ax.lines if ln.get_linestyle() == ":"} == {peak / 1e3}
    matplotlib.pyplot.close(fig)
    # a GPU without a datasheet entry (the CPU's smoke rows): no share, no line, n/a
    cpu = report.derive(tidy.assign(gpu="cpu"))
    assert cpu["pct_peak"].isna().all()
    assert (report.macros(cpu)["SwigluPeakTBps"], report.macros(cpu)["SwigluClaimBandwidthVerdict"]) == ("n/a", "n/a")


def test_liger_is_compared_with_ours_at_each_model_width(tidy):
    """Liger's forward time over ours per FFN width of the grid series from 2^26 elements: the width
    where it is slowest is named, with its ratios, intervals and share of the copy's bandwidth."""
    rows = []
    for hidden, slow in ((11008, 1.01), (18944, 1.24), (28672, 1.07)):
        for impl, f in (("copy", 1.0), ("triton", 1.02), ("liger", 1.02 * slow)):
            rows += [_row(impl, "fwd", t * hidden, 100.0 * f * t / 8192, tokens=t, hidden=hidden, series="grid")
                     for t in (8192, 16384)]
    m = report.macros(report.derive(pd.concat([tidy, pd.DataFrame(rows)], ignore_index=True)))
    assert (m["SwigluLigerSlowHidden"], m["SwigluLigerSlowModel"]) == ("18944", "Qwen2-7B")
    assert (m["SwigluLigerSlowOverTritonRange"], m["SwigluLigerSlowOverTritonRangeCi"]) == ("1.24", "[1.24, 1.24]")
    assert (m["SwigluLigerOtherOverTritonRange"], m["SwigluLigerOtherOverTritonRangeCi"]) == (
        "1.01--1.07", "[1.01, 1.07]")
    assert m["SwigluLigerSlowPctCopyRange"] == f"{100 / (1.02 * 1.24):.1f}"
    assert m["SwigluTritonSlowPctCopyRange"] == f"{100 / 1.02:.1f}"
    assert report.macros(report.derive(tidy))["SwigluLigerSlowHidden"] == "n/a"  # no grid widths measured


def test_macros_are_named_after_the_configs_models(tidy, monkeypatch):
    """The model-shape macros take their names from config key models (a model's size in words),
    and a shape the text quotes without a model there is an error naming that key."""
    assert [numbers.model_macro_name(n) for n in ("Llama-3-8B", "Llama-3-70B", "Qwen2-7B")] == [
        "EightB", "SeventyB", "SevenB"]
    monkeypatch.setitem(report.MODELS, 14336, "Mistral-7B")
    monkeypatch.setitem(report.GEMM_MODELS, (8192, 28672), "Qwen2-72B")
    m = report.macros(report.derive(tidy))
    assert m["SwigluTritonFwdbwdSpeedupSevenB"] == f"{286 / 168:.2f}" and "SwigluTritonFwdbwdSpeedupEightB" not in m
    assert m["SwigluGemmFusedSpeedupSeventyTwoB"] == f"{11.6 / 11.0:.2f}"
    monkeypatch.delitem(report.GEMM_MODELS, (8192, 28672))
    with pytest.raises(ValueError, match=r"swiglu\.sweep\.models: .* \(8192, 28672\)"):
        report.macros(report.derive(tidy))
