"""The tensor-core study: its config against the schema, the cases it makes, prepare() on the CPU
(bf16 and FP8, checked, a wrong output caught, what cannot run unsupported), rows through the
job runner and the collect step, and the report from empty and synthetic tidy tables."""

import json
import re
from pathlib import Path

import jsonschema
import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import configured_timing

from kernels.core import checks, correctness, harness, jobs
from kernels.paper import collect, render, report_kit
from kernels.tensorcore import report, study

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "config/studies/tensorcore.yaml").read_text())["tensorcore"]
SCHEMA = checks.validator(ROOT / "workflow/schemas/tensorcore.schema.yaml")  # its impls from the registry
SMALL = configured_timing(warmup_ms=1, rep_ms=5, min_reps=3, max_reps=20, cpu_reps=2)


def _sizes(section):
    return sorted({s for g in section["padding"] for s in (g["aligned"], *g["unaligned"])} | set(section["fp8"]))


# ----------------------------------------------------------------------------
# config and cases


def test_config_matches_schema_and_its_checks():
    jsonschema.Draft202012Validator.check_schema(SCHEMA.schema)
    SCHEMA.validate(CONFIG)
    assert set(SCHEMA.schema["$defs"]["impl"]["enum"]) == set(study.IMPLS)
    study.check_config(CONFIG)
    bad = json.loads(json.dumps(CONFIG))
    bad["sweep"]["padding"][1]["unaligned"].append(8191)  # 8191 is a neighbour of 8192 already
    with pytest.raises(ValueError, match=r"^sweep\.padding\[1\]: size 8191 is already in padding\[0\]"):
        study.check_config(bad)
    del bad["sweep"]["fp8"]
    with pytest.raises(jsonschema.ValidationError):
        SCHEMA.validate(bad)


@pytest.mark.parametrize("run", ["sweep", "quick", "smoke"])
def test_cases_expand_the_config(run):
    section = CONFIG[run]
    bf16, fp8 = study.cases(section, "bf16"), study.cases(section, "fp8")
    assert sorted(c["m"] for c in bf16) == _sizes(section)  # each size once
    assert sorted(c["m"] for c in fp8) == sorted(section["fp8"])
    for case in bf16 + fp8:
        assert case["m"] == case["n"] == case["k"] and case["pass"] == "fwd"
        assert set(study.SHAPE_FIELDS) <= set(case)
        assert case.get("warmup_ms") == section.get("warmup_ms")
    for group in section["padding"]:
        for size in (group["aligned"], *group["unaligned"]):
            [case] = [c for c in bf16 if c["m"] == size]
            assert case["aligned"] == group["aligned"] and case["dtype"] == "bfloat16"
            assert case["roles"] == (["padding", "fp8"] if size in section["fp8"] else ["padding"])
    assert all(c["roles"] == ["fp8"] and c["dtype"] == "float8_e4m3fn" and "aligned" not in c for c in fp8)
    with pytest.raises(ValueError, match="unknown tensorcore impl 'fp16'; known: bf16, fp8"):
        study.cases(section, "fp16")


def test_an_fp8_size_outside_the_padding_sets_is_a_bf16_case_of_role_fp8_only():
    section = {"padding": [{"aligned": 64, "unaligned": [63]}], "fp8": [64, 128]}
    [c128] = [c for c in study.cases(section, "bf16") if c["m"] == 128]
    assert c128["roles"] == ["fp8"] and "aligned" not in c128 and "warmup_ms" not in c128


def test_the_sweep_is_small():
    """A dozen cases of GEMMs of at most ~10 ms each: the config's estimate of well under a minute."""
    assert sum(len(study.cases(CONFIG["sweep"], impl)) for impl in CONFIG["sweep"]["impls"]) <= 14


# ----------------------------------------------------------------------------
# prepare


def _case(size, impl="bf16", aligned=None):
    case = {"pass": "fwd", "dtype": study.DTYPES[impl], "m": size, "n": size, "k": size}
    return case | ({"aligned": aligned} if aligned else {})


