"""Every measuring run in the data (kernels/paper/runs.py): its role (committed, the second run the check
compares, a further run outside it, a failed run) and its outcome by the reproduction check's own functions."""

import copy
from pathlib import Path

import pandas as pd
import pytest

from kernels.paper import claims, models, provenance, reproduce, runs

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "data" / "raw"
REPRODUCTIONS = ROOT / "data" / "reproductions"
CONFIG = provenance.load_config()
STUDIES = CONFIG["studies"]
SECTIONS = {s: CONFIG[s]["sweep"] for s in STUDIES}


def _row(study="tensorcore", n=1, status="ok", commit="a" * 40, gpu="GPU-11111111-x", fp="f1",
         date="2026-12-03T10:00:00+00:00", model="NVIDIA H200"):
    return {"study": study, "impl": "bf16", "m": n, "n": n, "k": n, "status": status,
            "device_ms": 1.0 if status == "ok" else None,
            "env": {"git_commit": commit, "gpu_uuid": gpu, "fingerprint": fp, "date": date, "gpu_name": model}}


def test_a_folders_rows_split_into_runs_by_commit_gpu_and_fingerprint_earliest_first():
    rows_ = [_row(n=1, commit="b" * 40, date="2026-12-05T01:00:00+00:00"), _row(n=2),
             _row(n=3, fp="f2", commit="c" * 7 + "-dirty", date="2026-12-04T00:00:00+00:00"), _row(n=4)]
    found = runs.split_runs(rows_)
    assert [[r["n"] for r in run] for run in found] == [[2, 4], [3], [1]]
    assert [runs.run_commit(run) for run in found] == ["aaaaaaa", "ccccccc-dirty", "bbbbbbb"]
    assert runs.run_dates(found[0]) == "2026-12-03" and runs.run_dates([{"env": {}}]) == "n/a"


def test_each_run_gets_its_role_from_its_folder_and_config_and_a_run_never_timed_is_failed(tmp_path):
    raw = tmp_path / "raw"
    committed = {"h200": [_row(), _row(study="gdn")]}
    second = [(tmp_path / "r" / "h200-b", "tensorcore", [_row(gpu="GPU-22222222")]),
              (tmp_path / "r" / "h200-c", "tensorcore", [_row(gpu="GPU-33333333", date="2026-12-02T00:00:00+00:00")]),
              (tmp_path / "r" / "h200-d", "tensorcore", [_row(gpu="GPU-44444444", status="error")]),
              (tmp_path / "r" / "h200-e", "gdn", [_row(study="gdn", gpu="GPU-55555555"),
                                                  _row(study="gdn", n=2, gpu="GPU-55555555", status="error")]),
              # a run of a model without committed rows: nothing to set it against
              (tmp_path / "r" / "a100-f", "tensorcore", [_row(model="NVIDIA A100-SXM4-80GB")])]
    checked = {"h200": [str(tmp_path / "r" / "h200-b"), str(tmp_path / "r" / "h200-e") + "/"]}
    found = runs.roles(committed, second, raw, checked, ["tensorcore", "gdn"])
    assert [(r["study"], Path(r["folder"]).name, r["role"]) for r in found] == [
        ("tensorcore", "h200", runs.COMMITTED), ("tensorcore", "h200-b", runs.CHECKED),
        ("tensorcore", "h200-c", runs.FURTHER), ("tensorcore", "h200-d", runs.FAILED),
        ("gdn", "h200", runs.COMMITTED), ("gdn", "h200-e", runs.CHECKED)]  # one of its rows timed: not failed
    assert runs.roles(committed, second[:1], raw, {"h200": str(tmp_path / "r" / "h200-b")}, ["tensorcore"])[1][
        "role"] == runs.CHECKED  # config reproduce.committed may name one folder


@pytest.fixture(scope="module")
def tensorcore():
    """The committed H200 tensor-core rows and their report macros."""
    run = claims.load_run(sorted(str(p) for p in (RAW / "h200" / "tensorcore").glob("*.jsonl")))
    return run, models.model_macros(run, "h200", SECTIONS)


def _second(rows_, gpu, scale=1.0, edit=lambda r: None):
    """A copy of ``rows_`` measured on ``gpu`` at another commit, every timed row ``scale`` times as long."""
    out = copy.deepcopy(rows_)
    for r in out:
        r["env"].update(gpu_uuid=gpu, git_commit="0123456789" * 4, date="2026-12-07T00:00:00+00:00")
        if r["status"] == "ok":
            for key in ("times_ms", "device_times_ms"):
                r[key] = [t * scale for t in r[key]]
            r["median_ms"], r["device_ms"] = r["median_ms"] * scale, r["device_ms"] * scale
        edit(r)
    return out


