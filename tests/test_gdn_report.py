"""The GDN report on a small synthetic tidy table: derive, every figure and table, macros."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from kernels.gdn import report  # noqa: E402
from kernels.paper import render  # noqa: E402


#: The roles of the shapes of these tables, as config/studies/gdn.yaml's sweep gives them.
FWD_ROLES = {(4, 8192, 16): "main profile published", (1, 32768, 32): "main published", (8, 4096, 16): "main"}
BWD_ROLES = {(4, 8192, 16): "main profile", (1, 32768, 32): "main", (1, 8192, 16): "main", (1, 1024, 16): "sweep"}


def tidy():
    rows = []
    ms = {"naive": 200.0, "recurrent": 5.0, "chunk": 0.9, "fla_chunk": 1.0, "flash_qla": 0.4}
    shapes = [(1, t, 16, 1, False) for t in (1024, 2048, 4096)] + [(4, 8192, 16, 4, False),
                                                                   (1, 32768, 32, 1, False), (1, 32768, 16, 32, True)]
    for b, t, h, n, var in shapes:
        for impl, base in ms.items():
            ok = not (impl == "naive" and t > 2048)
            med = base * b * t * h / 16384 if ok else np.nan
            rows.append(dict(gpu="h200", study="gdn", impl=impl, **{"pass": "fwd"}, dtype="bfloat16", batch=b,
                             seqlen=t, heads=h, head_dim=128, num_seqs=n, varlen=var, device_ms=med,
                             roles="varlen" if var else FWD_ROLES.get((b, t, h), "sweep"),
                             flops=int(b * t * h * 1.8e5), bytes=b * t * h * 1032,
                             status="ok" if ok else "unsupported", tflops=b * t * h * 1.8e5 / med / 1e9))
    rows.append(dict(gpu="h200", study="gdn", impl="fla_recurrent", **{"pass": "fwd"}, dtype="bfloat16", batch=1,
                     seqlen=8192, heads=16, head_dim=128, num_seqs=1, varlen=False, device_ms=np.nan,
                     flops=1, bytes=1, status="error", tflops=np.nan))
    return pd.DataFrame(rows)


def test_derive_figures_tables_macros():
    df = report.derive(tidy())
    for col in ("speedup_vs_naive", "speedup_vs_fla", "ratio_to_flash_qla", "tflops"):
        assert col in df.columns
    c = df[(df.impl == "chunk") & (df.seqlen == 2048)]
    assert abs(c["speedup_vs_naive"].iloc[0] - 200 / 0.9) < 1e-6
    assert df[(df.impl == "chunk") & (df.seqlen == 8192)]["speedup_vs_naive"].isna().all()
    for name, fn in report.FIGURES.items():
        assert name.startswith("gdn_")
        plt.close(fn(df))
    t = report.TABLES["gdn_main"](df)
    assert "chunked (ours)" in t.columns and len(t) == 3
    m = report.macros(df)
    assert m["GdnNaiveMaxShape"] == "B1 T2048 H16" and m["GdnChunkMsBEightTFourK"] == "n/a"
    assert m["GdnFlashQlaSpeedupVsFlaBFourTEightK"] == "2.50"
    assert (m["GdnChunkVarlenMs"], m["GdnFlaVarlenMs"]) == ("28.800", "32.000")
    assert m["GdnVarlenCase"] == "32 sequences, T32768 H16"
    assert (m["GdnFlashQlaFwdVerdict"], m["GdnFlashQlaBwdVerdict"]) == ("holds", "n/a")
    assert all(k.isalpha() and k.startswith("Gdn") for k in m)


def test_partial_data_does_not_crash():
    df = tidy()
    df = report.derive(df[df.impl.isin(["naive"]) & (df.seqlen <= 1024)])
    for fn in report.FIGURES.values():
        plt.close(fn(df))
    report.TABLES["gdn_main"](df)
    assert report.macros(df)["GdnChunkSpeedupVsNaive"] == "n/a"
    assert report.macros(df)["GdnChunkVarlenMs"] == report.macros(df)["GdnVarlenCase"] == "n/a"
    assert report.macros(df)["GdnFlashQlaFwdVerdict"] == report.macros(df)["GdnFlashQlaBwdVerdict"] == "n/a"


def test_a_study_without_rows_renders_not_measured():
    """The tidy table of a study without rows (no columns at all, as its CSV is read back) and one
    with columns but no rows: every figure draws, every table but the published times (FlashQLA's
    own, beside n/a) is empty, every macro is n/a or a verdict of no data."""
    for df in (pd.DataFrame(), report.derive(tidy()).iloc[0:0]):
        for fn in report.FIGURES.values():
            plt.close(fn(df))
        for name, fn in report.TABLES.items():
            table = fn(df)
            if name == "gdn_published":
                assert table["FlashQLA"].isna().all() and table["FlashQLA, published"].notna().all()
            else:
                assert table.empty, name
        m = report.macros(report.derive(df))
        assert set(m) == set(report.macros(report.derive(tidy())))
        assert m.pop("GdnFlaBwdTileLang") == "false"  # the paper's switch \ifGdnFlaBwdTileLang
        assert {v for k, v in m.items() if not k.endswith(("Verdict", "Configs"))} == {"n/a"}


def bwd_tidy():
    """Backward and fwd+bwd rows at the backward's main shapes, with peak memory."""
    rows = []
    ms = {"chunk": 3.0, "fla_chunk": 3.3, "flash_qla": 2.0, "naive": np.nan}
    for pas, f in (("bwd", 0.7), ("fwdbwd", 1.0)):
        for b, t, h in [(4, 8192, 16), (1, 32768, 32), (1, 8192, 16), (1, 1024, 16), (1, 4096, 16)]:
            for impl, base in ms.items():
                med = base * f * b * t * h / (4 * 8192 * 16)
                rows.append(dict(gpu="h200", study="gdn", impl=impl, **{"pass": pas}, dtype="bfloat16", batch=b,
                                 seqlen=t, heads=h, head_dim=128, num_seqs=b, varlen=False, device_ms=med,
                                 roles=BWD_ROLES.get((b, t, h), ""),
                                 flops=int(b * t * h * 5.7e5), bytes=b * t * h * 1800,
                                 status="unsupported" if impl == "naive" else "ok",
                                 peak_mem_bytes=2**31, peak_mem_timed_bytes=2**30 * b * t * h / 2**19,
                                 rel_err_dq=0.002 if impl == "chunk" else np.nan, rel_err_dg=0.001,
                                 rel_err=0.0015 if impl == "chunk" else 0.004))
    return pd.DataFrame(rows)


