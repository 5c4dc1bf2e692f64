"""Rendering helpers: LaTeX tables and macros, the LaTeX log check, coverage."""

import re

import pandas as pd
import pytest

from kernels.paper import latex, render, report_kit


def test_table_headers_and_index_are_escaped():
    table = pd.DataFrame({"time_ms": [1.25], "n%": [3]}, index=pd.Index(["a_b"], name="impl_name"))
    tex = render.table_to_latex(table)
    assert r"time\_ms" in tex and r"n\%" in tex and r"a\_b" in tex and r"impl\_name" in tex
    assert r"\toprule" in tex and tex.splitlines()[0] == r"\begin{tabular}{lSS}"


def test_row_numbers_are_left_out_and_empty_tables_say_so():
    tex = render.table_to_latex(pd.DataFrame({"a": [1.5, 2.0]}))
    assert tex.splitlines()[0] == r"\begin{tabular}{S}"
    empty = render.table_to_latex(pd.DataFrame())
    assert report_kit.NOT_MEASURED in empty and r"\begin{tabular}{l}" in empty


def test_missing_values_print_as_one_marker_and_columns_keep_their_decimals():
    tex = render.table_to_latex(pd.DataFrame({"a": [1.0, float("nan"), 0.25], "b": [2.0, 3.0, 4.0]}))
    assert "{n/a}" in tex and "1.00 & 2 \\\\" in tex and "0.25 & 4" in tex


def test_words_in_a_column_of_numbers_print_as_text_and_the_numbers_keep_their_decimals():
    tex = render.table_to_latex(pd.DataFrame({"a": [1.5, "main", float("nan"), 0.25], "b": ["x", "y", "z", "w"]}))
    assert tex.splitlines()[0] == r"\begin{tabular}{Sl}"
    assert "1.50 & x" in tex and "{main} & y" in tex and "{n/a} & z" in tex and "0.25 & w" in tex


def test_long_headers_break_into_two_lines_at_a_space_or_after_a_hyphen():
    tex = render.table_to_latex(pd.DataFrame({"SDPA + mask": [1.0], "mem.-efficient": [2.0], "x": [3.0]}))
    head = tex.split("\\midrule")[0]
    assert r"{\shortstack{SDPA +\\mask}}" in head and r"{\shortstack{mem.-\\efficient}}" in head
    assert "{x}" in head


def test_a_long_table_breaks_across_pages_and_a_short_one_is_a_float():
    short = render.table_float(pd.DataFrame({"a": [1.0, 2.0]}))
    assert short.startswith("\\begin{table}[tbp]") and "\\tablecaption\n\\sbox0{\\begin{tabular}{S}" in short
    assert "\\resizebox{\\linewidth}" in short   # shrunk where wider than the line, without a macro of the paper's
    long = render.table_float(pd.DataFrame({"a": [i + 0.5 for i in range(render.LONG_TABLE_ROWS + 1)]}))
    assert "\\begin{longtable}{S}\n\\tablecaption\\\\\n" in long and "tabular" not in long
    assert long.count("{a} \\\\") == 2 and long.index("\\endfirsthead") < long.index("\\endhead")  # header on every page
    first, later = long.split("\\endfirsthead")
    assert "continued" not in first and "\\multicolumn{1}{l}{Table~\\thetable, continued}" in later.split("\\endhead")[0]
    assert long.count("\\bottomrule") == 1 and long.rstrip().endswith("\\end{longtable}}")
    assert "46.5" not in long and [line for line in long.splitlines() if line.endswith(" \\\\")][2:] == [
        f"{i + 0.5} \\\\" for i in range(render.LONG_TABLE_ROWS + 1)]  # every row, once, after the two headers


def test_macro_names_must_be_letters():
    assert render.macro_lines({"SwigluX": "1.5"}) == [r"\newcommand{\SwigluX}{1.5}"]
    with pytest.raises(ValueError, match="letters only"):
        render.macro_lines({"Swiglu2": "1"})


def test_paper_problems_finds_undefined_and_wide_boxes():
    log = ("LaTeX Warning: Reference `fig:x' on page 1 undefined on input line 3.\n"
           "Overfull \\hbox (0.4pt too wide) in paragraph at lines 1--2\n"
           "Overfull \\hbox (1.5pt too wide) in paragraph at lines 5--6\n"
           "LaTeX Warning: Float too large for page by 376.7pt on input line 612.\n")
    problems = latex.paper_problems(log)
    assert len(problems) == 3 and "Float too large" in problems[1] and "1.5pt" in problems[2]