def test_each_run_reads_the_checks_outcome_against_the_committed_rows(tmp_path, tensorcore):
    """A GPU 10 % slower in every row reproduces (its GPU factor 1.10 divided out); one GEMM 50 % slower does
    not (11 of 12 rows); a run never timed is failed, one of other code is not compared."""
    first, macros = tensorcore

    def slow_gemm(r):
        if r["impl"] == "bf16" and r["m"] == 8192 and r["status"] == "ok":
            r["device_times_ms"] = [t * 1.5 for t in r["device_times_ms"]]
            r["device_ms"] *= 1.5

    def failed(r):
        r.update(status="error", error="boom", device_ms=None)

    def other_code(r):
        r["env"]["fingerprint_parts"] = {**r["env"]["fingerprint_parts"], "kernels/core/timing.py": "0" * 16}

    folder = tmp_path / "reproductions"
    second = [(folder / "h200-a", "tensorcore", _second(first, "GPU-aaaaaaaa-0", 1.1)),
              (folder / "h200-b", "tensorcore", _second(first, "GPU-bbbbbbbb-0", edit=slow_gemm)),
              (folder / "h200-c", "tensorcore", _second(first, "GPU-cccccccc-0", edit=failed)),
              (folder / "h200-d", "tensorcore", _second(first, "GPU-dddddddd-0", edit=other_code)),
              (folder / "h200-e", "tensorcore", _second(first, first[0]["env"]["gpu_uuid"]))]
    out_csv, out_tex = tmp_path / "runs.csv", tmp_path / "runs.tex"
    table = runs.render_runs({"h200": first}, {"h200": macros}, second, RAW, "h200", ["tensorcore"], SECTIONS,
                             {"h200": [str(folder / "h200-a")]}, 0.05, 0.95, str(out_csv), str(out_tex))
    assert pd.read_csv(out_csv)[["folder", "outcome"]].equals(table[["folder", "outcome"]])
    t = table.set_index(table["folder"].map(lambda f: Path(f).name))
    assert list(t["role"]) == [runs.COMMITTED, runs.CHECKED, runs.FURTHER, runs.FURTHER, runs.FURTHER,
                               runs.FAILED]
    assert t.loc["h200", "outcome"] == runs.PAPERS and t.loc["h200", "rows_timed"] == t.loc["h200", "rows"] == 12
    a = t.loc["h200-a"]
    assert a["outcome"] == runs.REPRODUCED and a["factor"] == pytest.approx(1.1) and a["low"] <= 1.1 <= a["high"]
    assert (a["rows_within"], a["rows_compared"], a["claims_same"], a["claims"]) == (0, 12, 1, 1)  # FP8: not tested
    # every row of 10 µs or more within once the GPU factor is divided out; what the GPU recorded beside it
    assert (a["within_after"], a["rows_long"], a["within_short"], a["rows_short"]) == (12, 12, 0, 0)
    assert set(t["settings"]) == {"not recorded"}  # rows measured before the GPU's state was recorded
    assert a["commit"] == "0123456" and a["gpu"] == "GPU-aaaaaaaa" and a["date"] == "2026-12-07"
    b = t.loc["h200-b"]
    assert b["outcome"] == runs.NOT_REPRODUCED and b["within_pct"] == "91.6" and "needs 95 %" in b["why"]
    assert t.loc["h200-c", "outcome"] == runs.NOT_TIMED and t.loc["h200-c", "why"] == "12 error"
    assert t.loc["h200-d", "outcome"] == runs.NOT_COMPARED and "other code" in t.loc["h200-d", "why"]
    assert t.loc["h200-e", "outcome"] == runs.NOT_COMPARED and "another GPU" in t.loc["h200-e", "why"]
    tex = out_tex.read_text()
    assert r"\newcommand{\RunsCount}{6}" in tex and r"\newcommand{\RunsByModel}{6 on the H200}" in tex
    assert r"\newcommand{\RunsChecked}{1}" in tex and r"\newcommand{\RunsFailed}{1}" in tex
    assert r"\newcommand{\RunsReproducedByModel}{1 of 1 studies on the H200}" in tex  # the checked run alone
    assert r"\newcommand{\RunsFactorRange}{1.00--1.10}" in tex  # the compared runs' GPU factors
    # one table gives each run's GPU factor, its rows within after it and what its GPU recorded; the caption
    # counts the failed runs
    assert "& 1.100 [1.100, 1.100] & 12 of 12 & 1 of 1 \\\\" in tex and "& not recorded &" in tex
    assert "none of whose rows was timed (1)" in tex
    # each run by its GPU (its folder is in the CSV): the five runs of data/reproductions/ and the committed one
    assert r"\label{tab:runs}" in tex and all(f"{x * 8} &" in tex for x in "abcd") and "h200-a" not in tex
    assert (r"(1.385\,ms against 1.385\,ms on GPU-8adc1d21, 1.385\,ms on GPU-dddddddd, 1.524\,ms on GPU-aaaaaaaa"
            r" and 2.078\,ms on GPU-bbbbbbbb: 1.00--1.50 times as long)") in tex  # the other runs, fastest first
    # the committed GEMM at 8192^3 against the other runs that timed it (the failed one left out; a tie is no
    # faster)
    assert r"\newcommand{\RunsTensorcoreBfPlace}{fastest of 5}" in tex
    assert r"\newcommand{\RunsTensorcoreBfRatio}{1.00--1.50}" in tex
    assert r"\newcommand{\RunsTensorcoreSize}{8192}" in tex and "ran the fastest of 5 runs" in tex