@pytest.mark.parametrize("size", [64, 63, 65])
def test_prepare_bf16_checks_its_output(size, device):
    prepared = study.prepare("bf16", _case(size, aligned=64), device)
    assert prepared.flops == 2 * size**3
    assert prepared.bytes == 3 * size * size * 2
    assert prepared.extra["rel_err"] < study.TOLERANCE
    out = prepared.fn()
    assert out.shape == (size, size) and out.dtype == torch.bfloat16


def test_prepare_fp8_runs_and_is_checked_against_its_quantised_inputs(device):
    """torch._scaled_mm runs on the CPU with torch 2.13 (and on an H200): fp8 rows are timed there too."""
    prepared = study.prepare("fp8", _case(64, "fp8"), device)
    assert prepared.flops == 2 * 64**3 and prepared.bytes == 2 * 64 * 64 + 64 * 64 * 2 + 8
    assert prepared.extra["rel_err"] < study.TOLERANCE
    assert prepared.fn().dtype == torch.bfloat16


@pytest.mark.parametrize("impl, op", [("bf16", "matmul"), ("fp8", "_scaled_mm")])
def test_a_wrong_output_is_caught(impl, op, device, monkeypatch):
    real = getattr(torch, op)
    monkeypatch.setattr(torch, op, lambda *a, **kw: real(*a, **kw) * 1.05)
    with pytest.raises(correctness.Mismatch, match=rf"{impl} out \(torch.bfloat16\): RMSE/RMS 0.05"):
        study.prepare(impl, _case(64, impl), device)
    row = harness.measure_case(study, impl, _case(64, impl), device, SMALL)
    assert row["status"] == "wrong" and row["times_ms"] == []


