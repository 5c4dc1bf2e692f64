"""The reproduction check (kernels/paper/reproduce.py) and the case identity of a row (kernels/paper/rows.py):
verdicts, the claims re-derived, the committed data against itself and against a perturbed copy,
and the quick sections of the config against the committed rows."""

import importlib
import json
import re
import shutil
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch
import yaml

import kernels
from kernels.core import harness
from kernels.paper import (
    claims,
    gpu_factor,
    provenance,
    reproduce,
    reproduce_report,
    reproduce_tables,
    rows,
)

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "raw" / "h200"
STUDIES = tuple(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"])


@pytest.fixture(autouse=True)
def toy_study(monkeypatch, tmp_path):
    """The toy study as in a workflow copy: its package importable as ``kernels.toy`` (whose
    registry fills in its schema's names) and its row schema (``$defs.row`` of
    workflow/schemas/toy.schema.yaml beside the common row schema)."""
    toy = ROOT / "tests" / "toy_study"
    package = tmp_path / "packages" / "toy"
    package.mkdir(parents=True)
    (package / "__init__.py").touch()
    for module in toy.glob("*.py"):
        shutil.copy(module, package / module.name)
    monkeypatch.setattr(kernels, "__path__", [*kernels.__path__, str(package.parent)])
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    shutil.copy(rows.SCHEMAS / "row.schema.yaml", schemas / "row.schema.yaml")
    shutil.copy(toy / "toy.schema.yaml", schemas / "toy.schema.yaml")
    real = rows.row_schema
    monkeypatch.setattr(rows, "row_schema", lambda study: f"{schemas / 'toy.schema.yaml'}#{rows.ROW_POINTER}"
                        if study == "toy" else real(study))
    yield
    for name in [m for m in sys.modules if m == "kernels.toy" or m.startswith("kernels.toy.")]:
        del sys.modules[name]


def config_section(study, name):
    return yaml.safe_load((ROOT / "config" / "studies" / f"{study}.yaml").read_text())[study][name]


def row(times=(1.0, 1.0, 1.0), status="ok", device=None, **case):
    """A raw row of a toy case: latency ``times``, device times ``device`` (None: the same as ``times``)."""
    case = {"study": "toy", "impl": "scale", "pass": "fwd", "dtype": "float32", "numel": 4, **case}
    ok = status == "ok"
    r = {**case, "times_ms": list(times) if ok else [], "median_ms": float(pd.Series(times).median()) if ok else None,
         "bytes": 32, "flops": 4, "status": status, "error": None if ok else "failed",
         "env": {"gpu_name": "Test GPU", "torch": "x", "triton": "y", "python": "3", "git_commit": "abc"}}
    device = times if device is None else device
    r.update(device_times_ms=list(device) if ok else [], device_ms=float(pd.Series(device).median()) if ok else None)
    if ok:
        r["timing"] = {"method": "cuda-events+spin"}
    return r


# ---------------------------------------------------------------------------- case identity


def test_case_id_ignores_what_the_measurement_wrote():
    a = row(times=(1.0, 2.0))
    b = {**row(times=(5.0,), device=(0.5,)), "env": {"gpu_name": "Other"}, "setup_s": 3.0, "rel_err": 0.1,
         "peak_mem_bytes": 7, "kernels": []}
    assert rows.case_id(a) == rows.case_id(b)
    assert rows.case_id(a) != rows.case_id(row(numel=8)) != rows.case_id(row(**{"pass": "bwd"}))
    assert rows.case_label(row(numel=8, launch="graph")) == "fwd float32 launch=graph numel=8"


def test_a_measured_row_is_the_case_of_its_config():
    """Every field the harness and a study's prepare add to a row is a measured one: a row keeps
    the case id of the config case it was measured from (the toy study, on this host's device)."""
    toy = importlib.import_module("kernels.toy.study")
    timing = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["timing"] | {"warmup_ms": 1, "rep_ms": 2}
    case = toy.cases({"numel": [256]}, "scale")[0]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    measured = harness.measure_case(toy, "scale", case, device, timing)
    assert measured["status"] == "ok"
    assert rows.case_id(measured) == rows.case_id({"study": "toy", "impl": "scale", **case})


def test_every_committed_row_is_a_configured_case():
    expected = rows.configured_cases({s: config_section(s, "sweep") for s in STUDIES})
    committed = claims.load_run(sorted(str(p) for p in DATA.glob("*/*.jsonl")))
    stray = [rows.case_label(r, skip=()) for r in committed if rows.case_id(r) not in expected]
    assert not stray, stray[:5]


def test_every_quick_case_has_a_committed_row():
    """The quick run compares with the committed rows of the same cases: each has one, and it was timed."""
    committed = {rows.case_id(r): r for r in claims.load_run(sorted(str(p) for p in DATA.glob("*/*.jsonl")))}
    for study in STUDIES:
        quick = rows.configured_cases({study: config_section(study, "quick")})
        assert quick, study
        assert all(committed[c]["status"] == "ok" for c in quick), study


def test_two_rows_of_one_case_in_a_run_are_refused(tmp_path):
    path = tmp_path / "toy" / "scale.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(row()) + "\n" + json.dumps(row(times=(2.0,))) + "\n")
    with pytest.raises(ValueError, match=r"toy/scale\.jsonl:2: same case as \S+/toy/scale\.jsonl:1 "):
        claims.load_run([str(path)])


def test_a_timed_row_without_a_device_time_is_refused(tmp_path):
    """Rows from before the device time was recorded are not compared: the row schema requires it."""
    path = tmp_path / "toy" / "scale.jsonl"
    path.parent.mkdir()
    old = {k: v for k, v in row().items() if k not in ("device_times_ms", "device_ms")}
    path.write_text(json.dumps(row(numel=8)) + "\n" + json.dumps(old) + "\n")
    with pytest.raises(ValueError, match=r"toy/scale\.jsonl:2: .*device_"):
        claims.load_run([str(path)])


# ---------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize("ratio,expected", [(1.0, "reproduced"), (1.05, "reproduced"), (0.95, "reproduced"),
                                            (1.06, "slower"), (0.94, "faster"), (3.0, "slower")])
