"""The report toolkit (kernels/paper/report_kit.py) and the rule that the reports build on it alone."""

import ast
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from kernels.paper import report_kit as kit

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ("swiglu", "flex", "gdn")


@pytest.mark.parametrize("study", STUDIES)
def test_reports_never_import_render_and_keep_no_helper_of_the_toolkit(study):
    """A report builds on report_kit, never on render (which loads the reports), and defines none
    of the toolkit's helpers again."""
    tree = ast.parse((ROOT / "kernels" / study / "report.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {"render", "kernels.paper.render"} & imported
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not defined & {"_fmt", "_one", "_empty", "_empty_note", "_lookup", "_baseline"}


def test_fmt_marks_what_was_not_measured():
    assert kit.fmt(1.23456, 3) == "1.235" and kit.fmt(np.int64(7), 0) == "7" and kit.fmt("2.5", 1) == "2.5"
    assert [kit.fmt(v, 2) for v in (None, np.nan, np.inf, "x")] == ["n/a"] * 4


def test_escape_latex_escapes_the_specials_of_plain_text():
    assert kit.escape_latex("a_b 50% {x} & ~^$#\\ <int>") == (
        r"a\_b 50\% \{x\} \& \textasciitilde{}\textasciicircum{}\$\#\textbackslash{} <int>")


def test_first_median_and_baseline():
    d = pd.DataFrame({"impl": ["a", "b", "b", "c"], "n": [1, 1, 2, 2], "ms": [4.0, 2.0, np.nan, 1.0]})
    assert kit.first(d, "ms") == 4.0 and np.isnan(kit.first(d.iloc[0:0], "ms")) and np.isnan(kit.first(d, "x"))
    assert kit.median(d, "ms", impl="b") == 2.0 and np.isnan(kit.median(d, "ms", impl="z"))
    base = kit.baseline(d, d["impl"] == "b", ["n"], "ms")  # b at n=2 has no time: NaN there
    assert base.iloc[0] == 2.0 and base.iloc[1] == 2.0 and base.iloc[2:].isna().all()


def test_roles_are_selected_from_the_text_cell():
    d = pd.DataFrame({"roles": ["main profile", "sweep", np.nan, "published main"]})
    assert kit.has_role(d, "main").tolist() == [True, False, False, True]
    assert kit.with_role(d, "profile").index.tolist() == [0]
    assert not kit.has_role(pd.DataFrame({"impl": ["a"]}), "main").any()  # rows without roles have none


def test_shape_names_are_letters_and_unique():
    assert kit.shape_name(B=4, T=8192) == "BFourTEightK" and kit.shape_name(B=1, T=32768) == "BOneTThirtyTwoK"
    assert kit.size_name(100) == "OneHundred" and kit.size_name(2048) == "TwoK"
    assert kit.words(128) == "OneHundredTwentyEight" and kit.size_name(65536) == "SixtyFourK"
    with pytest.raises(ValueError, match="no macro name"):
        kit.words(1000)
    shapes = [{"batch": 4, "seqlen": 8192, "heads": 16}, {"batch": 4, "seqlen": 8192, "heads": 32}]
    dims = {"B": "batch", "T": "seqlen"}
    assert kit.shape_names(shapes[:1], "k", dims, ("batch", "seqlen", "heads")) == {(4, 8192, 16): "BFourTEightK"}
    with pytest.raises(ValueError, match="sweep.main_shapes: two shapes have the macro name BFourTEightK"):
        kit.shape_names(shapes, "sweep.main_shapes", dims, ("batch", "seqlen", "heads"))


def test_ordered_and_grouped_bars():
    assert kit.ordered(["c", "a", "x", "a"], ["a", "b", "c"]) == ["a", "c", "x"]
    d = pd.DataFrame({"impl": ["a", "b", "a"], "shape": ["s1", "s1", "s2"], "v": [1.0, 2.0, 3.0]})
    fig, ax = plt.subplots()
    centres = kit.grouped_bars(ax, d, "v", "shape", ["a", "b"], {"a": "red", "b": "blue"}, {"a": "A", "b": "B"})
    assert [p.get_height() for p in ax.patches] == [1.0, 3.0, 2.0]  # b has no bar at s2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["s1", "s2"]
    # s1's two bars sit either side of its tick; a, alone at s2, stands on it
    assert centres["a"] == pytest.approx([-0.2, 1.0]) and centres["b"][0] == pytest.approx(0.2)
    assert np.isnan(centres["b"][1])
    plt.close(fig)


def test_empty_panels_are_marked():
    fig, (full, empty) = plt.subplots(1, 2)
    full.plot([1, 2], [3, 4])
    kit.mark_empty_axes(fig)
    assert not full.texts
    assert [t.get_text() for t in empty.texts] == [kit.NOT_MEASURED]
    plt.close(fig)


def test_kernel_names_lose_namespaces_templates_and_arguments():
    names = ["void at::native::vectorized_elementwise_kernel<4, at::native::mul>(int, float*)",
             "void at::native::(anonymous namespace)::reduce_kernel<512, 1>(x)",
             "void at::native::vectorized_elementwise_kernel<4, at::native::silu>(int)", "_swiglu_fwd_kernel"]
    assert kit.short_kernel_names(names) == ["vectorized_elementwise_kernel", "reduce_kernel",
                                             "vectorized_elementwise_kernel #2", "_swiglu_fwd_kernel"]
    cute = ["kernel_cutlass_kernel_flashinfergdn_kernelsdelta_rule_dsldelta_rule_cp_sm90CPDeltaRulePrefillSm90"
            "_object_at__tensorptrf32gmemalign16o1_CopyAtom_ThrID10_TVLayoutSrc1409601_TVLayoutDst14096_0",
            "kernel_cutlass_kernel_flashinfergdn_kernelsdelta_rule_dsldelta_rule_cp_sm90CPDeltaRuleFixupSimtSm90"
            "_object_at__tensorptrf32gmemalign128oi641i64i64_None_0"]  # FlashInfer's CuTe DSL kernels (profiler names)
    assert kit.short_kernel_names(cute) == ["CPDeltaRulePrefillSm90", "CPDeltaRuleFixupSimtSm90"]


def test_a_value_whose_interval_holds_the_claimed_bound_is_on_the_line():
    """The H100's FLASH prefill, 2.00x [1.97, 2.06] against a claimed 2x, is neither a pass nor a miss;
    a value without an interval is judged by its point estimate, as before."""
    assert kit.claim_verdict([kit.Ratio(2.0, 1.97, 2.06), kit.Ratio(1.2, 1.19, 1.21)], 2.0, 4.0) == \
        "not reached; 1 on the line"
    assert kit.claim_verdict([kit.Ratio(79.6, 79.5, 80.4)], 80.0) == "on the line"
    assert kit.claim_verdict([kit.Ratio(79.6, 79.5, 79.7), 81.0], 80.0) == "partly holds (1 of 2)"
    assert kit.claim_verdict([kit.Ratio(3.4, 3.3, 3.6), 3.0], 2.5, 3.5) == "holds; 1 on the line"  # the upper end
    assert kit.claim_verdict([2.0], 2.0) == "holds"  # no interval: its point estimate decides
    assert kit.with_intervals([2.0], [kit.Ratio(2.01, 1.97, 2.06)]) == [kit.Ratio(2.0, 1.97, 2.06)]
    assert not kit.on_the_line(kit.NO_RATIO, 2.0)


def test_claim_verdicts_follow_the_stated_criterion():
    assert kit.claim_verdict([2.6, 3.0], 2.5, 3.5) == "holds"
    assert kit.claim_verdict([2.5, 3.5], 2.5, 3.5) == "holds"  # the ends belong to the range
    assert kit.claim_verdict([2.6, 4.0], 2.5, 3.5) == "exceeded"  # within and beyond: not contained
    assert kit.claim_verdict([3.6, 4.0], 2.5, 3.5) == "exceeded"
    assert kit.claim_verdict([2.12, 3.73], 2, 3) == "exceeded"
    assert kit.claim_verdict([5.0], 2.0) == "holds"  # a single claimed factor: from it upwards
    assert kit.claim_verdict([1.7, 1.74], 2.5, 3.5) == "not reached"
    assert kit.claim_verdict([float("nan")], 2.5) == "n/a"


def test_partly_holds_says_how_many_values_meet_the_claim():
    """The count is part of the verdict: of a range, the values within it; of a single factor, those
    that reach it."""
    assert kit.claim_verdict([84.6, 91.2], 85, 92) == "partly holds (1 of 2)"
    assert kit.claim_verdict([1.5, 2.5, 3.0, 3.5, 5.0], 2.0, 4.0) == "partly holds (3 of 5)"  # one below, one above
    assert kit.claim_verdict([0.5, 1.2, 3.0], 1.0) == "partly holds (2 of 3)"
    assert kit.claim_verdict([1.5, 2.5], 2, 4) != kit.claim_verdict([1.5, 1.7, 2.5], 2, 4)
    assert kit.partly_holds(3, 5) == "partly holds (3 of 5)"


def test_a_range_with_no_value_inside_is_missed_not_partly_held():
    """Values on both sides of a claimed range but none within: neither held in part nor unreached."""
    assert kit.claim_verdict([1.1, 1.5, 4.5, 5.7, 6.0], 2.0, 4.0) == "missed (2 below, 3 above)"
    assert kit.claim_verdict([1.9, 4.1], 2.0, 4.0) == "missed (1 below, 1 above)"
    assert kit.claim_verdict([1.9, 4.0], 2.0, 4.0) == "partly holds (1 of 2)"  # the upper end is within


def test_kernel_table_orders_impls_and_sums_small_kernels():
    rows = [{"impl": impl, "pass": "fwd", "status": "ok",
             "kernels": json.dumps([{"name": "k" * 60, "calls": 1, "us": 90.0},
                                    {"name": "tiny", "calls": 2, "us": 1.0},
                                    {"name": "other", "calls": 1, "us": 9.0}])}
            for impl in ("triton", "eager")]
    rows.append({"impl": "liger", "pass": "fwd", "status": "ok", "kernels": None})
    t = kit.kernel_table(pd.DataFrame(rows), order=("eager", "triton"), study="swiglu")
    assert [i for i in t.index.get_level_values("implementation").unique()] == ["eager", "Triton (ours)"]
    eager = t.loc[("forward", "eager")]
    assert eager.index[0] == "k" * 60 and eager["µs"].tolist() == [90.0, 10.0]
    assert eager["share %"].tolist() == [90.0, 10.0]
    assert kit.kernel_table(pd.DataFrame({"impl": ["a"]})).empty


def test_a_tidy_frame_without_rows_gets_the_columns_a_report_selects_on():
    """The tidy table of a study without rows reads back without columns; with them it selects like one with rows."""
    d = kit.tidy_frame(pd.DataFrame(), ["impl", "device_ms"])
    assert list(d.columns) == ["impl", "device_ms"] and d[d["impl"] == "flex"].empty
    full = pd.DataFrame({"impl": ["a"], "x": [1.0]})
    assert list(kit.tidy_frame(full, ["impl", "y"]).columns) == ["impl", "x", "y"]
    assert kit.tidy_frame(full, ["impl"]) is full


def _reps(median, n=200, spread=0.01, seed=1):
    """``n`` synthetic repetitions around ``median`` (relative spread ``spread``)."""
    return list(median * (1 + spread * np.random.default_rng(seed).standard_normal(n)))


def test_a_ratio_of_medians_has_a_bootstrap_interval_around_it():
    r = kit.ratio(_reps(2.0), _reps(1.0, seed=2))
    assert r.low < r.value < r.high and abs(r.value - 2.0) < 0.01 and r.high - r.low < 0.02
    assert not r.tie
    noisy = kit.ratio(_reps(1.02, spread=0.2), _reps(1.0, spread=0.2, seed=2))
    assert noisy.tie and noisy.low < 1.0 < noisy.high  # a 2 % difference inside 20 % noise
    few = kit.ratio(_reps(1.0, n=5, spread=0.05), _reps(1.0, n=5, spread=0.05, seed=2))
    many = kit.ratio(_reps(1.0, spread=0.05), _reps(1.0, spread=0.05, seed=2))
    assert few.high - few.low > many.high - many.low  # fewer repetitions, a wider interval
    assert kit.ratio(json.dumps(_reps(3.0)), _reps(1.0), scale=0.5).value == pytest.approx(1.5, rel=0.01)


def test_a_ratio_is_byte_stable_and_missing_without_repetitions():
    a, b = _reps(1.1, spread=0.05), _reps(1.0, spread=0.05, seed=2)
    assert kit.ratio(a, b) == kit.ratio(a, b)  # a fixed seed: the same interval at every call
    assert np.isnan(kit.ratio([], b).value) and np.isnan(kit.ratio(a, float("nan")).low)
    assert kit.interval(kit.ratio([], b)) == "n/a"


def test_a_median_of_ratios_has_a_bootstrap_interval_and_draws_a_shared_baseline_once():
    base, a, b = _reps(2.0), _reps(1.0, seed=2), _reps(0.5, seed=3)
    assert kit.median_ratio([(base, a, 1.0)]) == kit.ratio(base, a)  # one case: the ratio itself
    cases = [(base, a, 1.0), (base, b, 0.5), (base, _reps(4.0, seed=4), 2.0)]  # ratios 2, 2 and 1
    m = kit.median_ratio(cases)
    assert m.value == pytest.approx(2.0, rel=0.01) and m.low < m.value < m.high and m.high - m.low < 0.03
    assert m == kit.median_ratio(cases)  # byte-stable
    # the shared baseline's resample is one draw: cases that differ only in their scale move together
    same = kit.median_ratio([(base, a, 1.0), (base, a, 1.0)])
    assert same == kit.ratio(base, a)
    assert kit.median_ratio([([], a, 1.0), (base, a, float("nan"))]) == kit.NO_RATIO


def test_an_interval_reads_as_a_tie_when_it_holds_one():
    assert kit.interval(kit.Ratio(1.02, 0.99, 1.05)) == "[0.99, 1.05] (tie)"
    # rounded outwards, so that it holds the ratio as printed (0.6655 reads 0.67)
    assert kit.interval(kit.Ratio(0.6655, 0.6641, 0.6662)) == "[0.66, 0.67]"
    assert kit.interval(kit.Ratio(0.6655, 0.6641, 0.6662), 3) == "[0.664, 0.667]"
    assert kit.interval(kit.Ratio(1.08, 1.04, 1.12), 2) == "[1.04, 1.12]"
    rs = [kit.Ratio(1.6, 1.58, 1.62), kit.Ratio(1.66, 1.64, 1.69)]
    assert kit.interval(rs, 2) == "[1.58, 1.69]"  # a range: lowest lower end to highest upper end
    assert kit.interval([kit.Ratio(1.0, 0.9, 1.1), kit.Ratio(2.0, 1.9, 2.1)], 2) == "[0.90, 2.10] (1 of 2 ties)"
    assert kit.values(rs) == [1.6, 1.66]
    # a share printed in %: the ends scaled and rounded outwards, the tie that of the ratio (1.0, not 100)
    assert kit.interval(kit.Ratio(0.9213, 0.9121, 0.9304), 1, scale=100) == "[91.2, 93.1]"
    assert kit.interval(kit.Ratio(0.99, 0.98, 1.01), 1, scale=100) == "[98.0, 101.0] (tie)"


def test_a_ratio_is_worded_a_tie_when_its_interval_holds_one():
    assert kit.tie_word(kit.Ratio(1.05, 0.99, 1.07)) == "a tie"
    assert kit.tie_word(kit.Ratio(1.07, 1.05, 1.09)) == "faster"
    assert kit.tie_word(kit.Ratio(0.9, 0.85, 0.95)) == "slower"
    assert kit.tie_word(kit.Ratio(0.9, 0.85, 0.95), "ahead", "behind") == "behind"
    assert kit.tie_word(kit.NO_RATIO) == "n/a"


def test_ratios_pair_each_row_with_its_baseline_by_keys():
    base = pd.DataFrame({"n": [1, 2], "device_times_ms": [json.dumps(_reps(2.0)), json.dumps(_reps(4.0))]})
    rows = pd.DataFrame({"n": [2, 1, 3], "device_times_ms": [json.dumps(_reps(1.0))] * 3})
    got = kit.ratios(base, rows, ["n"])
    assert [round(r.value) for r in got] == [4, 2]  # the row of n=3 has no baseline


def test_a_slope_shows_a_power_when_its_interval_is_near_it_and_excludes_the_other():
    assert kit.follows_power(0.95, 1.05, 1) and kit.follows_power(1.96, 2.0, 2)
    assert not kit.follows_power(1.06, 2.0, 2)  # holds 2 but does not rule linear growth out
    assert not kit.follows_power(1.2, 1.4, 1)  # below 1.5 but above 1.1: faster than linear
    assert not kit.follows_power(1.5, 1.7, 2) and not kit.follows_power(2.2, 2.4, 2)  # not near 2
    assert not kit.follows_power(float("nan"), float("nan"), 1)
    with pytest.raises(ValueError, match="power must be 1"):
        kit.follows_power(2.9, 3.1, 3)
    assert kit.scaling_verdict([(0.9, 1.1)], [(1.9, 2.05)]) == "holds"
    assert kit.scaling_verdict([(0.9, 1.1)], [(1.06, 2.0)]) == "partly holds (1 of 2)"
    assert kit.scaling_verdict([(0.9, 1.1), (1.2, 1.4)], [(1.9, 2.05)]) == "partly holds (2 of 3)"
    assert kit.scaling_verdict([(1.6, 1.9)]) == "not reached"
    assert kit.scaling_verdict([]) == "n/a"


def test_linear_is_at_most_linear_and_a_slope_below_one_is_told_apart():
    """O(n) bounds a growth: a slope whose interval lies below 1 (FlashQLA's 0.81 [0.71, 0.91]) shows
    linear growth, and below_one names it, as printed (an upper end of 0.996 reads 1.00)."""
    assert kit.follows_power(0.71, 0.91, 1) and kit.follows_power(0.3, 0.5, 1)
    assert kit.below_one(0.91) and not kit.below_one(0.996) and not kit.below_one(1.05)
    assert not kit.below_one(float("nan"))


def test_criterion_macros_state_the_constants_the_verdicts_apply(monkeypatch):
    """The paper's criteria read the constants that follows_power and ratio apply, so a change of
    one changes the text with the verdicts."""
    assert kit.criterion_macros() == {"CiLevelPct": "95", "CiResamples": r"4\,000", "SlopeTolerance": "0.1",
                                      "SlopeDivide": "1.5"}
    monkeypatch.setattr(kit, "SLOPE_DIVIDE", 1.3)
    assert kit.criterion_macros()["SlopeDivide"] == "1.3"
    assert kit.follows_power(1.35, 1.95, 2) and not kit.follows_power(1.2, 1.95, 2)


def test_a_study_is_named_in_lower_case_mid_sentence_only_when_its_label_is_a_phrase():
    """study_name keeps names ("SwiGLU", "Gated DeltaNet") and lowers phrases ("long context")."""
    from kernels.paper import style

    assert [style.study_name(s) for s in ("swiglu", "flex", "gdn", "longctx", "tensorcore")] == [
        "SwiGLU", "FlexAttention", "Gated DeltaNet", "long context", "tensor cores"]
    assert style.study_label("longctx") == "Long context"