def test_a_committed_run_alone_says_so_and_no_run_gives_the_empty_table(tensorcore):
    first, _ = tensorcore
    found = runs.roles({"h200": first}, [], RAW, {}, ["tensorcore"])
    table = runs.runs_table(found, {"h200": first}, {}, SECTIONS, 0.05, 0.95)
    values = runs.runs_macros(found, table, "h200", SECTIONS, 0.05)
    assert values["RunsTensorcoreBfPlace"] == "fastest of 1" and values["RunsTensorcoreBfOtherMs"] == "n/a"
    assert values["RunsTensorcoreText"].startswith("; the bf16 GEMM at 8192$^3$") and "one run" in values[
        "RunsTensorcoreText"]
    assert table["outcome"].tolist() == [runs.PAPERS]
    empty = runs.runs_table([], {}, {}, SECTIONS, 0.05, 0.95)
    assert list(empty.columns) == runs.COLUMNS
    assert runs.runs_macros([], empty, "h200", {}, 0.05)["RunsTensorcoreText"] == "."
    assert values["RunsReproducedByModel"] == "n/a"  # no second run checked
    assert r"\label{tab:runs}" in runs.runs_float(empty, 0.05)
    assert "none of whose rows was timed (none)" in runs.runs_float(table, 0.05)


def test_every_study_folder_in_the_data_is_a_run_of_the_table():
    """Each study folder of each data/raw/<model>/ and of each data/reproductions/<name>/ holds at least one
    run of the table (the rendered table's rows: tests/test_paper.py)."""
    committed = {m: models.model_run(RAW, m, STUDIES) for m in models.committed_models(RAW, CONFIG["paper_gpu"])}
    found = runs.roles(committed, reproduce.second_runs(REPRODUCTIONS, STUDIES), RAW, CONFIG["reproduce"]["committed"],
                       STUDIES)
    listed = {(Path(r["folder"]), r["study"]) for r in found}
    folders = {(p.parent.parent.relative_to(ROOT), p.parent.name)
               for base in (RAW, REPRODUCTIONS) for p in base.glob("*/*/*.jsonl")}
    assert folders and folders == {(f.relative_to(ROOT), s) for f, s in listed}
    checked = [f for v in CONFIG["reproduce"]["committed"].values() for f in (v if isinstance(v, list) else [v])]
    assert sum(r["role"] == runs.CHECKED for r in found) == sum(
        1 for f in checked for s in STUDIES if any((ROOT / f / s).glob("*.jsonl")))


def test_the_committed_run_is_first_where_it_was_measured_before_every_other_run():
    def run(role, date, model="h200", study="tensorcore"):
        return {"model": model, "study": study, "role": role, "rows": [{"env": {"date": date}}]}

    found = [run(runs.COMMITTED, "2026-12-03T11:00:00+00:00"), run(runs.CHECKED, "2026-12-03T15:00:00+00:00"),
             run(runs.FURTHER, "2026-12-04T09:00:00+00:00"),
             run(runs.COMMITTED, "2026-12-05T10:00:00+00:00", study="gdn"),
             run(runs.CHECKED, "2026-12-04T10:00:00+00:00", study="gdn"),
             run(runs.COMMITTED, "2026-12-05T10:00:00+00:00", study="flex")]  # alone: not counted
    assert runs.committed_first(found) == {("h200", "tensorcore"): True, ("h200", "gdn"): False}


def test_every_committed_run_of_the_data_was_measured_before_its_second_runs():
    """The committed rows are each study's first cold run of its code: no later run replaced them."""
    committed = {m: models.model_run(RAW, m, CONFIG["studies"]) for m in models.committed_models(RAW, "h200")}
    found = runs.roles(committed, reproduce.second_runs(ROOT / "data" / "reproductions", CONFIG["studies"]), RAW,
                       CONFIG["reproduce"]["committed"], CONFIG["studies"])
    first = runs.committed_first(found)
    assert first and all(first.values()), [k for k, v in first.items() if not v]