def test_backward_figures_tables_macros():
    df = report.derive(pd.concat([tidy(), bwd_tidy()], ignore_index=True))
    c = df[(df.impl == "chunk") & (df["pass"] == "fwdbwd") & (df.seqlen == 8192) & (df.batch == 4)]
    assert abs(c["speedup_vs_fla"].iloc[0] - 3.3 / 3.0) < 1e-9 and abs(c["peak_mem_gib"].iloc[0] - 1.0) < 1e-9
    for fn in report.FIGURES.values():
        plt.close(fn(df))
    t = report.TABLES["gdn_main"](df)
    assert {"chunked (ours)", "FLA", "FlashQLA"} <= set(t.columns)
    assert list(t.index.get_level_values("pass").unique()) == ["forward", "backward", "forward + backward"]
    assert len(t.loc["forward"]) == 3 and len(t.loc["backward"]) == len(t.loc["forward + backward"]) == 3
    m = report.macros(df)
    assert m["GdnChunkFwdbwdSpeedupVsFlaBFourTEightK"] == "1.10"
    assert m["GdnChunkFwdbwdPeakGibBFourTEightK"] == "1.00" and m["GdnChunkMsBFourTEightK"] != "n/a"
    assert m["GdnChunkGradErrMax"] == "0.0020" and m["GdnChunkOutErrMax"] == "0.0015"
    assert m["GdnFlashQlaBwdSpeedupVsFlaBFourTEightK"] == "1.65"
    assert (m["GdnFlashQlaFwdVerdict"], m["GdnFlashQlaBwdVerdict"]) == ("holds", "not reached")
    assert all(k.isalpha() and k.startswith("Gdn") for k in m)
    bwd_only = report.derive(bwd_tidy()[lambda d: d.impl == "chunk"])
    for fn in report.FIGURES.values():
        plt.close(fn(bwd_only))
    assert report.macros(bwd_only)["GdnChunkFwdbwdSpeedupVsFlaBFourTEightK"] == "n/a"


