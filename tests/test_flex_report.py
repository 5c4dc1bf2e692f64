"""The FlexAttention report on a small synthetic tidy table: derive, every figure, table and macro."""

import json
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from kernels.flex import numbers, report

BASE = dict(gpu="h200", dtype="bfloat16", heads=16, kv_heads=16, head_dim=128, seed=0, status="ok", error=None,
            doc_dist="none", window=0, documents=1, prefix=0, score_mod="none", recompiles=0, compile_s=0.01)


def _row(impl, pas, batch, seqlen, mask, ms, density_blocks, **kw):
    flops = 4 * batch * 16 * seqlen**2 * 128 * density_blocks * 0.95
    reference = (batch, seqlen) == (4, 8192)  # the config's groups
    roles = ("masks seqlen" if reference else "seqlen") if mask == "causal" else ("masks" if reference else "sparse")
    row = dict(BASE, impl=impl, **{"pass": pas}, batch=batch, seqlen=seqlen, mask=mask, device_ms=ms, roles=roles,
               density_blocks=density_blocks, density_elements=density_blocks * 0.95, flops=flops,
               flops_blocks=flops / 0.95, peak_mem_bytes=int(seqlen * 1e5 * (10 if impl == "naive" else 1)),
               mask_build_ms=0.1)
    row.update(kw)
    return row


#: The FLASH backend's fixed cost per query-block row in the synthetic table, in tiles.
FLASH_ROW_COST = 4.0
REFUSED = "Unsupported: flex_flash: ValueError: Expected TensorSSA, but got <class 'int'>"


def _flash_rows(pas, f, batch, n):
    """flex_flash at one shape: causal at 0.6x flex's time, documents (4, 8, 16) whose time per tile
    follows FLASH_ROW_COST per query-block row exactly, and refused sliding windows."""
    causal_ms = 0.6 * f * n / 1000
    rows = [_row("flex_flash", pas, batch, n, "causal", causal_ms, 0.5, recompiles=1, compile_s=8.0)]
    n_rows = np.ceil(n / 128)
    for docs, density in ((4, 0.25), (8, 0.125), (16, 0.0625)):
        r, r_c = density * n_rows, 0.5 * n_rows
        cost = (1 + FLASH_ROW_COST / r) / (1 + FLASH_ROW_COST / r_c)
        rows.append(_row("flex_flash", pas, batch, n, "document", causal_ms * density / 0.5 * cost, density,
                         documents=docs, doc_dist="uniform"))
    rows.append(_row("flex_flash", pas, batch, n, "window", np.nan, 0.1, window=1024, status="unsupported",
                     error=REFUSED))
    return rows


def _table(flash: bool = True):
    rows = []
    for pas, f in (("fwd", 1.0), ("bwd", 2.5), ("fwdbwd", 3.5)):
        for batch, n in ((16, 2048), (4, 8192), (1, 32768)):
            causal_ms = f * n / 1000
            rows += [_row("flex", pas, batch, n, "causal", causal_ms, 0.5, recompiles=2, compile_s=4.0),
                     _row("sdpa_flash", pas, batch, n, "causal", causal_ms * 1.2, 0.5),
                     _row("sdpa_cudnn", pas, batch, n, "causal", causal_ms * 0.8, 0.5),
                     _row("sdpa_efficient", pas, batch, n, "causal", np.nan, 0.5, status="unsupported",
                          error="no kernel")]
            rows.append(_row("naive", pas, batch, n, "causal", causal_ms * 5, 0.5) if n < 32768 else
                        _row("naive", pas, batch, n, "causal", np.nan, 0.5, status="oom", error="OOM"))
            rows.append(_row("flex", pas, batch, n, "window", causal_ms / 4, 0.1, window=1024))
            rows.append(_row("flex", pas, batch, n, "document", causal_ms / 3, 0.125, documents=8,
                             doc_dist="uniform"))
            rows += _flash_rows(pas, f, batch, n) if flash else []
        for mod, slow in (("alibi", 1.1), ("softcap", 1.9), ("softcap_sigmoid", 1.3), ("alibi_softcap", 2.2)):
            rows.append(_row("flex", pas, 4, 8192, "causal", f * 8.192 * slow, 0.5, score_mod=mod))
    if flash:  # a refusal with LaTeX's specials in its message
        rows.append(_row("flex_flash", "fwd", 4, 8192, "causal", np.nan, 0.5, score_mod="softcap",
                         status="unsupported", error="Unsupported: flex_flash: NotImplementedError: soft_cap needs "
                                                     "head_dim % 16 == 0"))
    df = pd.DataFrame(rows)
    seconds = df["device_ms"] / 1e3
    df["tflops"] = df["flops"] / seconds / 1e12
    df["gbps"] = np.nan
    return df


