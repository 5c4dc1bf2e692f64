"""The long-context study: its cases, checks and calls on the CPU, the slopes and crossover, and
its report from no rows and from synthetic ones."""

import math
import re
from pathlib import Path

import numpy as np
import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch
import yaml
from conftest import configured_timing

from kernels.core import correctness, harness
from kernels.longctx import attention, numbers, report, scaling, study, tidy

ROOT = Path(__file__).resolve().parent.parent
SECTION = yaml.safe_load((ROOT / "config" / "studies" / "longctx.yaml").read_text())["longctx"]
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _fresh_checks():
    study._CHECKED.clear()
    yield
    study._CHECKED.clear()


def test_the_config_sections_pass_their_checks():
    study.check_config(SECTION)


def test_cases_follow_the_phases_passes_and_caps_of_the_config():
    sweep = SECTION["sweep"]
    cudnn = study.cases(sweep, "sdpa_cudnn")
    prefill = [c for c in cudnn if c["phase"] == "prefill"]
    assert {c["pass"] for c in prefill} == {"fwd", "fwdbwd"}
    cap = sweep["prefill"]["max_seqlen"]["fwdbwd"]["sdpa_cudnn"]
    assert max(c["seqlen"] for c in prefill if c["pass"] == "fwdbwd") == cap
    assert [c["seqlen"] for c in prefill if c["pass"] == "fwd"] == sweep["prefill"]["seqlens"]
    decode = [c for c in cudnn if c["phase"] == "decode"]
    assert len(decode) == len(sweep["decode"]["seqlens"]) * len(sweep["decode"]["launches"])
    assert all(c["kv_heads"] == sweep["attention"]["kv_heads"] and "value_heads" not in c for c in cudnn)
    chunk = study.cases(sweep, "chunk")
    assert {c["phase"] for c in chunk} == {"prefill"} and all(c["value_heads"] == 32 for c in chunk)
    recurrent = study.cases(sweep, "recurrent")
    assert {(c["phase"], c["pass"]) for c in recurrent} == {("decode", "fwd")}
    assert all(c["roles"] == [c["phase"]] and c["check_seqlen"] == sweep["check_seqlen"] for c in cudnn + chunk)
    assert study.cases({**sweep, "impls": ["chunk"]}, "flex") == []
    assert not [c for c in study.cases(sweep, "flex_flash") if c["phase"] == "decode"]   # not in decode.impls
    with pytest.raises(ValueError, match="unknown longctx impl 'nope'"):
        study.cases(sweep, "nope")


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["attention"].update(kv_heads=3), r"^smoke\.attention\.kv_heads: heads 2 are not a multiple"),
    (lambda s: s["gdn"].update(value_heads=3, heads=2), r"^smoke\.gdn\.value_heads: 3 is not a multiple of heads 2"),
    (lambda s: s.update(check_seqlen=10**6), r"^smoke\.check_seqlen: 1000000 is longer than the shortest"),
    (lambda s: s["prefill"].update(max_seqlen={"fwdbwd": {"recurrent": 64}}),
     r"^smoke\.prefill\.max_seqlen\.fwdbwd\.recurrent: recurrent has no prefill fwdbwd"),
    (lambda s: s["decode"].update(impls=["chunk"]), r"^smoke\.decode\.impls: chunk has no decode phase"),
])
def test_a_config_that_makes_no_sense_is_refused_naming_its_key(edit, message):
    section = yaml.safe_load((ROOT / "config" / "studies" / "longctx.yaml").read_text())["longctx"]
    edit(section["smoke"])
    with pytest.raises(ValueError, match=message):
        study.check_config(section)


def _case(impl, phase="prefill", pas="fwd", seqlen=64, launch="stream"):
    (case,) = [c for c in study.cases(SECTION["smoke"], impl)
               if (c["phase"], c["pass"], c["seqlen"], c["launch"]) == (phase, pas, seqlen, launch)]
    return case