def test_verdict_of_a_ratio(ratio, expected):
    assert reproduce.verdict(ratio, 0.05) == expected


def test_compare_rows_per_case():
    ref = [row(numel=n) for n in (1, 2, 3, 4, 5)] + [row(numel=6, status="unsupported"),
                                                     row(numel=7, status="oom")]
    cand = [row(numel=1, times=(1.02, 1.03)), row(numel=2, times=(2.0, 2.0)), row(numel=3, times=(0.5,)),
            row(numel=4, status="error"), row(numel=6, status="unsupported"), row(numel=7, status="error"),
            row(numel=8)]
    table = reproduce.compare(cand, ref, 0.05).set_index("case")
    verdicts = table["verdict"].to_dict()
    assert verdicts == {"fwd float32 numel=1": "reproduced", "fwd float32 numel=2": "slower",
                        "fwd float32 numel=3": "faster", "fwd float32 numel=4": "status changed",
                        "fwd float32 numel=5": "missing", "fwd float32 numel=6": "not timed",
                        "fwd float32 numel=7": "status changed", "fwd float32 numel=8": "new"}
    assert table.loc["fwd float32 numel=2", "ratio"] == table.loc["fwd float32 numel=2", "ratio_latency"] == 2.0
    assert table.loc[["fwd float32 numel=4", "fwd float32 numel=5"], "ratio"].isna().all()
    # only the cases the candidate was meant to measure (1-4): the reference's 5-7 are out of scope
    expected = {rows.case_id(row(numel=n)) for n in (1, 2, 3, 4)}
    scoped = reproduce.compare(cand, ref, 0.05, expected).set_index("case")["verdict"]
    assert "missing" not in set(scoped) and scoped[[f"fwd float32 numel={n}" for n in (6, 7, 8)]].eq("new").all()


def test_the_device_time_is_compared_and_the_latency_reported_beside_it():
    """A launch-bound call: the latency doubled on a busy host, the device time did not."""
    ref = row(times=(0.010,) * 5, device=(0.004, 0.004, 0.004, 0.004, 0.005))
    cand = row(times=(0.020,) * 5, device=(0.0041, 0.004, 0.004, 0.004, 0.004))
    r = reproduce.compare_rows(ref, cand, 0.05)
    assert r["verdict"] == "reproduced" and r["ms_reference"] == r["ms_candidate"] == 0.004
    assert r["ratio"] == 1.0 and r["ratio_latency"] == 2.0
    assert r["band_lo_reference"] == 1.0 and r["band_hi_reference"] == pytest.approx(1.15)  # q90 of 4, 4, 4, 4, 5 us
    # the other way round: the same latency, the device time 10 % up
    slower = reproduce.compare_rows(ref, row(times=(0.010,) * 5, device=(0.0044,) * 5), 0.05)
    assert slower["verdict"] == "slower" and slower["ratio"] == pytest.approx(1.1) and slower["ratio_latency"] == 1.0


def test_host_bound_rows_are_flagged_and_split_by_size():
    """A row whose spin was short in more than 5 % of its repetitions (in either run) is host-bound;
    the size table splits the rows timed in both by the reference's device time."""
    from kernels.core import timing

    assert timing.host_bound(11, 200) and not timing.host_bound(10, 200) and not timing.host_bound(None, 5)
    short = {"method": "cuda-events+spin", "spin_short": 3}
    ref = [row(numel=1, times=(0.004,) * 5), row(numel=2, times=(0.5,) * 5), row(numel=3, times=(0.5,) * 5),
           {**row(numel=4, times=(20.0,) * 5), "timing": short}]
    cand = [row(numel=1, times=(0.005,) * 5), row(numel=2, times=(0.5,) * 5),
            {**row(numel=3, times=(0.51,) * 5), "timing": short}, row(numel=4, times=(30.0,) * 5)]
    table = reproduce.compare(cand, ref, 0.05)
    assert table["host_bound"].tolist() == [False, False, True, True]
    sizes = reproduce_tables.size_table(table)
    assert sizes.to_dict("list") == {"device time": ["below 10 µs", "0.1–1 ms", "10 ms and more"],
                                     "rows": [1, 2, 1], "within": [0, 2, 0], "within %": ["0.0", "100.0", "0.0"],
                                     "host-bound": [0, 1, 1], "within, host-free": ["0 of 1", "1 of 1", "0 of 0"]}
    m = reproduce_report.macros(table, reproduce.compare_claims({}, {}), 0.05, 0.95, ["x"])
    assert (m["ReproRowsWithinHostFree"], m["ReproRowsComparedHostFree"]) == ("1", "2")
    assert (m["ReproRowsWithinLatency"], m["ReproPercentWithinLatency"]) == ("2", "50.0")  # latency = device here
    assert (m["ReproRowsOutside"], m["ReproRowsOutsideBelowTenUs"], m["ReproRowsOutsideFromOneMs"]) == ("2", "1", "1")
    assert m["ReproOutsideFromOneMsList"] == "scale (torch.mul) at 20.000 ms: 1.50 (host-bound)"  # 30 ms in the second run
    assert (m["ReproRowsNotTimed"], m["ReproPercentWithin"]) == ("0", "50.0")
    assert m["ReproOutcomeByStudy"] == r"toy: not reproduced (50.0 \% of rows within, 66.6 \% after the GPU factor 1.02, needs 95 \%)"
    env = {"git_commit": "85bec7eca74", "gpu_uuid": "GPU-640a6f14-1889"}
    m = reproduce_report.macros(table, reproduce.compare_claims({}, {}), 0.05, 0.95, ["x"],
                         run=[{"study": "toy", "env": env}, {"study": "toy", "env": env}])
    assert m["ReproRuns"] == "toy: commit 85bec7e, GPU-640a6f14"
    assert reproduce_tables.outside_table(table)["verdict"].tolist() == ["slower, host-bound", "slower"]
    impls = reproduce_tables.impl_table(table)
    assert impls.to_dict("list") == {"study": ["Toy"], "implementation": ["scale (torch.mul)"], "rows": [4], "slower": [2], "faster": [0],
                                     "host-bound": [1], "median ratio": ["1.135"]}