def test_fla_backward_dispatch_says_whether_every_backward_row_of_fla_ran_tilelang():
    """``GdnFlaBwdTileLang`` reads the rows' ``dispatch``: true only where every timed backward row
    of FLA loaded TileLang; FLA's forward rows, and other implementations' rows, do not count."""
    df = pd.concat([tidy(), bwd_tidy()], ignore_index=True)
    fla_bwd = (df.impl == "fla_chunk") & (df["pass"] != "fwd")
    assert report.macros(report.derive(df))["GdnFlaBwdTileLang"] == "false"  # no dispatch recorded
    df["dispatch"] = np.where(fla_bwd, "tilelang", "fla_triton")
    assert report.fla_backward_dispatch(report.derive(df)) == {"GdnFlaBwdTileLang": "true"}
    df.loc[fla_bwd.idxmax(), "dispatch"] = "fla_triton"
    assert report.fla_backward_dispatch(report.derive(df)) == {"GdnFlaBwdTileLang": "false"}
    df.loc[fla_bwd.idxmax(), "dispatch"] = "flash_qla+tilelang"
    assert report.fla_backward_dispatch(report.derive(df)) == {"GdnFlaBwdTileLang": "true"}


def _legend(fig) -> list[str]:
    texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    plt.close(fig)
    return texts


def test_fla_is_named_by_the_kernels_its_backward_rows_ran():
    """Where FLA's backward rows ran TileLang kernels (their ``dispatch``), the main table's column, which
    holds its forward rows too, names it "FLA, backward in TileLang" and the kernel table's backward blocks
    "FLA (TileLang)"; its forward (the figure's legend, the kernel table's forward block) keeps "FLA";
    rows that record no TileLang keep "FLA" everywhere."""
    df = pd.concat([tidy(), bwd_tidy()], ignore_index=True)
    main = (df.batch == 4) & (df.seqlen == 8192) & (df.heads == 16) & df.impl.isin(["chunk", "fla_chunk"])
    df["kernels"] = np.where(main, json.dumps([{"name": "k", "calls": 1, "us": 10.0}]), None)
    plain = report.derive(df)
    fla_bwd = (df.impl == "fla_chunk") & (df["pass"] != "fwd")
    tile = report.derive(df.assign(dispatch=np.where(fla_bwd, "tilelang", "fla_triton")))
    for derived, table_name, bwd_name in ((plain, "FLA", "FLA"), (tile, "FLA, backward in TileLang", "FLA (TileLang)")):
        assert "FLA" in _legend(report.fig_time_vs_seqlen(derived))  # the forward's
        assert table_name in report.TABLES["gdn_main"](derived).columns
        kernels = report.TABLES["gdn_kernels"](derived).index.droplevel("kernel").unique()
        assert {("forward", "FLA"), ("backward", bwd_name), ("forward + backward", bwd_name)} <= set(kernels)
    # the backward's rows alone: "FLA (TileLang)"
    assert report._labels(tile[tile["pass"] != "fwd"])["fla_chunk"] == "FLA (TileLang)"
    # one backward row of FLA without TileLang: its backward is no longer all TileLang's
    mixed = df.assign(dispatch=np.where(fla_bwd, "tilelang", "fla_triton"))
    mixed.loc[fla_bwd.idxmax(), "dispatch"] = "fla_triton"
    assert "FLA" in report.TABLES["gdn_main"](report.derive(mixed)).columns


def test_main_rows_are_the_rows_of_role_main():
    """The tables and figures of the main shapes take the rows the config calls main, whatever their shape."""
    df = report.derive(pd.concat([tidy(), bwd_tidy()], ignore_index=True))
    moved = df.assign(roles=np.where((df.batch == 1) & (df.seqlen == 4096) & (df["pass"] != "fwd"), "main", df.roles))
    assert len(report.TABLES["gdn_main"](moved)) == len(report.TABLES["gdn_main"](df)) + 2
    assert "B1 T4096 H16" in report.TABLES["gdn_main"](moved).loc["backward"].index
    assert report.TABLES["gdn_main"](df.assign(roles="")).empty


def test_time_against_length_takes_the_sweep_and_the_main_shapes_at_its_batch_and_heads():
    """The figures against sequence length take the rows of role sweep, and of role main at the
    sweep's batch and heads: never another main shape, a published or a varlen row."""
    df = report.derive(pd.concat([tidy(), bwd_tidy()], ignore_index=True))
    fwd = report._sweep_rows(report._pass(df, "fwd"))
    assert sorted(fwd["seqlen"].unique()) == [1024, 2048, 4096] and set(fwd["heads"]) == {16}
    published = df[(df["pass"] == "fwd") & (df.seqlen == 4096)].assign(roles="published", seqlen=65536)
    assert report._sweep_rows(pd.concat([report._pass(df, "fwd"), published])).equals(fwd)
    fwdbwd = report._sweep_rows(report._pass(df, "fwdbwd"))
    assert sorted(fwdbwd["seqlen"].unique()) == [1024, 8192] and set(fwdbwd["batch"]) == {1}