def test_a_gdn_prefill_is_checked_at_the_short_length_and_timed_at_its_own(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    row = harness.measure_case(study, "chunk", _case("chunk", seqlen=128), CPU, {"cpu_reps": 1})
    assert row["status"] == "ok", row["error"]
    assert 0 < row["rel_err"] < 0.01
    assert row["check_seqlen"] == 64 and row["seqlen"] == 128
    assert row["cache_bytes"] == 2 * 32 * 32 * 4   # B HV K V float32
    assert row["flops"] > 0 and row["bytes"] > 0


def test_a_decode_step_of_the_recurrence_is_checked_against_float64(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    row = harness.measure_case(study, "recurrent", _case("recurrent", "decode"), CPU, {"cpu_reps": 1})
    assert row["status"] == "ok", row["error"]
    assert row["rel_err"] < 0.01 and row["flops"] == study.RECURRENT_FLOPS_PER_KV * 2 * 32 * 32


def test_a_wrong_decode_step_is_caught_before_timing(monkeypatch):
    from kernels.gdn import recurrent

    good = recurrent.fused_recurrent_gated_delta_rule

    def wrong(*args, **kw):
        o, ht = good(*args, **kw)
        return o * 1.1, ht

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(recurrent, "fused_recurrent_gated_delta_rule", wrong)
    row = harness.measure_case(study, "recurrent", _case("recurrent", "decode"), CPU, {"cpu_reps": 1})
    assert row["status"] == "wrong" and "recurrent decode o" in row["error"]
    with pytest.raises(correctness.Mismatch):
        study.check("recurrent", {**_case("recurrent", "decode"), "launch": "graph"}, 64, CPU)


def test_attention_decode_runs_flex_over_the_whole_cache_and_checks_it():
    row = harness.measure_case(study, "flex", _case("flex", "decode", seqlen=256), CPU, {"cpu_reps": 1})
    assert row["status"] == "ok", row["error"]
    assert row["rel_err"] < 0.01
    assert row["cache_bytes"] == 2 * 1 * 256 * 64 * 2   # k and v, B H_kv T D bf16


@pytest.mark.parametrize("impl, phase, pas, launch, reason", [
    ("sdpa_cudnn", "prefill", "fwd", "stream", "sdpa_cudnn: a CUDA kernel"),
    ("flex", "prefill", "fwdbwd", "stream", "FlexAttention backward is not implemented on the CPU"),
    ("recurrent", "decode", "fwd", "graph", "CUDA graphs need a CUDA device"),
])
def test_what_the_cpu_cannot_run_is_unsupported(impl, phase, pas, launch, reason):
    case = {**_case("flex" if impl != "recurrent" else "recurrent", phase, pas), "launch": launch}
    row = harness.measure_case(study, impl, case, CPU, {"cpu_reps": 1})
    assert row["status"] == "unsupported" and reason in row["error"]


def test_only_prefill_and_decode_lengths_are_attention():
    q, k = torch.zeros(1, 2, 4, 8), torch.zeros(1, 1, 16, 8)
    with pytest.raises(ValueError, match="N_q=4 queries against N_k=16 keys"):
        attention.causal_attention("sdpa_flash", q, k, k)
    with pytest.raises(ValueError, match="unknown attention impl 'nope'"):
        attention.causal_attention("nope", q[:, :, :1], k, k)


# ----------------------------------------------------------------------------
# slopes and crossover


@pytest.mark.parametrize("dof, exact", [(2, 4.303), (3, 3.182), (4, 2.776), (10, 2.228), (60, 2.000)])
def test_the_t_quantile_is_close_to_the_tables(dof, exact):
    assert scaling.t_quantile(0.975, dof) == pytest.approx(exact, rel={2: 0.01, 3: 2e-3}.get(dof, 3e-4))


def test_a_power_law_gives_its_exponent_and_noise_widens_the_interval():
    t = 2.0 ** np.arange(10, 20)
    exact = scaling.fit_slope(t, 3e-9 * t**2)
    assert exact.p == pytest.approx(2.0) and exact.high - exact.low < 1e-9 and exact.n == 10
    noisy = scaling.fit_slope(t, t * np.exp(np.random.default_rng(0).normal(0, 0.1, t.size)), min_seqlen=2**14)
    assert noisy.n == 6 and noisy.low < 1 < noisy.high and noisy.high - noisy.low > 0.05
    assert scaling.fit_slope(t[:3], t[:3]) == scaling.NO_SLOPE
    assert scaling.fit_slope(t, np.full(t.size, np.nan)) == scaling.NO_SLOPE


def test_the_crossover_is_interpolated_in_log_length():
    t = 2.0 ** np.arange(10, 16)
    linear, quadratic = 1e-1 * t, 1e-5 * t**2   # equal at T = 10000
    c = scaling.crossover(t, linear, quadratic)
    assert c.where == "inside" and c.seqlen == pytest.approx(10000)  # a power law on either side: exact in log T
    assert scaling.crossover(t, 0.1 * quadratic, quadratic).where == "below"
    assert scaling.crossover(t, 10 * quadratic, quadratic).where == "above"
    assert scaling.crossover(t, np.full(t.size, np.nan), quadratic).where == "none"


# ----------------------------------------------------------------------------
# the report


def test_the_report_renders_from_no_rows_and_defines_every_macro_the_paper_uses():
    empty = report.derive(pd.DataFrame())
    for name, fig in report.FIGURES.items():
        fig(empty)
    assert all(table(empty).empty for table in report.TABLES.values())
    m = report.macros(pd.DataFrame())
    assert m["LongctxMeasured"] == "false" and m["LongctxLinearVerdict"] == "n/a"
    used = set(re.findall(r"\\(Longctx[A-Za-z]+)", (ROOT / "paper" / "main.tex").read_text()))
    assert used - {"LongctxMeasuredtrue", "LongctxMeasuredfalse"} <= set(m), sorted(used - set(m))
    assert set(report.HEADLINES) <= set(m) and set(report.CLAIMS) <= set(m)


def _synthetic() -> pd.DataFrame:
    """Rows at the sweep's lengths: attention quadratic, GDN linear, equal at 8K tokens; memory linear."""
    sweep = SECTION["sweep"]
    rows = []
    for impl in study.IMPLS:
        for case in study.cases(sweep, impl):
            t = case["seqlen"]
            if case["phase"] == "prefill":
                ms = (1e-7 * t**2 if impl in report.ATTENTION else 8192e-7 * t) * (1 + 0.01 * (impl not in ("sdpa_cudnn", "chunk")))
            else:
                ms = 1e-6 * t if impl in report.ATTENTION else 0.005
            rows.append({**case, "impl": impl, "gpu": "h200", "status": "ok", "device_ms": ms, "q10_ms": 0.98 * ms,
                         "q90_ms": 1.02 * ms, "latency_ms": ms + 0.01, "peak_mem_bytes": 1000 * t, "bytes": 2**11 * t,
                         "cache_bytes": study.cache_bytes(case), "rel_err": 0.001, "roles": case["phase"]})
    return report.derive(pd.DataFrame(rows))


def test_the_report_fits_the_slopes_finds_the_crossover_and_gives_the_verdicts():
    df = _synthetic()
    m = report.macros(df)
    assert m["LongctxMeasured"] == "true"
    assert m["LongctxSlopeSdpaCudnnFwd"] == "2.00" and m["LongctxSlopeChunkFwd"] == "1.00"
    assert m["LongctxSlopeRecurrentDecode"] == "0.00" and m["LongctxSlopeSdpaFlashDecode"] == "1.00"
    assert m["LongctxCrossoverChunkFwd"] == "8K"   # the fastest attention (cuDNN) meets it at 8K
    assert m["LongctxCrossoverChunkFwdBetween"] == "8K and 16K"   # the measured lengths it lies between
    # at 512K only cuDNN's attention is configured (the others' max_seqlen), at 128K FLASH's too
    assert m["LongctxAttentionsFwdTFiveHundredTwelveK"] == "cuDNN attention"
    assert m["LongctxAttentionsFwdTOneHundredTwentyEightK"] == "cuDNN attention and Flex FLASH attention"
    assert m["LongctxSpeedupChunkFwdTFiveHundredTwelveK"] == "64.0"   # 512K / 8K
    assert m["LongctxLinearVerdict"] == "holds" and m["LongctxMemoryVerdict"] == "holds"
    assert m["LongctxOvertakeVerdict"] == "holds"
    assert (m["LongctxSublinearFwd"], m["LongctxSublinearMem"]) == ("false", "false")
    assert m["LongctxSublinearFwdSlopes"] == m["LongctxSublinearFwdStep"] == "n/a"
    assert m["LongctxCacheMibRecurrentTFiveHundredTwelveK"] == "2.0"   # 32 x 128 x 128 float32
    assert m["LongctxCacheMibSdpaCudnnTFiveHundredTwelveK"] == "512.0"   # 2 x 2 x 512K x 128 bf16
    # the prefill forward's peak (1000 B a token: 0.49 GiB at 512K) beside its inputs and outputs (2 KiB a token)
    assert (m["LongctxPeakGibChunkTFiveHundredTwelveK"], m["LongctxIoGibChunkTFiveHundredTwelveK"]) == ("0.5", "1.0")
    assert m["LongctxPeakGibSdpaFlashTFiveHundredTwelveK"] == "n/a"   # FA2 stops at 64K (max_seqlen)
    assert "LongctxPeakGibRecurrentTFiveHundredTwelveK" not in m   # decode only
    # one decode step launched from Python: device time 5 µs + the 10 µs the rows add; from a graph the same
    assert m["LongctxDecodeLatencyUsRecurrentTFiveHundredTwelveK"] == "15.0"
    slopes = report.table_slopes(df)
    assert ("prefill time", "GDN chunked (ours)") in slopes.index
    table = report.table_main(df)
    assert table.loc["GDN recurrent (ours)", ("T = 512K", "decode µs")] == pytest.approx(5.0)
    assert "Flex attention" not in table.index  # stops at 64K (max_seqlen): no row of empty cells
    for fig in report.FIGURES.values():
        fig(df)


def _with_repetitions(df: pd.DataFrame, spread: float = 0.01) -> pd.DataFrame:
    """``df`` with 21 device-time repetitions per row, evenly spread ``spread`` either side of its median."""
    return df.assign(device_times_ms=[list(ms * np.linspace(1 - spread, 1 + spread, 21)) for ms in df["device_ms"]])


def test_the_crossover_lies_between_the_lengths_where_the_speedups_intervals_decide():
    """``LongctxCrossover<Impl><Pass>Ci``: from the longest length at which our prefill is slower than the fastest
    attention by its speedup's interval (wholly below 1) to the shortest from which it is faster at every length
    (wholly above 1); a length whose interval holds 1 decides neither way."""
    df = _with_repetitions(_synthetic())
    m = report.macros(df)
    # ours and cuDNN equal at 8K: its interval holds 1, so the crossover lies between 4K (slower) and 16K (faster)
    assert m["LongctxCrossoverChunkFwd"] == "8K" and m["LongctxCrossoverChunkFwdCi"] == "[4K, 16K]"
    assert m["LongctxCrossoverChunkFwdSpan"] == "between 4K and 16K"  # the abstract's words: no false precision
    # ours 1.5 times slower: 0.67 times the fastest attention at 8K, 1.33 at 16K (the crossover at 12K)
    slower = df.copy()
    ours = slower["impl"].eq("chunk")
    slower.loc[ours, ["device_ms", "q10_ms", "q90_ms"]] *= 1.5
    m = report.macros(report.derive(_with_repetitions(slower)))
    assert m["LongctxCrossoverChunkFwd"] == "12K" and m["LongctxCrossoverChunkFwdCi"] == "[8K, 16K]"
    assert numbers.crossover_texts(_synthetic(), "chunk") == ("n/a", "n/a")  # no repetitions: no intervals
    # ours faster at every length: none wholly slower; slower at every length: no crossover measured
    lengths = sorted(df.loc[df["phase"].eq("prefill"), "seqlen"].unique())
    first, last = report.style.tokens(lengths[0]), report.style.tokens(lengths[-1])
    faster, slowest = (df.copy() for _ in range(2))
    for frame, factor in ((faster, 1 / 100), (slowest, 100)):
        frame.loc[frame["impl"].eq("chunk"), ["device_ms", "q10_ms", "q90_ms"]] *= factor
    faster, slowest = (report.derive(_with_repetitions(frame)) for frame in (faster, slowest))
    assert numbers.crossover_texts(faster, "chunk") == (f"[below {first}, {first}]", f"at most {first}")
    assert numbers.crossover_texts(slowest, "chunk") == (f"[{last}, above {last}]", f"beyond {last}")


def test_the_prefill_figure_sets_the_peak_memory_beside_the_times():
    df = _synthetic()  # every prefill needs the same memory: attention's series lie on each other
    df.loc[df["impl"].isin(tidy.GDN), "peak_mem_gib"] *= 4
    fig = report.fig_prefill(df)
    memory = fig.axes[2]
    assert memory.get_title() == "forward, peak memory" and memory.get_ylabel() == "GiB"
    drawn = {re.sub(r" \([=≈] .*\)$", "", ln.get_label()) for ln in memory.lines}  # without "(= B)" notes
    assert {"cuDNN attention", "FA2 attention", "GDN chunked (ours)", "GDN FlashQLA"} <= drawn
    assert "GDN recurrent (ours)" not in drawn  # decode only
    size = plt.rcParams["lines.markersize"]
    assert all(ln.get_markersize() == size for ax in fig.axes for ln in ax.lines)  # none enlarged over another
    # each line's peak at the longest length, written beside its end, at least a line of type apart
    prefill = tidy._rows(df, "prefill")
    longest = prefill[prefill["seqlen"].eq(prefill["seqlen"].max())]["peak_mem_gib"]
    assert sorted(t.get_text() for t in memory.texts) == sorted(f"{v:.1f}" for v in longest)
    heights = sorted(t.get_window_extent().y0 * 72 / fig.dpi for t in memory.texts)
    assert min(np.diff(heights)) >= report.LABEL_GAP_PT - 1e-6
    forward = [ln for ln in fig.axes[0].lines if not ln.get_label().startswith("_")]
    plt.close(fig)
    assert len({ln.get_marker() for ln in forward}) == len(forward) > 4  # each implementation its own marker


def test_labels_that_lie_close_are_spaced_around_their_mean():
    assert report._spread([0.0, 1.0, 20.0, 21.0, 40.0], 7.0) == [-3.0, 4.0, 17.0, 24.0, 40.0]
    assert report._spread([0.0, 3.0, 6.0], 7.0) == [-4.0, 3.0, 10.0]  # a run grows until none overlaps
    assert report._spread([0.0, 10.0], 7.0) == [0.0, 10.0]


def test_flas_name_in_the_prefill_figure_and_table_says_its_backward_ran_tilelang():
    """Rows timed with Triton 3.6 on Hopper, where FLA's gated backward runs TileLang's kernels
    (kernels.gdn.fla_names.FLA_TRITON_REFUSED): FLA's one legend entry and its table row say so; with
    Triton 3.7.1 they say "GDN FLA"."""
    df = _synthetic()
    assert {"fwd", "fwdbwd"} <= set(df.loc[df["impl"] == "fla_chunk", "pass"])
    for triton, name in (("3.6.0", "GDN FLA, backward in TileLang"), ("3.7.1", "GDN FLA")):
        d = df.assign(env_triton=triton, env_capability=9.0)
        fig = report.fig_prefill(d)
        legend = [re.sub(r" \([=≈] .*\)$", "", t.get_text()) for legend in fig.legends for t in legend.get_texts()]
        plt.close(fig)
        assert name in legend and not ({"GDN FLA", "GDN FLA, backward in TileLang"} - {name}) & set(legend)
        assert name in report.table_main(d).index


def test_the_length_axis_writes_labels_two_octaves_apart_and_the_longest_always():
    k = 1024
    assert report._tick_labels([k, 2 * k, 4 * k, 8 * k, 16 * k, 64 * k, 128 * k, 512 * k]) == \
        ["1K", "", "4K", "", "16K", "64K", "", "512K"]
    assert report._tick_labels([k, 2 * k, 4 * k, 8 * k, 16 * k, 64 * k, 128 * k]) == \
        ["1K", "", "4K", "", "16K", "", "128K"]  # 64K left blank: one octave below the longest
    assert report._tick_labels([64, 128]) == ["64", "128"] and report._tick_labels([64]) == ["64"]


def test_a_quadratic_gdn_fails_the_linear_verdict():
    df = _synthetic()
    gdn = df["impl"].isin(tidy.GDN) & (df["phase"] == "prefill")
    df.loc[gdn, "device_ms"] = df.loc[gdn, "seqlen"] ** 2 * 1e-9
    assert numbers.verdicts(df)["LongctxLinearVerdict"] == "partly holds (4 of 8)"  # attention's 4, no GDN's 4
    assert math.isnan(report.crossover_of(df.iloc[:0], "chunk").seqlen)


def test_a_slope_below_one_counts_as_linear_and_is_named_with_where_its_time_per_token_falls():
    """O(n) is a bound: a GDN kernel whose time per token halves between 16K and 64K fits a slope
    whose interval lies below 1; the verdict holds and the macros name it, its slope between its two
    longest lengths (1: linear there) and the step. Attention's memory with a part that does not grow
    with the length is named the same way."""
    df = _synthetic()
    qla = (df["impl"] == "flash_qla") & (df["phase"] == "prefill")
    df.loc[qla, "device_ms"] = df.loc[qla, "device_ms"] * np.where(df.loc[qla, "seqlen"] >= 65536, 0.5, 1.0)
    cudnn = df["impl"] == "sdpa_cudnn"
    df.loc[cudnn, "peak_mem_gib"] = df.loc[cudnn, "peak_mem_gib"] + 0.05
    m = report.macros(df)
    fitted = report.slopes(df)[("Fwd", "flash_qla")]
    assert fitted.high < 1 and m["LongctxLinearVerdict"] == "holds" and m["LongctxMemoryVerdict"] == "holds"
    assert m["LongctxSublinearFwd"] == "true"
    assert m["LongctxSublinearFwdSlopes"] == (f"GDN FlashQLA {m['LongctxSlopeFlashQlaFwd']} [{m['LongctxSlopeFlashQlaFwdLow']}, "
                                              f"{m['LongctxSlopeFlashQlaFwdHigh']}] (1.00 between its two longest lengths, "
                                              f"128K and 512K)")
    assert m["LongctxSublinearFwdStep"] == "GDN FlashQLA: from 827.4 ns at 16K to 413.7 ns at 64K"  # 8192e-7 ms x 1.01
    assert m["LongctxSublinearMem"] == "true" and m["LongctxSublinearMemSlopes"].startswith("cuDNN attention 0.")
    assert "FA2" not in m["LongctxSublinearMemSlopes"]


def test_a_slope_whose_interval_does_not_rule_linear_growth_out_is_not_quadratic():
    """The verdicts read the slopes' 95 % intervals: attention times that scatter by 3x about a
    quadratic growth fit a slope near 2 whose interval reaches below 1.5, which shows no power."""
    df = _synthetic()
    attn = df["impl"].isin(report.ATTENTION) & (df["phase"] == "prefill")
    scatter = np.where(np.log2(df["seqlen"]).astype(int) % 2 == 0, 3.0, 1 / 3)
    df.loc[attn, "device_ms"] = df.loc[attn, "device_ms"] * scatter[attn.to_numpy()]
    fitted = report.slopes(df)[("Fwd", "sdpa_cudnn")]
    assert fitted.low < 1.5 < fitted.high
    assert numbers.verdicts(df)["LongctxLinearVerdict"] == "partly holds (4 of 8)"  # GDN's 4, no attention's 4


# ----------------------------------------------------------------------------
# on a GPU

GPU_SWEEP = {"impls": list(study.IMPLS), "dtype": "bfloat16", "batch": 1,
             "attention": {"heads": 4, "kv_heads": 2, "head_dim": 128},
             "gdn": {"heads": 2, "value_heads": 4, "head_dim": 128}, "check_seqlen": 256,
             "prefill": {"seqlens": [256, 1000], "passes": ["fwd", "fwdbwd"]},
             "decode": {"seqlens": [1000], "launches": ["stream", "graph"]},
             "fit_min_seqlen": 256, "table_seqlens": [1000]}
#: Short warm-ups and few repetitions, as the other studies' GPU tests time their cases.
TIMING = configured_timing(warmup_ms=5, warmup_max_ms=200, rep_ms=20, min_reps=3, max_reps=20, cpu_reps=1)
#: What an anchor that is not installed raises (its rows are then unsupported, as in its own study).
MISSING_ANCHOR = ("No module named", "is not installed")


#: The implementations whose cases took minutes in one of eight lanes (FlashQLA 216 s, FLA 144 s):
#: their GPU test starts first (tests/gpu_lanes.py).
LONG_IN_A_LANE = ("flash_qla", "fla_chunk")


@pytest.mark.gpu
@pytest.mark.parametrize("impl", [pytest.param(i, marks=pytest.mark.gpu_long) if i in LONG_IN_A_LANE else i
                                  for i in study.IMPLS])
def test_every_impl_runs_each_of_its_cases_on_gpu(impl):
    """Each case checked against float64 at 256 tokens, then timed at 256 and 1000 (not a multiple
    of 64), decode launched and replayed from a CUDA graph."""
    cuda = torch.device("cuda")
    for case in study.cases(GPU_SWEEP, impl):
        row = harness.measure_case(study, impl, case, cuda, TIMING)
        if row["status"] == "unsupported" and any(s in row["error"] for s in MISSING_ANCHOR):
            pytest.skip(f"{impl}: {row['error']}")
        assert row["status"] == "ok", (case, row["error"])
        assert row["rel_err"] < 0.02 and row["device_ms"] > 0 and row["peak_mem_timed_bytes"] > 0