# ---------------------------------------------------------------------------- claims and the summary


def test_a_share_checked_against_a_threshold_is_rounded_down():
    assert (reproduce.percent(588, 616), reproduce.percent(616, 616), reproduce.percent(0, 3)) == ("95.4", "100.0", "0.0")
    assert reproduce.percent(1, 0) == "n/a"


def test_claims_compared_where_the_reference_has_a_verdict():
    """A verdict is compared with its count: "partly holds" of 2 values and of 3 differ. A reference that
    decides nothing (n/a, not tested) is left out."""
    claims = reproduce.compare_claims({"AVerdict": "holds", "BVerdict": "n/a", "CVerdict": "partly holds (1 of 2)",
                                       "DVerdict": "partly holds (2 of 5)", "EVerdict": "not tested (per clock)"},
                                      {"AVerdict": "holds", "BVerdict": "holds", "CVerdict": "holds",
                                       "DVerdict": "partly holds (3 of 5)", "EVerdict": "not tested (per clock)"})
    assert claims.to_dict("list") == {"claim": ["AVerdict", "CVerdict", "DVerdict"],
                                      "reference": ["holds", "partly holds (1 of 2)", "partly holds (2 of 5)"],
                                      "candidate": ["holds", "holds", "partly holds (3 of 5)"],
                                      "same": [True, False, False], "on_line": [False, False, False]}
    assert reproduce.compare_claims({"AVerdict": "holds"}, {})["candidate"].tolist() == ["n/a"]


@pytest.mark.parametrize("first,second,on_line", [
    ("not reached", "not reached; 1 on the line", True), ("holds", "on the line", True),
    ("partly holds (9 of 20); 2 on the line", "partly holds (10 of 22)", True),
    ("partly holds (5 of 20); 1 on the line", "partly holds (10 of 22)", False),  # 5 apart, 1 on the line
    ("not reached", "exceeded; 1 on the line", False),  # another kind: a difference
    ("holds", "exceeded", False), ("holds", "holds", False)])
def test_a_verdict_differs_only_on_the_line_when_the_line_explains_the_difference(first, second, on_line):
    assert reproduce.differs_on_the_line(first, second) is on_line
    assert reproduce.differs_on_the_line(second, first) is on_line


def test_verdicts_that_differ_on_the_line_are_neither_the_same_nor_different():
    """A second run whose verdict differs where either run has a value on its claim's line reads "on
    the line": reported, and not counted against its study."""
    claims = reproduce.compare_claims({"FlexAVerdict": "not reached", "FlexBVerdict": "holds"},
                                      {"FlexAVerdict": "not reached; 1 on the line", "FlexBVerdict": "exceeded"})
    assert claims["on_line"].tolist() == [True, False] and not claims["same"].any()
    table = reproduce.compare([row(numel=n) for n in range(1, 5)], [row(numel=n) for n in range(1, 5)], 0.05)
    table["study"] = "flex"
    assert reproduce.study_outcomes(table, claims, 0.95) == {"flex": ["1 verdict different"]}  # B, not A
    line = reproduce.summary_line(table, claims, 0.05, 0.95)
    assert ("claims: 0 of 2 verdicts the same, on the line: FlexAVerdict ('not reached' -> 'not reached; 1 on the "
            "line'), different: FlexBVerdict ('holds' -> 'exceeded')") in line
    assert reproduce.claim_status(claims, ["flex"], []) == {}  # no study named: no claims table entries
    real = reproduce.compare_claims({"FlexFlashPrefillVerdict": "not reached"},
                                    {"FlexFlashPrefillVerdict": "not reached; 1 on the line"})
    assert reproduce.claim_status(real, ["flex"], ["flex"])["ReproFlexFlashPrefillVerdict"] == \
        "2nd run: not reached; 1 on the line"  # the second run's words say it, once