def test_macro_names_follow_the_config_shapes():
    sweep = {"main_shapes": [{"batch": 2, "seqlen": 2048, "heads": 8, "profile": True},
                             {"batch": 1, "seqlen": 4096, "heads": 8, "value_heads": 16}],
             "backward": {"main_shapes": [{"batch": 1, "seqlen": 65536, "heads": 4}],
                          "seqlen_sweep": {"batch": 1, "heads": 4, "seqlens": [512]}}}
    shapes = report.paper_shapes(sweep)
    assert shapes["main"] == {(2, 2048, 8): "BTwoTTwoK"} and shapes["profile"] == shapes["main"]
    assert shapes["step"] == {(1, 65536, 4): "BOneTSixtyFourK", (1, 512, 4): "BOneTFiveHundredTwelve"}


def test_kernel_table_shares_and_other():
    import json

    from kernels.paper import render

    df = tidy()
    main = (df.batch == 4) & (df.seqlen == 8192)
    breakdown = {"chunk": [{"name": "_chunk_prepare_kernel", "calls": 1, "us": 1200.0},
                           {"name": "_chunk_state_kernel", "calls": 1, "us": 780.0},
                           {"name": "void at::native::reduce_kernel<512, 1>(" + "x" * 80, "calls": 1, "us": 5.0},
                           {"name": "other", "calls": 3, "us": 15.0}],
                 "fla_chunk": [{"name": "chunk_fwd_kernel_o", "calls": 1, "us": 250.0},
                               {"name": "chunk_gated_delta_rule_fwd_kernel_h", "calls": 1, "us": 250.0}]}
    df["kernels"] = [json.dumps(breakdown[i]) if m and i in breakdown else None for i, m in zip(df.impl, main)]
    t = report.TABLES["gdn_kernels"](report.derive(df))
    chunk = t.loc[("forward", "chunked (ours)")]
    assert list(chunk.index) == ["_chunk_prepare_kernel", "_chunk_state_kernel", "other"]
    assert chunk.loc["_chunk_prepare_kernel", "share %"] == 60.0 and chunk.loc["other", "µs"] == 20.0
    assert t.loc[("forward", "FLA")]["share %"].tolist() == [50.0, 50.0]
    assert "\\_chunk\\_prepare\\_kernel" in render.table_to_latex(t)
    m = report.macros(report.derive(df))
    assert m["GdnChunkKernelMsBFourTEightK"] == "2.000" and m["GdnFlaKernelMsBFourTEightK"] == "0.500"
    assert m["GdnChunkGradErrMax"] == "n/a"
    assert m["GdnChunkOutErrMax"] == "n/a"
    assert report.TABLES["gdn_kernels"](report.derive(tidy())).empty