@pytest.fixture(scope="module")
def derived():
    return report.derive(_table())


def test_derive(derived):
    w = derived[(derived["mask"] == "window") & (derived["seqlen"] == 8192) & (derived["pass"] == "fwd")].iloc[0]
    assert w["speedup_vs_causal"] == pytest.approx(4.0)
    assert w["ideal_ratio"] == pytest.approx(5.0)
    assert w["pct_of_ideal"] == pytest.approx(80.0)
    assert w["speedup_vs_flash"] == pytest.approx(4.8) and w["speedup_vs_cudnn"] == pytest.approx(3.2)
    assert w["tflops_blocks"] == pytest.approx(w["tflops_elements"] / 0.95)
    s = derived[(derived["score_mod"] == "softcap") & (derived["pass"] == "fwd")].iloc[0]
    assert s["slowdown_vs_plain"] == pytest.approx(1.9)
    assert derived.loc[derived["status"] != "ok", "speedup_vs_causal"].isna().all()
    assert w["tiles_per_row"] == pytest.approx(0.1 * 64) and w["tile_fill"] == pytest.approx(0.95)
    assert w["tile_cost"] == pytest.approx(1.25) == pytest.approx(100 / w["pct_of_ideal"])


def test_row_cost_fit_recovers_a_fixed_row_cost():
    rows = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    d = pd.DataFrame({"tiles_per_row": rows, "ideal_ratio": 32.5 / rows,
                      "tile_cost": (1 + 3.0 / rows) / (1 + 3.0 / 32.5)})
    k, r2 = report.row_cost_fit(d)
    assert k == pytest.approx(3.0) and r2 == pytest.approx(1.0)
    assert all(np.isnan(report.row_cost_fit(d.iloc[:2])))
    assert all(np.isnan(report.row_cost_fit(d.iloc[0:0])))


@pytest.mark.parametrize("name", sorted(report.FIGURES))
@pytest.mark.parametrize("subset", ["all", "cpu_smoke", "empty", "no_columns"])
def test_figures_draw_partial_data(derived, name, subset):
    """Also from the tidy table of a study without rows, read back without columns (kernels.paper.render.read_tidy)."""
    df = {"all": derived, "cpu_smoke": derived[derived["impl"].isin(["naive"])].assign(gpu="cpu", seqlen=200),
          "empty": derived.iloc[0:0], "no_columns": pd.DataFrame()}[subset]
    fig = report.FIGURES[name](df)
    assert fig.axes
    plt.close(fig)