def test_fp8_is_unsupported_where_scaled_mm_refuses_and_oom_stays_oom(device, monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("Expected trailing dimension of mat1 to be divisible by 16")

    monkeypatch.setattr(torch, "_scaled_mm", refuse)
    with pytest.raises(harness.Unsupported, match="torch._scaled_mm cannot run this case here: Expected trailing"):
        study.prepare("fp8", _case(63, "fp8"), device)
    assert harness.measure_case(study, "fp8", _case(63, "fp8"), device, SMALL)["status"] == "unsupported"

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(torch, "_scaled_mm", out_of_memory)
    assert harness.measure_case(study, "fp8", _case(64, "fp8"), device, SMALL)["status"] == "oom"


def test_fp8_needs_fp8_tensor_cores_on_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    with pytest.raises(harness.Unsupported, match="compute capability 8.9 or newer; NVIDIA A100-SXM4-80GB has 8.0"):
        study.prepare("fp8", _case(64, "fp8"), torch.device("cuda"))


def test_quantise_fp8_maps_the_amax_to_448():
    x = torch.randn(256, 64, generator=torch.Generator().manual_seed(1))
    q, scale = study.quantise_fp8(x)
    assert q.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32 and scale.dim() == 0
    assert scale.item() == pytest.approx(x.abs().max().item() / 448)
    assert q.float().abs().max().item() == 448
    assert correctness.relative_rmse(q.float() * scale, x) < 0.05  # e4m3: 3 significand bits
    assert study.quantise_fp8(torch.zeros(4))[1].item() == 1.0


def test_smoke_rows_collect_and_render(tmp_path, monkeypatch):
    """The smoke section through the job runner (rows valid against the row schema, checked by the
    collect step), its tidy table read back, and the figure, table and macros from it."""
    monkeypatch.setenv("ARTIFACT_TMPDIR", str(tmp_path / "tmp"))
    paths = []
    for impl in CONFIG["smoke"]["impls"]:
        paths.append(tmp_path / impl / f"{impl}.jsonl")
        rows = jobs.run_job("tensorcore", impl, CONFIG["smoke"], paths[-1], SMALL)
        assert [r["status"] for r in rows] == ["ok"] * len(rows), [r["error"] for r in rows]
    collect.collect("tensorcore", [str(p) for p in paths], "cpu", str(tmp_path / "tidy.csv"), CONFIG["smoke"])
    df = render.read_tidy(tmp_path / "tidy.csv")
    assert len(df) == len(_sizes(CONFIG["smoke"])) + len(CONFIG["smoke"]["fp8"])
    assert (df.loc[df["m"].eq(df["aligned"]), "speedup_padded"] == 1.0).all()
    assert df.loc[df["impl"].eq("fp8"), "speedup_vs_bf16"].notna().all()
    assert len(report.table_gemm(df)) == len(df)
    assert report.fig_gemm(df).axes[0].has_data()
    m = report.macros(df)   # the macros are the sweep's sizes: none of them in the smoke rows
    assert m.pop("TensorcoreMeasured") == "true" and m.pop("TensorcoreWarmupMs") == "1000"
    assert set(m.values()) == {"n/a"}


# ----------------------------------------------------------------------------
# report


def _row(impl, size, tflops, aligned=None, roles="padding", status="ok"):
    flops = 2 * size**3
    ms = flops / tflops / 1e9 if status == "ok" else np.nan
    return dict(study="tensorcore", impl=impl, **{"pass": "fwd"}, dtype=study.DTYPES[impl], m=size, n=size, k=size,
                aligned=aligned if aligned is not None else np.nan, roles=roles, status=status,
                error=None if status == "ok" else "x", device_ms=ms, flops=flops,
                tflops=flops / (ms * 1e-3) / 1e12, gpu="h200", warmup_ms=1000,
                env_sm_clock_mhz={"bf16": 345, "fp8": 1980}[impl])


def _tidy(padded=(5.4, 5.7, 1.1, 1.02), fp8=(1.7, 1.86), bf16=740.0):
    """A tidy table of the sweep's sizes: each neighbour at the aligned size's TFLOP/s over ``padded``
    (in config order), FP8 at ``fp8`` times bf16's."""
    rows = []
    for group in CONFIG["sweep"]["padding"]:
        a = group["aligned"]
        roles = "padding fp8" if a in CONFIG["sweep"]["fp8"] else "padding"
        rows.append(_row("bf16", a, bf16, a, roles))
        rows += [_row("bf16", u, bf16 / r, a) for u, r in zip(group["unaligned"], padded)]
    rows += [_row("fp8", s, bf16 * r, roles="fp8") for s, r in zip(CONFIG["sweep"]["fp8"], fp8)]
    return pd.DataFrame(rows)


def test_derive_compares_each_row_with_its_aligned_size_and_fp8_with_bf16():
    df = report.derive(_tidy())
    row = df[df["m"].eq(8191)].iloc[0]
    assert row["speedup_padded"] == pytest.approx(5.4) and np.isnan(row["speedup_vs_bf16"])
    assert (df.loc[df["m"].eq(df["aligned"]), "speedup_padded"] == 1.0).all()
    fp8 = df[df["impl"].eq("fp8")].sort_values("m")
    assert fp8["speedup_vs_bf16"].tolist() == pytest.approx([1.7, 1.86]) and fp8["speedup_padded"].isna().all()
    assert report.derive(df)["speedup_padded"].equals(df["speedup_padded"])  # derived twice, the same


def test_macros_of_a_synthetic_table():
    m = report.macros(_tidy())
    assert m["TensorcoreBfSixteenTflopsEightK"] == "740"
    assert m["TensorcorePaddedSpeedupEightKMinusOne"] == "5.40"
    assert m["TensorcorePaddedSpeedupFourKPlusSixtyFour"] == "1.02"
    assert m["TensorcorePaddedSpeedupRange"] == "1.02--5.70"
    # the 16-byte multiples apart by what the claim names: a multiple of 8 only, or of 64 as well
    assert (m["TensorcorePaddedSpeedupRowAlignedRange"], m["TensorcorePaddedRowAlignedSizes"]) == (
        "1.02--1.10", "8200, 8256, 4104 and 4160")
    assert (m["TensorcorePaddedSpeedupEightRange"], m["TensorcorePaddedEightSizes"]) == ("1.10", "8200 and 4104")
    assert (m["TensorcorePaddedSpeedupSixtyFourRange"], m["TensorcorePaddedSixtyFourSizes"]) == (
        "1.02", "8256 and 4160")
    assert m["TensorcoreFpEightSpeedupEightK"] == "1.86" and m["TensorcoreFpEightSpeedupRange"] == "1.70--1.86"
    assert m["TensorcoreFpEightTflopsFourK"] == "1258"
    assert m["TensorcoreWarmupMs"] == "1000"
    # no neighbour within 2-4x: four above (the odd ones), four below (the multiples of 16 bytes)
    assert (m["TensorcorePaddingVerdict"], m["TensorcoreFpEightVerdict"]) == ("missed (4 below, 4 above)",
                                                                              "not tested (per clock)")
    # the SM clock each dtype's rows record (read at its job's start), quoted beside the FP8 ratio
    assert (m["TensorcoreStartClockBfSixteen"], m["TensorcoreStartClockFpEight"]) == ("345", "1980")
    assert all(re.fullmatch("[A-Za-z]+", name) for name in m)


def test_the_macros_need_no_datasheet_figure_of_the_gpu_model():
    """The claims compare throughputs of one run with each other (no datasheet peak TFLOP/s): the
    H100's rows (data/raw/h100-80gb-hbm3) give every number and verdict that the H200's do."""
    h200, h100 = report.macros(_tidy()), report.macros(_tidy().assign(gpu="h100-80gb-hbm3"))
    assert h100 == h200 and h100["TensorcorePaddingVerdict"] != "n/a" and h100["TensorcoreFpEightVerdict"] != "n/a"


@pytest.mark.parametrize("padded, fp8, verdict", [
    ((2.5, 3.0, 3.5, 2.1), (2.1, 3.9), "holds"),
    ((4.5, 5.0, 6.0, 4.1), (4.2, 5.0), "exceeded"),
    ((1.5, 1.9, 1.1, 1.0), (1.0, 1.2), "not reached"),
    ((5.0, 3.0, 1.5, 1.0), (1.9, 2.5), "partly holds (2 of 8)"),
])
def test_padding_is_judged_on_every_neighbour_and_fp8_per_clock_is_not_tested(padded, fp8, verdict):
    """The aligned size's own ratio (1) is no neighbour's: it never enters the padding verdict. FP8's
    claim is per clock, which the rows (per second, clocks as found) do not measure, whatever its ratio;
    the ratios stay quoted."""
    m = report.macros(_tidy(padded, fp8))
    assert (m["TensorcorePaddingVerdict"], m["TensorcoreFpEightVerdict"]) == (verdict, report.FP8_VERDICT)
    assert m["TensorcoreFpEightSpeedupEightK"] == f"{fp8[1]:.2f}"


def test_fp8_without_rows_has_no_verdict():
    df = _tidy()
    m = report.macros(df[df["impl"].ne("fp8")])
    assert m["TensorcoreFpEightVerdict"] == "n/a" and m["TensorcorePaddingVerdict"] != "n/a"


def test_a_neighbour_not_timed_reads_n_a_and_leaves_the_verdict_to_the_others():
    df = _tidy()
    df.loc[df["m"].eq(8191), ["status", "device_ms", "tflops"]] = ["unsupported", np.nan, np.nan]
    m = report.macros(df)
    assert m["TensorcorePaddedSpeedupEightKMinusOne"] == "n/a"
    assert m["TensorcorePaddingVerdict"] == "missed (4 below, 3 above)"


def test_the_report_renders_from_an_empty_table():
    full = report.macros(_tidy())
    for empty in (_tidy().iloc[0:0], pd.DataFrame()):
        fig = report.fig_gemm(empty)
        assert [ax.texts[0].get_text() for ax in fig.axes if ax.get_visible()] == [report_kit.NOT_MEASURED] * 2
        matplotlib.pyplot.close(fig)
        assert report.table_gemm(empty).empty
        m = report.macros(empty)
        assert set(m) == set(full) and m.pop("TensorcoreMeasured") == "false"
        assert m.pop("TensorcoreWarmupMs") == "1000" and set(m.values()) == {"n/a"}


def test_the_figure_and_table_draw_every_timed_row():
    df = _tidy()
    df = pd.concat([df, pd.DataFrame([_row("fp8", 8191, 1.0, roles="fp8", status="unsupported")])])
    fig = report.fig_gemm(df)
    padding, fp8 = fig.axes[:2]
    assert [t.get_text() for t in padding.get_xticklabels()] == ["4095", "4096", "4097", "4104", "4160",
                                                                 "8191", "8192", "8193", "8200", "8256"]
    assert sorted(t.get_text() for t in padding.texts) == sorted(["5.40×", "5.70×", "1.10×", "1.02×"] * 2)
    assert sorted(t.get_text() for t in fp8.texts) == ["1.70×", "1.86×"]
    matplotlib.pyplot.close(fig)
    table = report.table_gemm(df)
    assert len(table) == 12 and list(table.columns) == ["ms", "TFLOP/s", "padded speedup", "FP8 speedup"]
    assert table.loc[("BF16 (cuBLAS)", 8191), "padded speedup"] == 5.4
    assert table.loc[("FP8 e4m3 (scaled mm)", 8192), "FP8 speedup"] == 1.86
    assert "n/a" in render.table_to_latex(table)


def test_macro_names_follow_the_config():
    assert report.neighbour_name(8192, 8191) == "EightKMinusOne"
    assert report.neighbour_name(4096, 4160) == "FourKPlusSixtyFour"
    assert report.neighbour_name(64, 64) == "SixtyFour"
    sizes = report.paper_sizes(CONFIG["sweep"])
    assert sizes["padding"][8192][0] == (8192, "EightK") and sizes["fp8"] == [(4096, "FourK"), (8192, "EightK")]
    with pytest.raises(ValueError, match="4160 has no macro name"):
        report.paper_sizes({"padding": [{"aligned": 4160, "unaligned": [4159]}], "fp8": []})


def test_the_paper_quotes_the_claims_and_the_readme_names_the_outputs():
    tex = (ROOT / "paper" / "main.tex").read_text()
    claims = tex[tex.index(r"\label{tab:claims}"):tex.index(r"\end{table}", tex.index(r"\label{tab:claims}"))]
    for verdict in report.CLAIMS:
        assert f"\\{verdict}\\reprostatus{{\\Repro{verdict}}}\\modelstatus{{\\Models{verdict}}} \\\\" in claims, verdict
    quoted = set(re.findall(r"\\(Tensorcore[A-Za-z]+)", tex))
    assert quoted and quoted <= set(report.macros(pd.DataFrame())), sorted(quoted - set(report.macros(pd.DataFrame())))
    readme = (ROOT / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in [*report.FIGURES, *report.TABLES])


# ----------------------------------------------------------------------------
# on the GPU


@pytest.mark.gpu
def test_every_quick_case_runs_on_the_gpu():
    """bf16 at every size and FP8 through cuBLAS on an FP8 GPU (an H200); FP8 at an odd size unsupported."""
    device = torch.device("cuda")
    for impl in CONFIG["quick"]["impls"]:
        for case in study.cases(CONFIG["quick"], impl):
            assert study.prepare(impl, case, device).extra["rel_err"] < study.TOLERANCE, (impl, case)
    with pytest.raises(harness.Unsupported, match="torch._scaled_mm cannot run this case here"):
        study.prepare("fp8", _case(63, "fp8"), device)