def test_summary_line_says_where_not():
    table = reproduce.compare([row(numel=n, times=(1.01,)) for n in range(1, 20)] + [row(numel=20, times=(2.0,))],
                              [row(numel=n) for n in range(1, 21)], 0.05)
    same = reproduce.compare_claims({"AVerdict": "holds"}, {"AVerdict": "holds"})
    assert (reproduce.summary_line(table, same, 0.05, 0.95)
            == "reproduced: claims: 1 of 1 verdicts the same; GPU factor: toy 1.01 [1.01, 1.01] (19 of 20 within "
               "after it); 19 of 20 rows within ±5 % of device time (95.0 %)")
    assert reproduce.summary_line(table, same, 0.05, 0.96).endswith(
        "19 of 20 rows within ±5 % of device time (95.0 %); not reproduced: toy (95.0 % of rows "
        "within, 95.0 % after the GPU factor 1.01, needs 96 %); outside: toy 1 (1 slower)")
    differ = reproduce.compare_claims({"AVerdict": "holds"}, {"AVerdict": "does not hold"})
    assert reproduce.summary_line(table, differ, 0.05, 0.95).startswith(
        "NOT reproduced: claims: 0 of 1 verdicts the same, different: AVerdict ('holds' -> 'does not hold'); ")


def test_a_gpu_slower_in_every_row_reproduces_the_claims_and_says_by_how_much():
    """A second GPU 14 % slower in every row (same-model GPUs differ so: SC22) has no row within ±5 %,
    and the study is reproduced once its GPU factor is divided out; rows under 10 µs are counted apart,
    and one kernel slower than the rest stays outside after the factor."""
    ref = [row(numel=n, times=(1.0,)) for n in range(1, 21)] + [row(numel=100 + n, times=(0.005,)) for n in range(3)]
    cand = ([row(numel=n, times=(1.14,)) for n in range(1, 21)]
            + [row(numel=100, times=(0.0051,)), row(numel=101, times=(0.005,)), row(numel=102, times=(0.008,))])
    table = reproduce.compare(cand, ref, 0.05)
    same = reproduce.compare_claims({"ToyAVerdict": "holds"}, {"ToyAVerdict": "holds"})
    assert reproduce.study_outcomes(table, same, 0.95) == {"toy": ["8.6 % of rows within, needs 95 %"]}  # as measured
    assert reproduce.study_outcomes(table, same, 0.95, tolerance=0.05) == {"toy": []}
    f = gpu_factor.study_factor(table, 0.05)
    assert (f["rows_long"], f["within_after"], f["rows_short"], f["within_short"]) == (20, 20, 3, 2)
    assert f["factor"] == pytest.approx(1.14) and f["low"] <= f["factor"] <= f["high"]
    line = reproduce.summary_line(table, same, 0.05, 0.95)
    assert line.startswith("reproduced: claims: 1 of 1 verdicts the same; GPU factor: toy 1.14 [1.14, 1.14]")
    cand[:2] = [row(numel=1, times=(2.0,)), row(numel=2, times=(2.0,))]  # one kernel slower: not the GPU
    table = reproduce.compare(cand, ref, 0.05)
    assert reproduce.study_outcomes(table, same, 0.95, tolerance=0.05) == {
        "toy": ["8.6 % of rows within, 90.0 % after the GPU factor 1.14, needs 95 %"]}


def test_each_study_is_reproduced_on_its_own():
    """A study is the unit of reproduction: 96 % of all rows within the tolerance do not make up for
    one study below 95 %, and a verdict that differs fails its own study only."""
    ref = [row(numel=n) for n in range(1, 101)]
    cand = [row(numel=n, times=(2.0,) if n > 96 else (1.0,)) for n in range(1, 101)]
    table = reproduce.compare(cand, ref, 0.05)
    table.loc[table["case"].str.contains("numel=(?:8[1-9]|9[0-9]|100)$"), "study"] = "other"  # 20 rows, 4 outside
    same = reproduce.compare_claims({"ToyAVerdict": "holds", "OtherBVerdict": "holds"},
                                    {"ToyAVerdict": "holds", "OtherBVerdict": "holds"})
    assert reproduce.study_outcomes(table, same, 0.95) == {"toy": [], "other": ["80.0 % of rows within, needs 95 %"]}
    assert not reproduce.is_reproduced(table, same, 0.95)
    differ = reproduce.compare_claims({"ToyAVerdict": "holds"}, {"ToyAVerdict": "exceeded"})
    assert reproduce.study_outcomes(table, differ, 0.8) == {"toy": ["1 verdict different"], "other": []}
    assert reproduce.is_reproduced(table, same, 0.8)


# ---------------------------------------------------------------------------- the committed data


#: The sections the committed rows were measured with, as the rule passes them (the roles of their rows).
SWEEP = {s: yaml.safe_load((ROOT / "config" / "studies" / f"{s}.yaml").read_text())[s]["sweep"]
         for s in STUDIES}
TIMING = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["timing"]


def on_another_gpu(files, folder):
    """Copies of the run ``files`` (``<root>/<study>/<impl>.jsonl``) in ``folder``, their rows
    measured on another GPU of the same model (``env.gpu_uuid``), as a second run is."""
    out = []
    for f in map(Path, files):
        rows_ = [json.loads(x) for x in f.read_text().splitlines()]
        for r in rows_:
            r["env"]["gpu_uuid"] = "GPU-second-run"
        (folder / f.parent.name).mkdir(parents=True, exist_ok=True)
        (folder / f.parent.name / f.name).write_text("".join(json.dumps(r) + "\n" for r in rows_))
        out.append(str(folder / f.parent.name / f.name))
    return out


