"""Every committed GPU model side by side (kernels/paper/models.py): each claim's verdict per model
with the values it compares, and device time on one model over another's, read as what bounds a kernel."""

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from kernels.paper import bounds, claims, models, provenance, reproduce, rows

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "data" / "raw"
CONFIG = provenance.load_config()
SECTIONS = {s: CONFIG[s]["sweep"] for s in CONFIG["studies"]}


def test_the_peak_ratios_of_the_h100_against_the_h200_are_its_datasheets():
    bandwidth, compute = bounds.peak_ratios("h200", "h100-80gb-hbm3")
    assert bandwidth == pytest.approx(4800 / 3350) and compute == 1.0
    assert all(v != v for v in bounds.peak_ratios("h200", "a100-sxm4-80gb"))  # unknown: NaN, no guess


@pytest.mark.parametrize("value,what", [(1.43, bounds.BANDWIDTH), (1.36, bounds.BANDWIDTH), (1.22, bounds.BETWEEN),
                                        (1.09, bounds.COMPUTE), (0.95, bounds.COMPUTE)])
def test_a_ratio_reads_as_what_bounds_the_kernel(value, what):
    assert bounds.bound(value, 4800 / 3350, 1.0) == what
    assert bounds.bound(value, float("nan"), 1.0) == bounds.BETWEEN  # no datasheet: no reading
    # on a log scale: the H100 paper's ratio (the inverse) reads as the H200 paper's does
    assert bounds.bound(1 / value, 3350 / 4800, 1.0) == what


def _row(study="tensorcore", impl="a", n=1, ms=1.0, status="ok"):
    return {"study": study, "impl": impl, "pass": "fwd", "dtype": "float32", "numel": n, "status": status,
            "device_ms": ms if status == "ok" else None}


def test_device_time_ratios_pair_the_cases_timed_ok_on_both_and_leave_short_calls_apart():
    paper = [_row(n=1, ms=1.0), _row(n=2, ms=2.0), _row(n=3, ms=0.01), _row(n=4, ms=1.0), _row(n=5, status="oom"),
             _row(impl="b", n=1, ms=0.005)]
    other = [_row(n=1, ms=1.4), _row(n=2, ms=2.9), _row(n=3, ms=0.01), _row(n=5, ms=3.0), _row(impl="b", n=1, ms=0.005)]
    cases = bounds.case_ratios(paper, other)
    assert sorted(cases["case"]) == ["fwd float32 numel=1", "fwd float32 numel=1", "fwd float32 numel=2",
                                     "fwd float32 numel=3"]  # 4 not in other, 5 not ok in paper
    impls = bounds.impl_ratios(cases, 4800 / 3350, 1.0).set_index("impl")
    assert impls.loc["a", "cases"] == 2 and not impls.loc["a", "short"]  # the 10 µs call left out
    assert impls.loc["a", "median"] == pytest.approx(1.425) and impls.loc["a", "bound"] == bounds.BANDWIDTH
    assert impls.loc["a", "low"] <= impls.loc["a", "median"] <= impls.loc["a", "high"]
    assert impls.loc["b", "short"] and impls.loc["b", "bound"] == bounds.COMPUTE  # only short calls: all of them


def test_the_implementations_near_each_peak_ratio_are_spanned_and_counted_with_their_studies():
    impls = pd.DataFrame({"study": ["swiglu", "swiglu", "gdn", "flex", "tensorcore"], "impl": ["a", "b", "c", "d", "e"],
                          "median": [1.43, 1.38, 1.22, 1.01, 0.99]})
    impls["bound"] = [bounds.bound(v, 4800 / 3350, 1.0) for v in impls["median"]]
    assert bounds.bound_span(impls, bounds.BANDWIDTH) == "1.38--1.43 (2 implementations: SwiGLU)"
    assert bounds.bound_span(impls, bounds.COMPUTE) == "0.99--1.01 (2 implementations: FlexAttention and tensor cores)"
    assert bounds.bound_span(impls.iloc[:1], bounds.BANDWIDTH) == "1.43 (1 implementation: SwiGLU)"
    assert bounds.bound_span(impls, bounds.BETWEEN) == "1.22 (1 implementation: Gated DeltaNet)"
    assert bounds.bound_span(impls.iloc[:2], bounds.COMPUTE) == "n/a"


def test_evidence_gives_each_value_with_its_interval_or_says_it_is_missing():
    macros = {"A": "2.05", "ACi": "[2.04, 2.06]", "S": "1.00", "SLow": "0.97", "SHigh": "1.03", "R": "31--89"}
    text = models.evidence_text(macros, (("A", "× at 8192³"), ("S", " flex"), ("R", " %"), ("B", "× other")))
    assert text == "2.05× at 8192³ [2.04, 2.06]; 1.00 flex [0.97, 1.03]; 31--89 %; n/a (× other)"


