"""The quick run's claims on any GPU (kernels/paper/quick.py): each claim derived from the quick run's
rows beside every committed model's verdict on the same cases; a claim whose implementation cannot run
on this GPU reads "not testable on this GPU"."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from kernels.paper import provenance, quick, render, rows, style

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "data" / "raw"
CONFIG = provenance.load_config()
STUDIES = CONFIG["studies"]
QUICK = {s: CONFIG[s]["quick"] for s in STUDIES}
SWEEPS = {s: CONFIG[s]["sweep"] for s in STUDIES}


def _quick_run(tmp_path: Path, model: str, studies, refuse: str | None = None) -> list[str]:
    """The committed rows of ``model`` that are quick cases, written as a quick run's folder (a stand-in
    for a run on another GPU: same cases, same code); ``refuse``: an implementation whose rows read
    ``unsupported``, as on a GPU it cannot run on."""
    expected = rows.configured_cases({s: QUICK[s] for s in studies})
    out = []
    for study in studies:
        for path in sorted((RAW / model / study).glob("*.jsonl")):
            # the roles a quick run records are its section's: the committed rows' own are dropped
            run = [{k: v for k, v in r.items() if k != rows.ROLES}
                   for r in map(json.loads, path.read_text().splitlines()) if rows.case_id(r) in expected]
            if not run:
                continue
            if path.stem == refuse:
                for r in run:
                    r.update(status="unsupported", error="Unsupported: needs compute capability 9.0",
                             times_ms=[], median_ms=None, device_times_ms=[], device_ms=None)
                    r.pop("timing", None)
            target = tmp_path / "quick" / study / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(json.dumps(r) + "\n" for r in run))
            out.append(str(target))
    return out


def test_a_gpu_without_committed_rows_gets_every_claim_beside_each_models_verdict(tmp_path):
    """The H200's quick cases as a run on a model the data lacks: its verdicts are the H200's on the same
    cases, the H100's agree or differ as derived from its own rows, and FlashQLA refused makes its
    claims "not testable on this GPU" (neither agreement nor difference)."""
    studies = ["tensorcore", "gdn"]
    files = _quick_run(tmp_path, "h200", studies, refuse="flash_qla")
    raw = tmp_path / "raw"
    for model in ("h200", "h100-80gb-hbm3"):
        for study in studies:
            shutil.copytree(RAW / model / study, raw / model / study)
    sections = {s: QUICK[s] for s in studies}
    out_csv, out_text = tmp_path / "claims.csv", tmp_path / "claims.txt"
    lines = quick.check(files, raw=str(raw), gpu="a100-sxm4-80gb", folder="results/quick/raw/a100-sxm4-80gb",
                        sections=sections, sweeps={s: SWEEPS[s] for s in studies}, timing=CONFIG["timing"],
                        out_csv=str(out_csv), out_text=str(out_text))
    assert out_text.read_text().splitlines() == lines
    assert lines[0].startswith("Claims on this GPU (NVIDIA H200; rows in results/quick/raw/a100-sxm4-80gb/)")
    table = pd.read_csv(out_csv, keep_default_na=False).set_index("macro")
    assert list(table.index) == [m for s in studies for m in render.report_module(s).CLAIMS]
    padding = table.loc["TensorcorePaddingVerdict"]
    assert padding["verdict"] == padding["h200 verdict"] and padding["h200 agrees"] == quick.SAME
    assert padding["h100-80gb-hbm3 agrees"] == (quick.SAME if padding["h100-80gb-hbm3 verdict"] == padding["verdict"]
                                                else quick.DIFFERS)
    fp8 = table.loc["TensorcoreFpEightVerdict"]  # per clock, not tested anywhere: nothing to agree on
    assert fp8["verdict"] == fp8["h200 verdict"] and fp8["h200 agrees"] == quick.NOT_COMPARED
    assert "[" in fp8["values"]  # the ratio (per second) with its interval
    forward = table.loc["GdnFlashQlaFwdVerdict"]
    assert forward["verdict"] == quick.NOT_TESTABLE and forward["values"].startswith("flash_qla: ")
    assert "unsupported (Unsupported: needs compute capability 9.0)" in forward["values"]
    assert forward["h200 verdict"] == "holds" and forward["h200 agrees"] == quick.NOT_COMPARED
    published = table.loc["GdnPublishedFwdVerdict"]  # no published configuration among the quick cases
    assert published["verdict"] == quick.NOT_IN_PROFILE and published["h200 verdict"] == style.MISSING
    backward = table.loc["GdnFlashQlaBwdVerdict"]  # no backward among the quick cases: derived nowhere
    assert backward["verdict"] == quick.NOT_IN_PROFILE and backward["h200 agrees"] == quick.NOT_COMPARED
    compared = (table["h200 agrees"] != quick.NOT_COMPARED).sum()
    assert f"; {compared} of {compared} as on the H200; " in lines[-1]  # the models by name: no row of this one
    assert lines[-1].endswith(f"; 1 {quick.NOT_TESTABLE}")  # FlashQLA's forward at the main shapes; the rest are not in the profile


def test_a_claim_is_untestable_only_where_its_implementation_has_rows_and_none_ran():
    run = [{"study": "gdn", "impl": "flash_qla", "status": "unsupported", "error": "Unsupported: SM90 only"},
           {"study": "gdn", "impl": "flash_qla", "status": "error", "error": "x" * 200},
           {"study": "gdn", "impl": "fla_chunk", "status": "ok", "error": None},
           {"study": "gdn", "impl": "flashinfer", "status": "ok", "error": None},
           {"study": "gdn", "impl": "flashinfer", "status": "oom", "error": "out of memory"}]
    why = quick.untestable(run, "gdn", ("flash_qla", "fla_chunk", "flashinfer", "chunk"))
    assert why == "flash_qla: 1 unsupported, 1 error (Unsupported: SM90 only)"  # one ok row suffices; no rows: not run here
    assert quick.untestable(run, "flex", ("flash_qla",)) == ""


@pytest.mark.parametrize("here,there,agrees", [
    ("holds", "holds", quick.SAME), ("holds", "partly holds (1 of 2)", quick.DIFFERS),
    ("holds", "not measured", quick.NOT_COMPARED), (quick.NOT_TESTABLE, "holds", quick.NOT_COMPARED),
    ("n/a", "holds", quick.NOT_COMPARED), ("holds", "n/a", quick.NOT_COMPARED),
    ("not tested (per clock)", "not tested (per clock)", quick.NOT_COMPARED),
    ("not reached; 1 on the line", "not reached", "on the line")])
def test_only_two_verdicts_are_compared(here, there, agrees):
    assert quick.agreement(here, there) == agrees


def test_every_claim_names_the_implementations_it_needs_among_its_studys():
    for study in STUDIES:
        report = render.report_module(study)
        assert set(report.CLAIM_IMPLS) == set(report.CLAIMS), study
        for verdict, impls in report.CLAIM_IMPLS.items():
            assert impls and set(impls) <= set(SWEEPS[study]["impls"]), (verdict, impls)


def test_the_quick_swiglu_section_times_the_cuda_graph_claims_pair():
    """The CUDA-graph claim pairs a decode call launched per repetition with its graph replay, both of
    role ``decode``: the quick section makes both for eager at 16 tokens (a quick run on the H200
    measured the replay alone as ``decode`` once, and the claim read n/a)."""
    import importlib
    cases = importlib.import_module("kernels.swiglu.study").cases(QUICK["swiglu"], "eager")
    decode = {c["launch"] for c in cases if "decode" in c.get(rows.ROLES, []) and c["tokens"] == 16}
    assert decode == {"stream", "graph"}