def test_coverage_lists_configured_impls_without_rows():
    df = pd.DataFrame({"impl": ["a", "a", "b"], "pass": ["fwd", "bwd", "fwd"],
                       "status": ["ok", "wrong", "oom"]})
    table = render.coverage_table({"s": ["a", "b", "c"]}, {"s": df})
    assert table.loc[("s", "a"), "ok"] == 1 and table.loc[("s", "a"), "wrong"] == 1
    assert table.loc[("s", "b"), "oom"] == 1
    assert table.loc[("s", "c"), "passes"] == "not measured"


def test_environment_macros_short_commits_and_missing_columns():
    from kernels.paper.render import environment_macros

    a = pd.DataFrame({"env_git_commit": ["bc51902497262cd9237e95f8ca06c276a4b4af7c", "025919f"],
                      "env_gpu_name": ["NVIDIA H200"] * 2})
    b = pd.DataFrame({"env_git_commit": ["50ffca4" + "0" * 33 + "-dirty"]})
    out = environment_macros([a, b])
    assert out["EnvCommit"] == "025919f, 50ffca4-dirty, bc51902"
    assert out["EnvGpuName"] == "NVIDIA H200"
    assert out["EnvDriver"] == "n/a" and out["EnvAnchors"] == "none"
    c = pd.DataFrame({"env_anchors": ['{"flash-qla": "0.1.3", "liger-kernel": null}',
                                      '{"flash-qla": "0.1.4", "fla-core": "0.6.0"}']})
    assert environment_macros([c])["EnvAnchors"] == "fla-core 0.6.0, flash-qla 0.1.3/0.1.4"
    pinned = pd.DataFrame({"anchor_requirement": ["flashinfer-python==0.7.2.post1", None, None],
                           "anchor_version": ["0.7.2.post1", "0.1.3", None]})  # an adapter's pin (kernels/gdn/flashinfer.py)
    assert environment_macros([c, pinned])["EnvAnchors"] == \
        "fla-core 0.6.0, flash-qla 0.1.3/0.1.4, flashinfer-python 0.7.2.post1"
    gpus = [pd.DataFrame({"env_gpu_uuid": [f"GPU-{i}", None]}) for i in range(4)]
    assert environment_macros(gpus)["EnvGpuCount"] == "four"  # in words, as the text reads it
    assert environment_macros(gpus * 3 + [pd.DataFrame({"env_gpu_uuid": ["GPU-x" + str(i) for i in range(8)]})])[
        "EnvGpuCount"] == "12"


def test_first_call_minutes_sum_every_one_off_column():
    a = pd.DataFrame({"first_call_s": [30.0, None, 6.0]})
    b = pd.DataFrame({"compile_s": [12.0], "mask_compile_s": [12.0], "median_ms": [1.0]})
    assert render.first_call_macros([a, b]) == {"MeasureMinutesFirstCall": "1.0"}
    assert render.first_call_macros([pd.DataFrame({"median_ms": [1.0]})]) == {"MeasureMinutesFirstCall": "n/a"}


def test_run_minutes_sum_every_job_compile_ahead_included(tmp_path):
    for name, seconds in (("measure_gdn_chunk", 120), ("measure_flex_flex", 60), ("compile_ahead_gdn", 240),
                          ("compile_ahead_flex", 180)):
        (tmp_path / f"{name}.tsv").write_text(f"s\th:m:s\n{seconds}\t0:00:00\n")
    out = render.benchmark_macros(tmp_path)
    assert (out["MeasureJobs"], out["MeasureMinutesTotal"], out["MeasureMinutesGdn"]) == ("2", "10.0", "2.0")
    assert out["MeasureMinutesFlex"] == "1.0"
    assert out["MeasureAheadText"] == " and 2 jobs that compiled kernels ahead of their study's timed ones (7.0 of those minutes)"
    # a job that held its GPU's lease 90 s of its 120 (it started while the one before it measured)
    (tmp_path / "measure_gdn_chunk.lease.json").write_text('{"lease_wait_s": 25, "lease_held_s": 90}\n')
    out = render.benchmark_macros(tmp_path)
    assert (out["MeasureJobs"], out["MeasureMinutesTotal"], out["MeasureMinutesGdn"]) == ("2", "9.5", "1.5")
    (tmp_path / "compile_ahead_flex.tsv").unlink()
    assert render.benchmark_macros(tmp_path)["MeasureAheadText"].endswith("its study's timed ones (4.0 of those minutes)")
    (tmp_path / "compile_ahead_gdn.tsv").unlink()
    assert render.benchmark_macros(tmp_path)["MeasureMinutesTotal"] == "2.5"
    assert render.benchmark_macros(tmp_path)["MeasureAheadText"] == ""


@pytest.mark.parametrize("tsv,lease", [("s\th:m:s\n", '{"lease_held_s": 90}'), ("", '{"lease_held_s": 90}'),
                                       ("s\th:m:s\nx\t0:00:00\n", '{"lease_held_s": 90}'),
                                       ("s\th:m:s\n120\t0:00:02\n", '{"lease_held_s": "x"}'),
                                       ("s\th:m:s\n120\t0:00:02\n", '{"lease_wait_s": 3}')])