def _check(tmp_path, candidate_files, sections=SWEEP, reference=None, stale=None):
    """The check of ``candidate_files`` (on another GPU: :func:`on_another_gpu`) against ``reference``
    (files; all the committed rows where None): its line, its CSV and its outputs' paths."""
    candidate_files = on_another_gpu(candidate_files, tmp_path / "second_run")
    out = {k: str(tmp_path / name) for k, name in (("out_csv", "r.csv"), ("out_summary", "r.txt"),
                                                   ("out_figure", "r.pdf"), ("out_table", "t.csv"),
                                                   ("out_snippet", "s.tex"), ("out_numbers", "n.tex"))}
    reference = reference or sorted(str(p) for p in DATA.glob("*/*.jsonl"))
    line = reproduce_report.check(candidate_files, reference, gpu="h200", tolerance=0.05, min_within=0.95,
                           sections=sections, candidate=["second_run"], stale=stale, **out)
    return line, pd.read_csv(out["out_csv"]), {k: Path(v) for k, v in out.items()}


def test_committed_data_reproduce_themselves(tmp_path):
    files = sorted(str(p) for p in DATA.glob("*/*.jsonl"))
    line, table, out = _check(tmp_path, files)
    ok = sum(json.loads(x)["status"] == "ok" for f in files for x in Path(f).read_text().splitlines())
    macros = claims.study_macros(claims.tidy_tables(claims.load_run(files), "h200", SWEEP))
    verdicts = claims.claim_verdicts(macros)
    n_claims = len(reproduce.compare_claims(verdicts, verdicts))
    assert n_claims >= 7  # the claims-table verdicts these data decide
    assert line.startswith(f"reproduced: claims: {n_claims} of {n_claims} verdicts the same; GPU factor: flex 1.00 "
                           f"[1.00, 1.00]")
    assert line.endswith(f"; {ok} of {ok} rows within ±5 % of device time (100.0 %)")
    assert set(table["verdict"]) <= {"reproduced", "not timed"}
    snippet, numbers = out["out_snippet"].read_text(), out["out_numbers"].read_text()
    assert r"\newcommand{\ReproOutcome}{reproduced}" in numbers and r"\newcommand{\ReproThreats}{" in numbers
    assert r"\newcommand{\ReproCandidate}{\texttt{second\_run}}" in numbers
    assert r"\label{tab:reproduction}" not in snippet  # no row outside: no table
    assert r"\newif\ifReproOutside  %" in numbers  # nor the text that cites the tables of those rows
    assert r"\label{tab:reproduction_sizes}" in snippet and r"\label{tab:reproduction_claims}" not in snippet
    assert r"\newcommand{\ReproPercentWithinHostFree}{100.0}" in numbers
    assert out["out_figure"].read_bytes().startswith(b"%PDF")
    # the tables of the claims and of each value across GPUs give the second run's verdicts and numbers
    assert r"\label{tab:reproduction_headlines}" not in snippet and r"\ref{tab:uncertainty}" in snippet