def test_tables(derived):
    summary = report.TABLES["flex_summary"](derived)
    assert {"tiles %", "vs causal", "% ideal", "vs FA2", "vs cuDNN"} <= set(summary.columns)
    by_backend = summary["backend"].value_counts().to_dict()
    # 3 passes x 2 seqlens >= 8K x (causal, window, document); FLASH: (causal, 3 documents), windows refused
    assert by_backend == {"Triton": 3 * 2 * 3, "FLASH": 3 * 2 * 4}
    dense = report.TABLES["flex_dense"](derived)
    assert {"Flex", "FA2", "cuDNN", "naive"} <= set(dense.columns)
    refused = derived.assign(status=derived["status"].where(derived["impl"] != "sdpa_flash", "unsupported"))
    assert "FA2" not in report.TABLES["flex_dense"](refused).columns  # no timed row, no column
    tiles = report.TABLES["flex_tile_cost"](derived)
    assert list(tiles.columns) == ["pass", "backend", "N", "mask", "tiles / row", "fill %", "% ideal", "tile cost",
                                   "fit"]
    triton, flash = tiles[tiles["backend"] == "Triton"], tiles[tiles["backend"] == "FLASH"]
    assert len(triton) == 3 * 2 * 2  # 3 passes x 2 seqlens >= 8K x (window, document)
    assert set(triton["tile cost"]) == {1.25, 1.33} and tiles["fit"].notna().all()
    assert len(flash) == 3 * 2 * 3  # its 3 document cases; the fit of its own row cost predicts them
    assert flash["fit"].to_numpy() == pytest.approx(flash["tile cost"].to_numpy(), abs=0.006)
    mods = report.TABLES["flex_score_mods"](derived)
    assert set(mods["modification"]) == {"ALiBi", "soft-cap (tanh)", "soft-cap (sigmoid)", "ALiBi + soft-cap"}
    assert set(mods["backend"]) == {"Triton"}  # the synthetic table has no FLASH score modification timed
    for name, fn in report.TABLES.items():
        assert fn(derived.iloc[0:0]).empty and fn(pd.DataFrame()).empty, name


def test_macros(derived):
    m = report.macros(derived)
    assert all(k.startswith("Flex") and k.isalpha() for k in m)
    assert m["FlexFwdCausalVsFlash"] == "1.20" and m["FlexFwdSoftcapSlowdown"] == "1.90"
    assert m["FlexWindowFwdTargetMet"] == "2 of 2" and m["FlexNaiveMaxSeqlen"] == "8192"
    assert m["FlexBwdCausalMs"] == "20.480" and m["FlexWindowBwdPctIdealMedian"] == "80.0"
    met = [m[f"Flex{f}FwdTargetMet"] for f in ("Window", "Document")]
    n_met, n_all = (sum(int(x.split(" of ")[i]) for x in met if x != "n/a") for i in (0, 1))
    want = "holds" if n_met == n_all else "not reached" if n_met == 0 else f"partly holds ({n_met} of {n_all})"
    assert m["FlexSparsityVerdict"] == want
    assert m["FlexPrefillVerdict"] == "not reached"  # 1.20 over FA2 < 2
    assert m["FlexNaiveMemOverFlex"] == "10.0"
    assert m["FlexWindowFwdWorstTileCost"] == "1.25" and m["FlexWindowFwdWorstTilesPerRow"] == "6.4"
    assert m["FlexDocumentFwdbwdWorstTileCost"] == "1.33" and m["FlexWindowFwdWorstFillPct"] == "95"
    assert m["FlexFwdRowCostTiles"] != "n/a" and m["FlexFwdTileCostRankCorrRows"] != "n/a"
    assert m["FlexFwdFitResidualDocHeavy"] == "n/a"  # no heavy-tailed documents in the synthetic table
    for empty in (report.macros(derived.iloc[0:0]), report.macros(pd.DataFrame())):
        assert set(empty) == set(m) and empty.pop("FlexFlashTimed") == "false" and set(empty.values()) <= {"n/a"}


def test_sparse_rows_of_each_backend_leave_out_causal_and_refused_rows(derived):
    flash = report._sparse(derived, "flex_flash")
    assert set(flash["mask"]) == {"document"} and (flash["status"] == "ok").all()
    assert len(flash) == 3 * 2 * 3  # 3 passes x 2 seqlens >= 8K x 3 document counts; the windows were refused
    assert set(report._sparse(derived)["impl"]) == {"flex"} and set(report._sparse(derived)["mask"]) == {
        "window", "document"}
    assert report._sparse(derived.iloc[0:0], "flex_flash").empty and report._sparse(pd.DataFrame()).empty