def test_a_benchmark_file_without_a_time_is_named_whether_or_not_a_lease_record_is_beside_it(tmp_path, tsv, lease):
    """The lease record gives the job's time, but an edited or truncated TSV beside it is refused
    too (it is an input of the paper: passing it over would make an edit rerun to no effect)."""
    (tmp_path / "measure_gdn_chunk.tsv").write_text(tsv)
    (tmp_path / "measure_gdn_chunk.lease.json").write_text(lease)
    bad = "measure_gdn_chunk.tsv" if "lease_held_s\": 90" in lease else "measure_gdn_chunk.lease.json"
    with pytest.raises(ValueError, match=f"{bad}: no job time in it"):
        render.job_minutes(tmp_path)


def test_tidy_rows_spread_the_compile_ahead_answer_into_columns():
    from kernels.paper.collect import tidy

    row = {"study": "gdn", "impl": "chunk", "pass": "fwd", "dtype": "bfloat16", "status": "ok", "error": None,
           "times_ms": [2.0], "device_times_ms": [1.0], "median_ms": 2.0, "device_ms": 1.0, "bytes": 8,
           "flops": 8, "compile_s": 0.1, "env": {"gpu_name": "H200"},
           "compile_ahead": {"status": "ok", "error": None, "setup_s": 30.0, "workers": 16, "compile_s": 6.5}}
    df = tidy([row], "h200")
    assert "compile_ahead" not in df and df.loc[0, "ahead_compile_s"] == 6.5 and df.loc[0, "compile_s"] == 0.1
    assert df.loc[0, "ahead_setup_s"] == 30.0 and df.loc[0, "ahead_workers"] == 16
    # the repetitions stay, as JSON cells, for the intervals of the ratios (report_kit.ratio)
    assert (df.loc[0, "device_times_ms"], df.loc[0, "times_ms"]) == ("[1.0]", "[2.0]")


def test_timing_drift_and_warmup_macros():
    from conftest import configured_timing

    timing = configured_timing(warmup_ms=25, warmup_max_ms=2000, warmup_window_ms=20, warmup_tolerance=0.02,
                               rep_ms=100, min_reps=5, max_reps=200, spin_max_ms=20)
    assert render.timing_macros(timing) == {
        "TimingWarmupMs": "25", "TimingWarmupMaxMs": "2000", "TimingWarmupWindowMs": "20",
        "TimingWarmupTolerancePct": "2", "TimingRepMs": "100", "TimingMinReps": "5", "TimingMaxReps": "200",
        "TimingSpinMaxMs": "20", "TimingSpinMinUs": "50", "TimingSpinEnqueueFactor": "4", "TimingRowsNote": ""}
    # rows timed with other settings than the config's (their fingerprint's timing part differs) are named
    note = render.timing_macros(timing, ["gdn", "flex"])["TimingRowsNote"]
    assert note.startswith(" The rows of Gated DeltaNet and FlexAttention were timed with other settings")
    a = pd.DataFrame({"drift": [0.01, 0.2, None]})
    b = pd.DataFrame({"drift": [0.06, -0.1]})
    assert render.drift_macros([a, b, pd.DataFrame({"device_ms": [1.0]})]) == {
        "RowsDriftChecked": "4", "RowsDrifting": "2", "RowsSpeeding": "1", "RowsDriftWithin": "1",
        "RowsDriftWithinPct": "25", "RowsDriftThresholdPct": "5", "RowsDriftMaxPct": "20",
        "RowsDriftMinPct": "-10"}
    assert render.drift_macros([])["RowsDriftMaxPct"] == "n/a"
    c = pd.DataFrame({"study": "swiglu", "impl": ["eager", "copy", "copy"],
                      "timing_warmup_stable": [True, False, None], "timing_spin_short": [0, 30, None],
                      "n_reps": [100, 100, 3], "timing_warmup_ms": [100.0, 300.0, None],
                      "timing_enqueue_us": [5.0, 9.5, None], "timing_spin_us": [56.0, 57.0, None]})
    loop = pd.DataFrame({"study": "gdn", "impl": "naive", "timing_warmup_stable": [True], "timing_spin_short": [5],
                         "n_reps": [5], "timing_warmup_ms": [2000.0], "timing_enqueue_us": [3e5],
                         "timing_spin_us": [2e4]})
    assert render.warmup_macros([c, loop]) == {
        "RowsTimed": "3", "RowsWarmupStable": "2", "RowsSpinShort": "2",
        "RowsSpinShortImpls": "1 Gated DeltaNet token loop, 1 SwiGLU copy",  # ties by study
        "RowsSpinShortEnqueueUs": "9.5--9.5",  # the token loop's enqueue outlasts its spin: not in the range
        "WarmupMedianMs": "300"}
    assert render.warmup_macros([c.iloc[:1]])["RowsSpinShortImpls"] == "none"