def test_every_claim_has_its_evidence_in_its_reports_macros():
    """Each report's EVIDENCE names, for every claim of its CLAIMS, macros that its macros give on the
    committed rows (so no value of the cross-model table is missing for want of a name)."""
    macros = models.model_macros(models.model_run(RAW, "h200", CONFIG["studies"]), "h200", SECTIONS)
    for study in CONFIG["studies"]:
        report = __import__(f"kernels.{study}.report", fromlist=["EVIDENCE"])
        assert set(report.EVIDENCE) == set(report.CLAIMS), study
        for verdict, evidence in report.EVIDENCE.items():
            assert evidence and all(name in macros for name, _ in evidence), (verdict, evidence)


def _copy(raw: Path, model: str, study: str) -> None:
    shutil.copytree(RAW / model / study, raw / model / study)


def test_each_claim_reads_per_model_and_a_study_one_model_lacks_says_not_measured(tmp_path):
    raw = tmp_path / "raw"
    _copy(raw, "h200", "tensorcore")
    _copy(raw, "h100-80gb-hbm3", "tensorcore")
    _copy(raw, "h200", "swiglu")
    out = {k: tmp_path / f"out.{k}" for k in ("tex", "claims", "ratios", "pdf")}
    found = models.render_models(raw, "h200", ["tensorcore", "swiglu"], SECTIONS, CONFIG["timing"],
                                 str(out["tex"]), str(out["claims"]), str(out["ratios"]), str(out["pdf"]))
    assert found == ["h200", "h100-80gb-hbm3"]
    table = pd.read_csv(out["claims"]).set_index("macro")
    for model in found:  # each model's verdicts are those the paper derives from its rows
        run = claims.load_run(sorted(str(p) for p in (raw / model / "tensorcore").glob("*.jsonl")))
        verdicts = claims.claim_verdicts(claims.study_macros(claims.tidy_tables(run, model, SECTIONS)))
        for name, verdict in verdicts.items():
            assert table.loc[name, f"{model} verdict"] == verdict
    assert (table.loc["SwigluClaimLatencyVerdict", "h100-80gb-hbm3 verdict"]) == models.NOT_MEASURED
    assert "[" in table.loc["TensorcoreFpEightVerdict", "h100-80gb-hbm3 values"]  # with its interval
    tex = out["tex"].read_text()
    assert r"\newcommand{\ModelsSwigluClaimLatencyVerdict}{H100: not measured}" in tex
    assert r"\label{tab:models_claims}" in tex and r"\newcommand{\ModelsBandwidthRatio}{1.43}" in tex
    assert re.search(r"\\newcommand\{\\ModelsBoundCompute\}\{[\d.-]+ \(\d+ implementations?: tensor cores\)\}", tex)
    fp8 = table.loc["TensorcoreFpEightVerdict"]  # not tested on either: neither the same nor different
    assert fp8["h200 verdict"] == fp8["h100-80gb-hbm3 verdict"] == "not tested (per clock)"
    # the claims that differ beyond values on their line, by name: those neither ModelsSame nor ModelsOnLine counts
    named = re.search(r"\\newcommand\{\\ModelsDifferClaims\}\{(.*)\}", tex).group(1)
    n_same, compared = map(int, re.search(r"\\newcommand\{\\ModelsSame\}\{(\d+) of (\d+)\}", tex).groups())
    on_line = int(re.search(r"\\newcommand\{\\ModelsOnLine\}\{(\d+)\}", tex).group(1))
    assert (named.count("; ") + 1 if named != "n/a" else 0) == compared - n_same - on_line
    assert "FP8" not in named and "padding" not in named  # not tested on either; the same verdict on both
    for _, r in table.iterrows():  # each claim that differs, by its study's and its short name, with both verdicts
        a, b = r["h200 verdict"], r["h100-80gb-hbm3 verdict"]
        if models.NOT_MEASURED not in (a, b) and a != b and not reproduce.differs_on_the_line(a, b):
            assert f"{a} on the H200" in named and f"{b} on the H100" in named
    decided = [n for n in verdicts if not verdicts[n].startswith("not tested")]
    same = sum(table.loc[n, "h200 verdict"] == table.loc[n, "h100-80gb-hbm3 verdict"] for n in decided)
    assert rf"\newcommand{{\ModelsSame}}{{{same} of {len(decided)}}}" in tex  # SwiGLU not measured on both
    ratios = pd.read_csv(out["ratios"])
    assert set(ratios["study"]) == {"tensorcore"} and set(ratios["model"]) == {"h100-80gb-hbm3"}
    assert out["pdf"].read_bytes().startswith(b"%PDF")