def test_backend_macros_of_the_flash_backend(derived):
    m = report.macros(derived)
    assert m["FlexFlashFwdCausalMs"] == "4.915" and m["FlexFlashFwdCausalVsFlash"] == "2.00"
    assert m["FlexFlashFwdCausalVsCudnn"] == "1.33" and m["FlexFlashBwdCausalVsCudnn"] == "1.33"
    assert m["FlexFlashPrefillVerdict"] == "partly holds (1 of 2)"  # 2.00 over FA2 reaches 2, 1.33 over cuDNN not
    # against its own causal: 90, 75, 56 % of ideal at N8K; 97, 92, 82 % at N32K
    assert m["FlexFlashDocumentFwdTargetMet"] == "4 of 6" and m["FlexFlashDocumentFwdPctIdealMin"] == "56"
    assert m["FlexFlashSparsityVerdict"] == "partly holds (4 of 6)"
    assert (m["FlexFlashFwdRowCostTiles"], m["FlexFlashFwdRowCostRsq"]) == ("4.0", "1.000")
    assert m["FlexFlashFwdbwdRowCostTiles"] == "4.0" and float(m["FlexFlashFwdFitResidualDocUniform"]) == 0
    assert m["FlexFlashDocumentFwdWorstTilesPerRow"] == "4.0" and m["FlexFlashDocumentFwdWorstTileCost"] == "1.78"
    assert m["FlexFlashCompileSecondsMedian"] == "8.0" and m["FlexFlashCasesWithoutRecompile"] == "27 of 36"
    # the refused sliding windows: nothing to compare, n/a, no error
    assert {m[f"FlexFlash{name}"] for name in ("WindowFwdPctIdealMedian", "WindowFwdTargetMet",
                                               "FwdWindowThousandSpeedup", "FwdFitResidualWindow",
                                               "WindowFwdWorstTileCost")} == {"n/a"}


def test_flash_compile_seconds_are_the_cold_ones_of_the_compile_ahead_children():
    """Where a compile-ahead child prepared a case, the cold compile is the child's (ahead_compile_s,
    a fresh process); the row's own compile_s is the timed job's, from warm caches."""
    table = _table()
    compiled = table.index[(table["impl"] == "flex_flash") & (table["recompiles"] > 0)]
    table.loc[compiled[:-1], "ahead_compile_s"] = 30.0  # the last one was not prepared ahead: its own 8 s
    table.loc[compiled, "compile_s"] = 0.5
    table.loc[compiled[-1], "compile_s"] = 8.0
    m = report.macros(report.derive(table))
    assert len(compiled) > 2 and m["FlexFlashCompileSecondsMedian"] == "30.0"
    table.loc[compiled[:-1], "ahead_compile_s"] = np.nan
    assert report.macros(report.derive(table))["FlexFlashCompileSecondsMedian"] == "0.5"


def test_the_flash_backend_leaves_the_triton_backends_macros_alone(derived):
    alone = report.macros(report.derive(_table(flash=False)))
    both = report.macros(derived)
    assert {k: both[k] for k in alone if not k.startswith("FlexFlash")} == {
        k: v for k, v in alone.items() if not k.startswith("FlexFlash")}
    assert {v for k, v in alone.items() if k.startswith("FlexFlash") and k != "FlexFlashTimed"} == {"n/a"}
    assert (alone["FlexFlashTimed"], both["FlexFlashTimed"]) == ("false", "true")  # the paper's \ifFlexFlashTimed