def test_published_table_sets_flash_qlas_times_beside_this_runs():
    """FlashQLA's published times (kernels.gdn.published) beside the rows of role published at
    the same (pass, heads, value_heads, batch, seqlen); the verdicts use the measured speedups."""
    from kernels.gdn import published

    rows = []
    for impl, ms in (("flash_qla", 0.7), ("fla_chunk", 1.4), ("chunk", 1.2)):
        rows.append(dict(gpu="h200", study="gdn", impl=impl, **{"pass": "fwd"}, dtype="bfloat16", batch=1,
                         seqlen=32768, heads=16, value_heads=32, head_dim=128, num_seqs=1, varlen=False,
                         device_ms=ms, device_times_ms=json.dumps([ms] * 5), roles="published", flops=1,
                         bytes=1, status="ok"))
    rows.append({**rows[1], "device_ms": 9.0, "roles": "sweep"})  # not of the role: left out
    df = report.derive(pd.concat([tidy(), pd.DataFrame(rows)], ignore_index=True))
    t = report.table_published(df)
    row = t.loc[("forward", "16/32, 1 × 32768")]
    assert (row["FlashQLA"], row["FLA"], row["FLA/FlashQLA"], row["chunked (ours)"]) == (0.7, 1.4, 2.0, 1.2)
    theirs = published.TIMES[("fwd", 16, 32, 1, 32768)]
    assert (row["FlashQLA, published"], row["FLA, published"]) == (theirs["flash_qla"], theirs["fla_chunk"])
    assert np.isnan(t.loc[("forward", "2/8, 1 × 32768"), "FlashQLA"])
    # a main shape of role published (tidy()'s 16/16 at 4 x 8192): its times are the main table's alone, its
    # FLA over FlashQLA here stays
    main = t.loc[("forward", "16/16, 4 × 8192")]
    assert (main["FlashQLA"], main["FLA"], main["chunked (ours)"]) == (report.MAIN_SHAPE,) * 3
    assert main["FLA/FlashQLA"] == 2.5 and main["FlashQLA, published"] > 0
    assert f"{{{report.MAIN_SHAPE}}}" in render.table_to_latex(t)
    m = report.published_verdicts(df)
    # 16/32 (2.0) and the main shapes of role published in tidy(): 16/16 at 4 x 8192 and 32/32 (2.5 each)
    assert (m["GdnPublishedFwdSpeedups"], m["GdnPublishedFwdConfigs"], m["GdnPublishedFwdVerdict"]) == \
        ("2.00--2.50", "3", "holds")
    assert (m["GdnPublishedBwdVerdict"], m["GdnPublishedBwdConfigs"]) == ("n/a", "0")
    # ours at 16/32: 1.4 / 1.2 ms (the main shapes of tidy() have no repetitions to pair)
    assert (m["GdnPublishedFwdOursVsFla"], m["GdnPublishedBwdOursVsFla"]) == ("1.17", "n/a")
    # each anchor's time over its published one, by batch: FlashQLA 0.7 ms at 16/32 and tidy()'s 25.6 ms at
    # 32/32 (one sequence), its 12.8 ms at 16/16 (four)
    one = sorted([0.7 / theirs["flash_qla"], 25.6 / published.TIMES[("fwd", 32, 32, 1, 32768)]["flash_qla"]])
    assert m["GdnPublishedFlashQlaVsTheirsBOne"] == f"{one[0]:.2f}--{one[1]:.2f}"
    assert m["GdnPublishedFlashQlaVsTheirsBFour"] == f"{12.8 / published.TIMES[('fwd', 16, 16, 4, 8192)]['flash_qla']:.2f}"


def test_host_overhead_macros_set_the_enqueue_and_the_launches_beside_it():
    """At the profiled shape: latency minus device time, the host's enqueue of one call measured
    alone (the row's timing.enqueue_us) and the kernels the call launches (its breakdown's calls)."""
    df = tidy()
    at = (df.impl == "chunk") & (df.batch == 4) & (df.seqlen == 8192)
    df["host_overhead_ms"], df["timing_enqueue_us"], df["kernels"] = np.nan, np.nan, None
    df.loc[at, ["host_overhead_ms", "timing_enqueue_us"]] = [0.3262, 504.6]
    df.loc[at, "kernels"] = json.dumps([{"name": "a", "calls": 1.0, "us": 300.0}, {"name": "b", "calls": 4.0,
                                                                                  "us": 100.0}])
    m = report.macros(report.derive(df))
    assert (m["GdnChunkFwdHostUsBFourTEightK"], m["GdnChunkFwdEnqueueUsBFourTEightK"]) == ("326", "505")
    assert (m["GdnChunkKernelLaunchesBFourTEightK"], m["GdnChunkKernelMsBFourTEightK"]) == ("5", "0.400")
    assert m["GdnFlaFwdEnqueueUsBFourTEightK"] == m["GdnFlaKernelLaunchesBFourTEightK"] == "n/a"


def test_every_published_configuration_of_the_sweep_has_published_times():
    from kernels.gdn import published

    assert report._configured_published() <= set(published.TIMES)


def test_speedups_over_fla_carry_their_intervals_and_a_tie_reads_as_one():
    """Each speedup over FLA gets the 95 % interval of a bootstrap over both rows' repetitions;
    chunk's 1.11x inside 40 % noise is a tie, FlashQLA's 2.5x is not."""
    import json

    df = report.derive(tidy())
    rng = np.random.default_rng(0)
    df["device_times_ms"] = [json.dumps(list(ms * (1 + 0.4 * rng.standard_normal(50)))) if ms == ms else "[]"
                             for ms in df["device_ms"]]
    m = report.macros(df)
    assert m["GdnChunkSpeedupVsFlaBFourTEightKCi"].endswith("(tie)")
    low, high = (float(x) for x in m["GdnFlashQlaSpeedupVsFlaBFourTEightKCi"].strip("[]").split(", "))
    assert low < 2.5 < high and low > 1
    assert report.macros(tidy())["GdnChunkSpeedupVsFlaBFourTEightKCi"] == "n/a"  # rows without repetitions