def test_one_model_alone_says_so_and_a_stale_study_is_marked(tmp_path):
    raw = tmp_path / "raw"
    _copy(raw, "h200", "tensorcore")
    path = raw / "h200" / "tensorcore" / "bf16.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for r in lines:
        r["env"]["fingerprint_parts"]["kernels/core/timing.py"] = "0" * 16
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = {k: tmp_path / f"out.{k}" for k in ("tex", "claims", "ratios", "pdf")}
    assert models.render_models(raw, "h200", ["tensorcore"], SECTIONS, CONFIG["timing"], str(out["tex"]),
                                str(out["claims"]), str(out["ratios"]), str(out["pdf"])) == ["h200"]
    tex = out["tex"].read_text()
    assert r"\newcommand{\ModelsSentenceTensorcore}{Tensor cores: measured on the H200 alone.}" in tex
    assert r"\newcommand{\ModelsTensorcorePaddingVerdict}{}" in tex
    assert r"\newcommand{\ModelsBoundBandwidth}{n/a}" in tex and r"\newcommand{\ModelsBoundBetween}{n/a}" in tex
    table = pd.read_csv(out["claims"])
    assert table["h200 verdict"].str.endswith(" (stale)").all()
    assert pd.read_csv(out["ratios"]).empty


def test_a_paper_model_without_rows_is_refused_naming_the_models(tmp_path):
    _copy(tmp_path, "h200", "tensorcore")
    with pytest.raises(ValueError, match=r"h100-80gb-hbm3/ holds no rows \(models with rows: \['h200'\]\)"):
        models.committed_models(tmp_path, "h100-80gb-hbm3")
    assert rows.model_label("h200") == "H200"


def test_a_study_without_claims_gives_an_empty_table_with_its_columns():
    """A researcher's new study may have no claims yet (the toy study): the table, the claims table's
    words and the float are still made, empty."""
    table = models.claims_table({"cpu": {}}, {}, [])
    assert table.empty and {"claim", "cpu verdict", "cpu values", "same"} <= set(table.columns)
    assert models.other_verdicts(table, ["cpu"]) == {}
    assert r"\label{tab:models_claims}" in models.claims_float(table, ["cpu"])


def test_panels_split_the_studies_in_order_into_two_of_about_as_many_implementations():
    impls = pd.DataFrame({"study": ["a"] * 2 + ["b"] * 10 + ["c"] * 8 + ["d"] * 6 + ["e"] * 9})
    assert bounds._panels(impls, ["a", "b", "c", "d", "e"]) == [["a", "b", "c"], ["d", "e"]]
    assert bounds._panels(impls, ["e", "x"]) == [["e"]]  # a study without implementations has no place
    assert bounds._panels(impls.iloc[:0], ["a"]) == [[]]


