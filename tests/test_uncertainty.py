"""Each quoted value across the GPUs of a model beside its within-run interval
(kernels/paper/uncertainty.py), on small synthetic runs."""

import pytest

from kernels.paper import render, uncertainty

STUDIES = ["tensorcore", "swiglu", "flex", "gdn", "longctx"]


def _run(model, gpu, macros, committed=False, study="toy"):
    return {"model": model, "study": study, "run": gpu, "gpu": gpu, "macros": macros, "committed": committed}


VALUES = [{"study": "toy", "value": name, "words": words} for name, words in
          (("A", "speedup, ×"), ("R", "range over sizes, ×"), ("S", "slope"), ("C", "crossover, tokens"),
           ("N", "not a number"))]


def _table():
    """Three H200 GPUs (the committed one first) and one H100: a ratio that moves 0.10 across GPUs
    against an interval 0.02 wide, a range whose upper end moves 0.01 against an interval 0.04 wider
    than the range, a slope that does not move, a crossover in K tokens without an interval."""
    runs = [_run("h200", "GPU-a", {"A": "2.11", "ACi": "[2.10, 2.12]", "R": "1.50--1.70", "RCi": "[1.48, 1.72]",
                                   "S": "0.99", "SLow": "0.97", "SHigh": "1.01", "C": "8.2K", "N": "n/a"},
                 committed=True),
            _run("h200", "GPU-b", {"A": "2.03", "R": "1.50--1.71", "S": "0.99", "C": "8K", "N": "n/a"}),
            _run("h200", "GPU-c", {"A": "2.13", "R": "1.50--1.69", "S": "0.99", "C": "8.1K"}),
            _run("h100-80gb-hbm3", "GPU-d", {"A": "2.50", "ACi": "[2.49, 2.51]"}, committed=True)]
    return uncertainty.uncertainty_table(runs, VALUES).set_index(["model", "value"])


def test_a_value_on_three_gpus_gets_its_range_their_count_and_what_dominates():
    t = _table()
    a = t.loc[("h200", "A")]
    assert a["across"] == "2.03--2.13 (3 GPUs)" and a["gpus"] == 3
    assert a["across_width"] == pytest.approx(0.10) and a["within_width"] == pytest.approx(0.02)
    assert a["dominates"] == uncertainty.ACROSS and a["spread_pct"] == pytest.approx(100 * 0.10 / 2.11)
    assert a["runs"] == "GPU-a: 2.11 [2.10, 2.12]; GPU-b: 2.03; GPU-c: 2.13" and a["interval"] == "[2.10, 2.12]"
    r = t.loc[("h200", "R")]  # a range: from the lowest to the highest end; each end's move against the noise
    assert r["across"] == "1.50--1.71 (3 GPUs)" and r["across_width"] == pytest.approx(0.02)
    assert r["within_width"] == pytest.approx(0.04) and r["dominates"] == uncertainty.WITHIN
    s = t.loc[("h200", "S")]  # a slope's interval is [Low, High]
    assert s["across"] == "0.99 (3 GPUs)" and s["interval"] == "[0.97, 1.01]" and s["dominates"] == uncertainty.WITHIN
    c = t.loc[("h200", "C")]  # lengths in K tokens, printed as the text prints them; no interval
    assert c["across"] == "8K--8.2K (3 GPUs)" and c["dominates"] == uncertainty.NO_INTERVAL
    assert t.loc[("h200", "N"), "across"] == "n/a" and t.loc[("h200", "N"), "gpus"] == 0


@pytest.mark.parametrize("other,dominates", [("1.72--1.75", uncertainty.WITHIN), ("1.70--1.75", uncertainty.WITHIN),
                                             ("1.69--1.75", uncertainty.ACROSS), ("1.71--1.77", uncertainty.ACROSS)])
def test_a_reading_outside_the_committed_interval_is_the_gpus(other, dominates):
    """Another GPU's reading inside the committed interval, or one unit of the last printed digit outside
    it, is within one run's noise; further out, the GPUs differ."""
    runs = [_run("h200", "GPU-a", {"Q": "1.71--1.75", "QCi": "[1.71, 1.75]"}, committed=True),
            _run("h200", "GPU-b", {"Q": other})]
    q = uncertainty.uncertainty_table(runs, [{"study": "toy", "value": "Q", "words": "fusion, ×"}]).iloc[0]
    assert q["dominates"] == dominates


def test_a_value_of_one_gpu_says_so():
    one = _table().loc[("h100-80gb-hbm3", "A")]
    assert one["across"] == uncertainty.ONE_GPU and one["dominates"] == uncertainty.ONE_GPU and one["gpus"] == 1
    assert _table().loc[("h100-80gb-hbm3", "R"), "committed"] == "n/a"  # not measured there


def test_the_macros_count_the_values_the_across_gpu_range_dominates_and_name_the_widest():
    table = _table().reset_index()
    macros = uncertainty.summary_macros(table, "h200")
    assert macros["AcrossWider"] == "1" and macros["AcrossCompared"] == "3"  # A of A, R, S (C: no interval)
    assert macros["AcrossDominant"] == "the within-run interval"
    assert macros["AcrossLargestPct"] == "4.7" and macros["AcrossLargestValue"] == "toy: speedup"
    assert macros["AcrossA"] == "2.03--2.13 (3 GPUs)"
    assert uncertainty.summary_macros(table, "h100-80gb-hbm3")["AcrossA"] == "one GPU"
    latex = uncertainty.uncertainty_float(table, "h200", ["h200", "h100-80gb-hbm3"])
    assert r"\label{tab:uncertainty}" in latex and r"\small" in latex and "2.03--2.13 (3 GPUs)" in latex
    assert "H100 SXM's values are each of one GPU" in latex
    assert "\\\\[" not in latex  # a header's line break followed by a bracket reads as a length


@pytest.mark.parametrize("text,reading", [("2.11", (2.11, 2.11, False, 2)), ("5.80--6.76", (5.80, 6.76, False, 2)),
                                          ("8.2K", (8.2 * 1024, 8.2 * 1024, True, 1)), ("412", (412, 412, False, 0))])
def test_a_printed_value_reads_as_its_numbers(text, reading):
    r = uncertainty.parse(text)
    assert (r.low, r.high, r.tokens, r.digits) == pytest.approx(reading)
    assert r.text(r.low, r.high) == text


@pytest.mark.parametrize("text", ["n/a", "above 512K", "", None])
def test_a_value_that_is_not_a_number_reads_as_none(text):
    assert uncertainty.parse(text) is None


def test_every_value_the_verdicts_compare_and_every_headline_is_listed_once():
    values = uncertainty.quoted_values(STUDIES)
    names = [v["value"] for v in values]
    assert len(names) == len(set(names))
    for study in STUDIES:
        report = render.report_module(study)
        quoted = set(getattr(report, "HEADLINES", {})) | {n for e in report.EVIDENCE.values() for n, _ in e}
        assert quoted == {v["value"] for v in values if v["study"] == study}
        assert set(report.CLAIM_NAMES) == set(report.CLAIMS)