def test_tidy_drift_compares_the_last_five_repetitions_with_the_first_five():
    from kernels.paper.collect import tidy

    base = {"study": "toy", "impl": "a", "pass": "fwd", "dtype": "float32", "bytes": 1, "flops": 0,
            "error": None, "env": {"gpu_name": "x"}}
    slowing = [1.0] * 5 + [1.5] * 5
    rows = [{**base, "status": "ok", "times_ms": [2.0] * 10, "median_ms": 2.0, "device_times_ms": slowing,
             "device_ms": 1.25},
            {**base, "status": "ok", "times_ms": [1.0] * 9, "median_ms": 1.0, "device_times_ms": [1.0] * 9,
             "device_ms": 1.0},
            {**base, "status": "error", "times_ms": [], "median_ms": None, "device_times_ms": [], "device_ms": None}]
    t = tidy(rows, "h200")
    assert t["drift"].iloc[0] == pytest.approx(0.5) and t["drift"].iloc[1:].isna().all()  # from device times
    assert t["device_ms"].iloc[0] == pytest.approx(1.25) and t["latency_ms"].iloc[0] == pytest.approx(2.0)
    assert t["host_overhead_ms"].iloc[0] == pytest.approx(0.75) and t["gbps"].iloc[0] == pytest.approx(1 / 1.25e-3 / 1e9)
    assert "median_ms" not in t and pd.isna(t["device_ms"].iloc[2])  # an error row has no time


def _table_report(**attrs):
    """A stand-in report module: one two-level table and the given attributes."""
    import types

    def two_levels(df: pd.DataFrame) -> pd.DataFrame:
        """Two levels (ms).

        Not in the caption."""
        table = pd.DataFrame({("ms", "ours"): [1.5], ("ms", "eager"): [2.5]},
                             index=pd.Index(["8192 × 14336"], name="shape"))
        table.columns = pd.MultiIndex.from_tuples(table.columns)
        return table
    return types.SimpleNamespace(__name__="kernels.toy.report", TABLES={"toy_two": two_levels}, **attrs)


def test_a_table_as_csv_has_its_caption_first_and_one_flat_column_per_level(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "report_module", lambda study: _table_report())
    monkeypatch.setattr(render, "read_tidy", lambda path: pd.DataFrame())
    out = tmp_path / "toy_two.csv"
    render.render_table_csv("toy", "toy_two", "unused.csv", str(out))
    lines = out.read_text().splitlines()
    assert lines[0] == "# Two levels (ms)." and lines[1] == "shape,ms ours,ms eager"
    back = pd.read_csv(out, comment="#")
    assert back.to_dict("records") == [{"shape": "8192 × 14336", "ms ours": 1.5, "ms eager": 2.5}]


def test_the_paper_sets_a_reports_paper_tables_and_refuses_one_it_lacks():
    assert render.paper_tables(_table_report()) == ["toy_two"]
    assert render.paper_tables(_table_report(PAPER_TABLES=())) == []
    with pytest.raises(ValueError, match="PAPER_TABLES names \\['toy_one'\\]"):
        render.paper_tables(_table_report(PAPER_TABLES=("toy_one",)))


def test_the_verdicts_are_tallied_by_kind_with_their_counts_and_notes_left_out():
    values = {"AVerdict": "holds", "BVerdict": "partly holds (9 of 20); 2 on the line", "CVerdict": "holds",
              "DVerdict": "n/a", "EVerdict": "exceeded", "FVerdict": "not reached; 1 on the line", "Other": "holds",
              "HVerdict": "not tested (per clock)"}
    assert render.verdict_macros(values) == {
        "ClaimsTotal": "7",
        "ClaimsTally": "2 hold, 1 exceeded, 1 partly hold, 1 not reached, 1 not tested, 1 not measured",
        "ClaimsHoldOrExceeded": "3"}
    with pytest.raises(ValueError, match="GVerdict: verdict 'maybe' is of no known kind"):
        render.verdict_macros({"GVerdict": "maybe"})


@pytest.mark.parametrize("study", ["tensorcore", "swiglu", "flex", "gdn", "longctx"])
def test_no_caption_carries_the_code_documentations_markup(study):
    """A figure's or table's caption is its function's docstring (render.caption): a cross-reference
    written for the code (:func:`x`, ``x``) would be printed as it stands in the paper."""
    report = render.report_module(study)
    for name, func in [*report.FIGURES.items(), *report.TABLES.items()]:
        text = render.caption(func)
        assert not re.search(r":(func|data|mod|class|meth|attr):|``", text), f"{study} {name}: {text}"