def test_the_figure_gives_each_implementation_one_row_coloured_by_what_bounds_it():
    """One y tick per implementation, named as ``names`` says; one legend of the bounds present and the two
    peak ratios; no colour per implementation."""
    impls = pd.DataFrame({"study": ["swiglu", "swiglu", "gdn"], "impl": ["triton", "eager", "fla_chunk"],
                          "cases": [3, 3, 2], "short": [False, True, False], "median": [1.42, 1.0, 1.08],
                          "low": [1.41, 0.99, 1.05], "high": [1.43, 1.01, 1.1], "min": [1.4, 0.98, 1.0],
                          "max": [1.44, 1.02, 1.2]})
    impls["bound"] = [bounds.bound(v, 4800 / 3350, 1.0) for v in impls["median"]]
    fig = bounds.figure(impls, ["swiglu", "gdn"], "h200", "h100-80gb-hbm3", 4800 / 3350, 1.0,
                        {("gdn", "fla_chunk"): "FLA, backward in TileLang"})
    ticks = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert ticks == ["Triton (ours)", "eager", "FLA, backward in TileLang"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == [bounds.BANDWIDTH, bounds.COMPUTE, "bandwidth ratio 1.43", "compute ratio 1.00"]
    colors = {line.get_color() for ax in fig.axes for line in ax.lines if line.get_linestyle() == "-"}
    assert colors == {bounds.BOUND_COLORS[bounds.BANDWIDTH], bounds.BOUND_COLORS[bounds.COMPUTE]}


def test_flas_name_says_where_its_backward_ran_tilelang():
    """FLA's gated backward refuses Triton 3.4.0 to 3.7.0 on Hopper: rows timed there without a recorded
    dispatch ran TileLang; a recorded dispatch decides where there is one; elsewhere FLA keeps its name."""
    def fla(study, pas, triton="3.6.0", capability="9.0", dispatch=None, ms=1.0):
        return {"study": study, "impl": "fla_chunk", "pass": pas, "device_ms": ms, "dispatch": dispatch,
                "env": {"triton": triton, "capability": capability}}

    run = [fla("longctx", "fwd"), fla("longctx", "fwdbwd"), fla("gdn", "bwd", dispatch="fla_triton"),
           {"study": "gdn", "impl": "chunk", "pass": "fwd", "device_ms": 1.0}]
    names = bounds.impl_names(run)
    assert names[("longctx", "fla_chunk")] == "GDN FLA, backward in TileLang"
    assert names[("gdn", "fla_chunk")] == "FLA"  # its dispatch says Triton
    assert names[("gdn", "chunk")] == "chunked (ours)"
    for other in ({"triton": "3.7.1"}, {"capability": "8.0"}, {"triton": None}):
        rows_ = [fla("longctx", "fwdbwd", **{"triton": "3.6.0", "capability": "9.0", **other})]
        assert bounds.impl_names(rows_)[("longctx", "fla_chunk")] == "GDN FLA"
    assert bounds.impl_names([fla("gdn", "bwd", dispatch="tilelang")])[("gdn", "fla_chunk")] == "FLA (TileLang)"


def test_the_other_models_environment_is_stated_by_what_differs_from_the_papers():
    """Method says where the other model's rows ran: its GPUs, driver and CUDA, and its software's
    versions where they differ from the paper model's (the same otherwise)."""
    paper = {"EnvTorch": "2.11.0", "EnvTriton": "3.6.0", "EnvAnchors": "fla-core 0.6.0", "EnvDriver": "580.159.04",
             "EnvCuda": "13.0", "EnvGpuCount": "three"}
    assert models.environment_text(paper, {**paper, "EnvGpuCount": "two"}) == (
        "two GPUs (driver 580.159.04, CUDA 13.0) with the same PyTorch, Triton and library versions")
    assert models.environment_text(paper, {**paper, "EnvGpuCount": "one", "EnvTriton": "3.7.0"}) == (
        "one GPU (driver 580.159.04, CUDA 13.0) with Triton 3.7.0 and the same PyTorch and library versions")
    assert models.environment_text(paper, {"EnvGpuCount": "one"}).startswith("one GPU (driver n/a, CUDA n/a) with PyTorch n/a")


def test_the_claims_that_differ_are_named_with_both_verdicts_and_the_values_one_model_lacks():
    """Same verdicts, verdicts that differ only on the line and claims not tested or not measured on
    one model are not named; a claim judged on fewer values on one model says how many fewer."""
    table = pd.DataFrame([
        {"study": "flex", "macro": "FlexMemoryVerdict", "claim": "memory",
         "h200 verdict": "partly holds (2 of 3)", "h100-80gb-hbm3 verdict": "partly holds (1 of 2)"},
        {"study": "flex", "macro": "FlexPrefillVerdict", "claim": "prefill",
         "h200 verdict": "not reached", "h100-80gb-hbm3 verdict": "not reached"},
        {"study": "flex", "macro": "FlexFlashPrefillVerdict", "claim": "FLASH prefill",
         "h200 verdict": "not reached", "h100-80gb-hbm3 verdict": "not reached; 1 on the line"},
        {"study": "tensorcore", "macro": "TensorcoreFpEightVerdict", "claim": "fp8",
         "h200 verdict": "not tested (per clock)", "h100-80gb-hbm3 verdict": "not tested (per clock)"},
        {"study": "swiglu", "macro": "SwigluClaimLatencyVerdict", "claim": "latency",
         "h200 verdict": "holds", "h100-80gb-hbm3 verdict": models.NOT_MEASURED},
        {"study": "gdn", "macro": "GdnFlashQlaFwdVerdict", "claim": "forward",
         "h200 verdict": "holds", "h100-80gb-hbm3 verdict": "exceeded"}])
    assert models.differ_claims(table, "h200", "h100-80gb-hbm3") == (
        "FlexAttention's mask memory slope: partly holds (2 of 3) on the H200 and partly holds (1 of 2) on the "
        "H100 (1 value fewer); Gated DeltaNet's FlashQLA forward: holds on the H200 and exceeded on the H100")
    assert (models.same_count(table, "h200", "h100-80gb-hbm3"), models.on_line_count(table, "h200", "h100-80gb-hbm3")) \
        == ("1 of 4", "1")


def test_under_each_verdict_another_model_reads_same_only_for_a_verdict_that_decides():
    table = pd.DataFrame([{"macro": "AVerdict", "h200 verdict": "holds", "h100-80gb-hbm3 verdict": "holds"},
                          {"macro": "BVerdict", "h200 verdict": "not tested (per clock)",
                           "h100-80gb-hbm3 verdict": "not tested (per clock)"}])
    assert models.other_verdicts(table, ["h200", "h100-80gb-hbm3"]) == {
        "ModelsAVerdict": "H100: same", "ModelsBVerdict": "H100: not tested (per clock)"}