def test_a_perturbed_second_run_is_caught(tmp_path):
    """A copy of the committed rows with the source kernel 3x faster at the large sizes (three SwiGLU
    verdicts change: latency, bandwidth and pointwise fusion), one eager row removed and one FlashQLA row
    failed; the claims table's status of a changed verdict names the second run's."""
    cand = tmp_path / "cand"
    shutil.copytree(DATA, cand, ignore=shutil.ignore_patterns("benchmarks"))
    seed = [json.loads(x) for x in (cand / "swiglu" / "seed.jsonl").read_text().splitlines()]
    for r in seed:
        if r["status"] == "ok" and r["numel"] >= 2**26:
            for times, median in (("times_ms", "median_ms"), ("device_times_ms", "device_ms")):
                r[times] = [t / 3 for t in r[times]]
                r[median] /= 3
    (cand / "swiglu" / "seed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in seed))
    eager = (cand / "swiglu" / "eager.jsonl").read_text().splitlines()
    removed = json.loads(eager[0])
    (cand / "swiglu" / "eager.jsonl").write_text("\n".join(eager[1:]) + "\n")
    qla = [json.loads(x) for x in (cand / "gdn" / "flash_qla.jsonl").read_text().splitlines()]
    qla[0].update(status="unsupported", times_ms=[], median_ms=None, device_times_ms=[], device_ms=None,
                  error="ImportError: flash_qla")
    del qla[0]["timing"]
    (cand / "gdn" / "flash_qla.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qla))

    line, table, out = _check(tmp_path, sorted(str(p) for p in cand.glob("*/*.jsonl")))
    assert line.startswith("NOT reproduced: ")
    assert "missing: 1 (swiglu 1); status changed: 1 (gdn 1)" in line
    same, total = map(int, re.search(r"claims: (\d+) of (\d+) verdicts the same", line).groups())
    assert total - same == 3 and line.startswith(
        f"NOT reproduced: claims: {same} of {total} verdicts the same, different: SwigluClaimBandwidthVerdict ('holds' "
        "-> 'exceeded'), SwigluClaimFusionVerdict ('not reached' -> 'missed (15 below, 15 above)'), "
        "SwigluClaimLatencyVerdict ('not reached' -> 'exceeded; 1 on the line'); GPU factor: ")  # another kind
    faster = table[(table["impl"] == "seed") & (table["verdict"] == "faster")]
    assert len(faster) == sum(r["status"] == "ok" and r["numel"] >= 2**26 for r in seed)
    assert faster["ratio"].round(6).eq(round(1 / 3, 6)).all()
    assert table.loc[(table["impl"] == "eager") & (table["case"] == rows.case_label(removed)), "verdict"].tolist() == [
        "missing"]
    assert table.loc[table["impl"] == "flash_qla", "verdict"].value_counts()["status changed"] == 1
    outside = out["out_table"].read_text()  # its caption first, then every row outside, worst first
    assert outside.startswith("# Rows of the second run (2nd) outside the tolerance, worst first")
    body = outside.split("\n", 1)[1]
    assert body.index("ok to unsupported") < body.index("missing") < body.index("faster")
    snippet, numbers = out["out_snippet"].read_text(), out["out_numbers"].read_text()
    assert r"\newcommand{\ReproOutcome}{not reproduced}" in numbers and r"\tablecsv{reproduction_outside}" in snippet
    assert r"\newif\ifReproOutside\ReproOutsidetrue" in numbers
    assert (r"\newcommand{\ReproClaimsDifferent}{SwiGLU kernel reaches 85–92 \% of peak HBM bandwidth; "
            r"Fusing memory-bound pointwise operations: 2–4× faster; "
            r"SwiGLU fusion cuts activation latency 2.5–3.5×}") in numbers
    assert r"\newcommand{\ReproSwigluClaimFusionVerdict}{2nd run: missed (15 below, 15 above)}" in numbers
    assert r"\newcommand{\ReproSwigluClaimGraphVerdict}{2nd run: same}" in numbers


def test_a_second_run_of_the_references_gpu_or_of_another_model_is_refused(tmp_path):
    """The reference's own rows, or any row of its GPU, are no second run (the quick profile's may
    be); rows of another GPU model are compared with nothing."""
    files = sorted(str(p) for p in DATA.glob("*/*.jsonl"))
    ref = claims.load_run(files)
    uuid = {r["env"]["gpu_uuid"] for r in ref if r["study"] == "flex"}.pop()
    with pytest.raises(ValueError, match=f"the second run's rows of flex were measured on {uuid}, as the reference"):
        reproduce.check_pair(ref, ref)
    reproduce.check_pair(ref, ref, partial=True)
    other = [{**r, "env": {**r["env"], "gpu_uuid": "GPU-x", "gpu_name": "NVIDIA A100"}} for r in ref]
    with pytest.raises(ValueError, match="the second run's rows are of NVIDIA A100 .env.gpu_name. and the "
                                         "reference's of NVIDIA H200: a second run is of the same GPU model"):
        reproduce.check_pair(other, ref, partial=True)
    reproduce.check_pair([{**r, "env": {**r["env"], "gpu_uuid": "GPU-x"}} for r in ref], ref)
    # studies of the reference measured on different GPUs: each study's second run is of another one
    flex, gdn = ([r for r in ref if r["study"] == s] for s in ("flex", "gdn"))
    reproduce.check_pair([{**r, "env": {**r["env"], "gpu_uuid": gdn[0]["env"]["gpu_uuid"]}} for r in flex], ref)


def write_run(folder, study, edit=lambda r: None, every=1):
    """The committed rows of ``study`` copied into ``folder/<study>/``, ``edit`` applied to every
    ``every``-th row of each file from its first (2: the first, the third, ...); returns the copies' paths."""
    out = []
    for f in sorted((DATA / study).glob("*.jsonl")):
        rows_ = [json.loads(x) for x in f.read_text().splitlines()]
        for r in rows_[::every]:
            edit(r)
        (folder / study).mkdir(parents=True, exist_ok=True)
        (folder / study / f.name).write_text("".join(json.dumps(r) + "\n" for r in rows_))
        out.append(str(folder / study / f.name))
    return out


def test_rows_of_several_runs_are_named_as_provenance_counts_them(tmp_path):
    """A study's rows of more than one commit, GPU or fingerprint are as many runs as provenance's
    study_state counts ("rows of N runs"), named by what differs; rows of one run are not named."""
    def of(numel, commit, fp):
        r = row(numel=numel)
        r["env"].update(git_commit=commit, fingerprint=fp)  # no fingerprint_parts: the digest is the row's
        return r

    assert reproduce.not_one_run([of(1, "abc", "f1"), of(2, "abc", "f1")]) == {}
    assert reproduce.not_one_run([of(1, "abc", "f1"), of(2, "abc", "f2")]) == {"toy": "rows of 2 runs: fingerprints f1, f2"}
    three = [of(1, "abc", "f1"), of(2, "abc", "f2"), of(3, "def", "f2")]
    assert reproduce.not_one_run(three) == {"toy": "rows of 3 runs: fingerprints f1, f2; commits abc, def"}
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "scale.jsonl").write_text("".join(json.dumps(r) + "\n" for r in three))
    state = provenance.study_state("toy", tmp_path, {}, {}, code={"digest": "f1", "parts": {}})
    assert state.why == "rows of 3 runs (commit, GPU, fingerprint)"


def test_a_second_run_of_two_runs_is_not_compared(tmp_path):
    """Half a second run's GDN rows of another fingerprint (another config part, which the workflow's
    test of the same code, provenance.same_code, does not see) were compared and reported "reproduced:
    85 of 85", while provenance calls the folder rows of 2 runs: GDN is not compared, the line and the
    paper say why and the runs are not reproduced; the tensor cores are compared."""
    def other_config(r):
        r["env"]["fingerprint_parts"]["config"] = "0" * 16

    cand = write_run(tmp_path / "cand", "gdn", other_config, every=2) + write_run(tmp_path / "cand", "tensorcore")
    envs = [json.loads(x)["env"] for x in Path(cand[0]).read_text().splitlines()[:2]]
    fingerprints = ", ".join(sorted(provenance.row_fingerprint(e) for e in envs))
    assert provenance.study_state("gdn", tmp_path / "cand", SWEEP["gdn"], TIMING).why.startswith("rows of 2 runs")
    studies = ("gdn", "tensorcore")
    line, table, out = _check(tmp_path, cand, {s: SWEEP[s] for s in studies},
                              reference=sorted(str(p) for s in studies for p in (DATA / s).glob("*.jsonl")))
    why = f"rows of 2 runs: fingerprints {fingerprints}"
    assert line.startswith("NOT reproduced: claims: ")
    assert line.endswith(f"; 12 of 12 rows within ±5 % of device time (100.0 %); not compared: gdn ({why})")
    assert set(table["study"]) == {"tensorcore"}
    numbers = out["out_numbers"].read_text()
    assert r"\newcommand{\ReproOutcome}{not reproduced}" in numbers
    assert rf"\newcommand{{\ReproOutcomeByStudy}}{{tensor cores: reproduced; Gated DeltaNet: not compared ({why})}}" in numbers
    assert rf"\newcommand{{\ReproGdnFlashQlaFwdVerdict}}{{{reproduce.NOT_COMPARED}}}" in numbers


def test_the_line_names_the_stale_studies_it_compared(tmp_path):
    """Reference rows of other code than today's (provenance: stale) compared with their second run:
    the line says so, naming why; a current study is not named, nor a stale one the check left out."""
    def other_timing(r):
        r["env"]["fingerprint_parts"]["kernels/core/timing.py"] = "0" * 16

    ref = write_run(tmp_path / "ref", "tensorcore", other_timing)
    commit = json.loads(Path(ref[0]).read_text().splitlines()[0])["env"]["git_commit"][:7]
    why = f"rows measured at {commit} by other code or config"
    config = provenance.load_config()
    found = {s: provenance.study_state(s, folder, config[s]["sweep"], config["timing"])
             for s, folder in (("tensorcore", tmp_path / "ref"), ("gdn", DATA))}
    record, _ = provenance.states_record({s: "0" * 16 for s in found}, found, "commit abc1234")
    assert reproduce.stale_studies(record, ["tensorcore", "gdn"]) == {"tensorcore": why}
    assert reproduce.stale_studies(record, ["gdn"]) == {}
    stale = reproduce.stale_studies(record, ["tensorcore"])
    line, _, _ = _check(tmp_path, sorted(str(p) for p in (DATA / "tensorcore").glob("*.jsonl")),
                        {"tensorcore": SWEEP["tensorcore"]}, reference=ref, stale=stale)
    assert line.startswith("reproduced: claims: 1 of 1 verdicts the same") and "; 12 of 12 rows" in line  # FP8: not tested
    assert line.endswith(f"; compared although stale: tensorcore ({why})")
    table = reproduce.compare([row()], [row()], 0.05)
    claims = reproduce.compare_claims({}, {})
    assert "stale" not in reproduce.summary_line(table, claims, 0.05, 0.95, stale={"gdn": why})


def test_outside_table_lists_every_row_outside_worst_first():
    ref = [row(numel=n) for n in range(1, 31)]
    cand = [row(numel=n, times=(1 + n / 10,)) for n in range(1, 31)]
    table = reproduce_tables.outside_table(reproduce.compare(cand, ref, 0.05))
    assert len(table) == 30 and table["ratio"].tolist() == sorted(table["ratio"].tolist(), key=float, reverse=True)
    assert table["case"].iloc[0] == rows.case_label(cand[-1]) and table["ratio"].iloc[0] == "4.00"
    none = reproduce_tables.outside_table(reproduce.compare(ref, ref, 0.05))
    assert none.empty and "verdict" in none.columns  # its columns without a row
    assert reproduce_tables.outside_csv(table).count("\n") == 32  # its caption, its header and each row


def test_the_figure_shows_every_study():
    """Each study timed in both runs has its legend entry, however many studies there are."""
    studies = ["tensorcore", "swiglu", "flex", "gdn", "longctx", "toy"]
    rows = [row(study=s) for s in studies]
    fig = reproduce_tables.figure(reproduce.compare(rows, rows, 0.05), 0.05)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    plt.close(fig)
    assert len(labels) == len(studies) and all(label.endswith("(1 of 1)") for label in labels)


def test_what_a_gpu_recorded_is_read_as_its_power_limit_and_median_clock():
    """The power limit and the median SM clock at the end of the timed repetitions; rows before the GPU's
    state was recorded read "not recorded"."""
    run = [{"study": "toy", "gpu_state": {"power_limit_w": 700.0, "after": {"sm_clock_mhz": mhz}}}
           for mhz in (1755, 1980, 1980)] + [{"study": "other"}]
    assert gpu_factor.gpu_settings(run, "toy") == "700 W limit, SM 1980 MHz"
    assert gpu_factor.gpu_settings(run, "other") == "not recorded"


def test_second_run_folders_of_one_parent_name_it_once():
    """Five folders of data/reproductions/ written out whole overran the appendix's line: the
    parent is named once; other folders, or one alone, keep their whole path."""
    five = [f"data/reproductions/h200-{i}" for i in range(5)]
    text = reproduce_report.folders_latex(five)
    assert text.count("reproductions") == 1 and text.endswith(r"in \texttt{data/\allowbreak{}reproductions/}")
    assert text.startswith(r"\texttt{h200-0}, \texttt{h200-1}") and r"\texttt{h200-3} and \texttt{h200-4}" in text
    assert reproduce_report.folders_latex(["data/reproductions/h200-0"]) == r"\texttt{data/\allowbreak{}reproductions/\allowbreak{}h200-0}"
    mixed = reproduce_report.folders_latex(["a/run_1", "b/run2"])
    assert mixed == r"\texttt{a/\allowbreak{}run\_1} and \texttt{b/\allowbreak{}run2}"


def test_the_appendix_names_what_only_one_run_prepared_ahead():
    """Long context's committed run prepared four implementations in its compile-ahead job and its
    second run none: the paper said nothing of it. Studies prepared alike, or only in the reference,
    are not named."""
    def rows(study, impls, ahead):
        return [{"study": study, "impl": i, "compile_ahead": {"status": "ok"} if i in ahead else None}
                for i in impls]
    ref = rows("longctx", ["chunk", "fla_chunk", "recurrent"], {"chunk", "fla_chunk"}) + rows("gdn", ["chunk"], {"chunk"})
    cand = rows("longctx", ["chunk", "fla_chunk", "recurrent"], set())
    assert reproduce_report.compile_ahead_differences(cand, ref) == "long context: GDN chunked (ours) and GDN FLA in the committed run only"
    assert reproduce_report.compile_ahead_differences(cand, cand) == "none"
    swapped = reproduce_report.compile_ahead_differences(ref[:3], cand)
    assert swapped == "long context: GDN chunked (ours) and GDN FLA in the second run only"


def test_a_second_run_without_rows_is_all_missing():
    table = reproduce.compare([], [row(numel=n) for n in (1, 2)], 0.05)
    claims = reproduce.compare_claims({}, {})
    assert (reproduce.summary_line(table, claims, 0.05, 0.95)
            == "NOT reproduced: claims: none to re-derive; no row timed in both runs; not reproduced: toy (no row timed "
               "in both runs, 2 missing); missing: 2 (toy 2)")
    fig = reproduce_tables.figure(table, 0.05)
    assert fig.axes[0].get_legend_handles_labels()[1] == ["missing (2)"]
    plt.close(fig)
    assert len(reproduce_tables.outside_table(table)) == 2


def test_the_quick_profile_leaves_out_a_claim_it_cannot_derive():
    """A partial candidate (the quick profile) reading n/a where the reference has a verdict did not
    measure that claim's cases: the claim is left out, not a difference; a full second run's n/a is."""
    reference, candidate = {"AVerdict": "holds", "BVerdict": "holds"}, {"AVerdict": "holds", "BVerdict": "n/a"}
    assert list(reproduce.compare_claims(reference, candidate, partial=True)["claim"]) == ["AVerdict"]
    full = reproduce.compare_claims(reference, candidate)
    assert list(full["claim"]) == ["AVerdict", "BVerdict"] and not full["same"].all()


def test_each_verdict_of_the_claims_table_gets_its_reproduction_status():
    """Same, different (with the second run's verdict), not compared (its study's rows compared, the
    verdict not) or no second run (its study's code has none): one macro per verdict of every study."""
    reference = {"SwigluClaimLatencyVerdict": "not reached", "SwigluClaimBandwidthVerdict": "holds",
                 "SwigluClaimFusionVerdict": "n/a", "TensorcorePaddingVerdict": "holds"}
    candidate = {"SwigluClaimLatencyVerdict": "not reached", "SwigluClaimBandwidthVerdict": "partly holds (1 of 2)",
                 "TensorcorePaddingVerdict": "holds"}
    compared = reproduce.compare_claims(reference, candidate)
    status = reproduce.claim_status(compared, ["swiglu", "tensorcore"], ["swiglu", "tensorcore", "gdn"])
    names = [name for study in ("swiglu", "tensorcore", "gdn") for name in claims.claim_labels([study])]
    assert sorted(status) == sorted(f"Repro{name}" for name in names)
    assert status["ReproSwigluClaimLatencyVerdict"] == reproduce.SAME
    assert status["ReproSwigluClaimBandwidthVerdict"] == reproduce.DIFFERENT + "partly holds (1 of 2)"
    assert status["ReproSwigluClaimFusionVerdict"] == reproduce.NOT_COMPARED
    assert status["ReproGdnFlashQlaFwdVerdict"] == reproduce.NO_SECOND_RUN
    # no second run at all: every verdict says so
    none = reproduce_report.no_second_run_numbers(None, ["swiglu", "gdn"])
    for name in claims.claim_labels(["swiglu", "gdn"]):
        assert f"\\newcommand{{\\Repro{name}}}{{{reproduce.NO_SECOND_RUN}}}" in none


def test_the_criterion_is_stated_whether_or_not_a_second_run_is_compared():
    """Method states the check's criterion before any result (macro ReproCriterion), from config
    reproduce's tolerance and share, in the paper with a second run and in one without."""
    text = reproduce_report.criterion(0.05, 0.95)
    assert r"at least 95\,\% of its rows" in text and r"$\pm$5\,\%" in text and "GPU factor" in text
    assert r"10\,\textmu{}s" in text and r"\texttt{--profile profiles/quick}" in text and "\t" not in text
    assert r"at least 90\,\%" in reproduce_report.criterion(0.1, 0.9) and r"$\pm$10\,\%" in reproduce_report.criterion(0.1, 0.9)
    none = reproduce_report.no_second_run_numbers(None, ["swiglu"], 0.1, 0.9)
    assert f"\\newcommand{{\\ReproCriterion}}{{{reproduce_report.criterion(0.1, 0.9)}}}" in none
    table = reproduce.compare([], [], 0.05)
    m = reproduce_report.macros(table, reproduce.compare_claims({}, {}), 0.05, 0.95, ["x"])
    assert m["ReproCriterion"] == text