def test_a_backend_whose_causal_was_refused_reads_na(derived):
    refused = derived["impl"].eq("flex_flash") & derived["mask"].eq("causal")
    df = report.derive(derived.assign(status=derived["status"].mask(refused, "unsupported"),
                                      device_ms=derived["device_ms"].mask(refused)))
    m = report.macros(df)
    assert {m["FlexFlashFwdCausalMs"], m["FlexFlashDocumentFwdPctIdealMedian"], m["FlexFlashFwdRowCostTiles"]} == {
        "n/a"}
    assert m["FlexFlashSparsityVerdict"] == m["FlexFlashPrefillVerdict"] == "n/a"
    assert m["FlexFwdCausalMs"] == report.macros(derived)["FlexFwdCausalMs"]


def test_refusal_macros(derived):
    m = numbers.refusal_macros(derived, "flex_flash", "FlexFlash")
    assert m["FlexFlashUnsupportedRows"] == "10 of 46"  # 9 windows and 1 soft-cap of 46 rows
    assert m["FlexFlashUnsupportedCases"] == "sliding window (9 rows); causal with soft-cap (tanh) (1 row)"
    assert m["FlexFlashUnsupportedErrors"] == (r"ValueError: Expected TensorSSA, but got <class 'int'> (9 rows); "
                                               r"NotImplementedError: soft\_cap needs head\_dim \% 16 == 0 (1 row)")
    assert m["FlexFlashUnsupportedText"] == (
        f"It refused 10 of its 46 cases ({m['FlexFlashUnsupportedCases']}), each recorded as unsupported "
        f"with the backend's message ({m['FlexFlashUnsupportedErrors']}).")
    assert report.macros(derived)["FlexFlashUnsupportedRows"] == "10 of 46"
    ok = numbers.refusal_macros(derived[derived["status"] == "ok"], "flex_flash", "FlexFlash")
    assert ok == {"FlexFlashUnsupportedRows": "0 of 36", "FlexFlashUnsupportedCases": "none",
                  "FlexFlashUnsupportedErrors": "none", "FlexFlashUnsupportedText": "It refused none of its 36 cases."}
    assert set(numbers.refusal_macros(derived.iloc[0:0], "flex_flash", "FlexFlash").values()) == {"n/a"}
    assert set(numbers.refusal_macros(derived[derived["impl"] != "flex_flash"], "flex_flash", "X").values()) == {"n/a"}


def test_a_long_refusal_is_cut_at_message_chars():
    long = numbers._message("Unsupported: flex_flash: RuntimeError: " + "x" * 500, "flex_flash")
    assert len(long) == numbers.MESSAGE_CHARS and long.startswith("RuntimeError: x") and long.endswith("…")
    assert numbers._message("flex_flash: missing flash-attn-4", "flex_flash") == "missing flash-attn-4"


def test_the_memory_claim_is_judged_by_slopes_and_their_intervals():
    """O(N²) against O(N): peak memory per sequence against N at a constant batch x N; the
    materialised baselines' slopes must show 2 and flex's 1 (report_kit.follows_power)."""
    def rows(growth):
        return pd.DataFrame([_row(impl, "fwd", 32768 // n, n, "causal", 1.0, 1.0,
                                  peak_mem_bytes=(32768 // n) * n ** growth[impl] * (1 + 0.01 * (i % 2)))
                             for impl in growth for i, n in enumerate((2048, 4096, 8192, 16384, 32768))])

    m = numbers.memory_slopes(rows({"naive": 2, "sdpa_masked": 2, "flex": 1}))
    assert (m["FlexNaiveMemSlope"], m["FlexFlexMemSlope"], m["FlexMemoryVerdict"]) == ("2.00", "1.00", "holds")
    assert float(m["FlexNaiveMemSlopeLow"]) < 2 < float(m["FlexNaiveMemSlopeHigh"])
    m = numbers.memory_slopes(rows({"naive": 2, "sdpa_masked": 1.3, "flex": 1}))
    assert m["FlexMemoryVerdict"] == "partly holds (2 of 3)"  # the masked SDPA's growth is not shown quadratic
    m = numbers.memory_slopes(rows({"naive": 1.2, "sdpa_masked": 1.3, "flex": 1.7}))
    assert m["FlexMemoryVerdict"] == "not reached"


def test_the_sparsity_medians_carry_an_interval_from_the_cases_and_their_causal_repetitions(derived):
    rng = np.random.default_rng(0)
    reps = [json.dumps(list(ms * (1 + 0.01 * rng.standard_normal(50)))) if np.isfinite(ms) else np.nan
            for ms in derived["device_ms"]]
    m = report.macros(derived.assign(device_times_ms=reps))
    low, high = (float(x) for x in m["FlexWindowFwdPctIdealMedianCi"].strip("[]").split(", "))
    assert low < float(m["FlexWindowFwdPctIdealMedian"]) == 80.0 < high and high - low < 2
    assert m["FlexFlashDocumentBwdPctIdealMedianCi"].startswith("[")
    assert report.macros(derived)["FlexWindowFwdPctIdealMedianCi"] == "n/a"  # rows without repetitions


def test_the_memory_figure_draws_the_dense_kernels_as_one_band(derived):
    fig = report.FIGURES["flex_memory"](derived)
    lines = {ln.get_label() for ax in fig.axes for ln in ax.get_lines()}
    bands = [c for ax in fig.axes for c in ax.collections if c.get_label().startswith("dense")]
    plt.close(fig)
    assert len(bands) == 2 and "FA2" in bands[0].get_label()  # one band per panel, its kernels named
    names = {re.sub(r" \(slope [^)]*\)$", "", label) for label in lines}
    assert {"Flex", "naive"} <= names and not names & {"FA2", "cuDNN", "Flex FLASH"}


def test_the_memory_figure_shows_per_sequence_memory_and_the_slopes_the_claim_is_judged_by():
    """Per sequence, a materialised N x N matrix grows with slope 2 and a block mask with slope 1: the
    figure's lines rise so, and its legend gives the slopes of the claims table (memory_slopes)."""
    lengths = (2048, 4096, 8192, 16384, 32768)
    df = report.derive(pd.DataFrame([_row(impl, "fwd", 32768 // n, n, "causal", 1.0, 1.0,
                                          peak_mem_bytes=(32768 // n) * n ** growth * 1000.0)
                                     for impl, growth in (("naive", 2), ("flex", 1)) for n in lengths]))
    m = numbers.memory_slopes(df)
    fig = report.FIGURES["flex_memory"](df)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    plt.close(fig)
    assert set(lines) == {f"naive (slope {m['FlexNaiveMemSlope']})", f"Flex (slope {m['FlexFlexMemSlope']})"}
    for label, growth in ((f"naive (slope {m['FlexNaiveMemSlope']})", 2), (f"Flex (slope {m['FlexFlexMemSlope']})", 1)):
        x, y = (np.asarray(v, dtype=float) for v in lines[label].get_data())
        assert np.polyfit(np.log2(x), np.log2(y), 1)[0] == pytest.approx(growth)


def test_the_masked_sdpa_speedup_is_context_beside_the_prefill_verdict():
    """Over SDPA given the causal mask materialised, at the reference shape: the forward's speedup and its
    interval, printed beside the prefill claim; the verdict still reads FA2 and cuDNN alone."""
    rows = _table(flash=False)
    masked = [_row("sdpa_masked", "fwd", batch, n, "causal", 3.0 * n / 1000, 0.5)
              for batch, n in ((16, 2048), (4, 8192), (1, 32768))]
    m = report.macros(report.derive(pd.concat([rows, pd.DataFrame(masked)], ignore_index=True)))
    assert m["FlexFwdCausalVsMasked"] == "3.00" and "FlexFwdCausalVsMaskedCi" in m  # no repetitions here: n/a
    assert m["FlexBwdCausalVsMasked"] == "n/a" and m["FlexFlashFwdCausalVsMasked"] == "n/a"
    assert m["FlexPrefillVerdict"] == "not reached"  # 3.00 over masked SDPA is in 2-4, FA2's 1.20 is not
