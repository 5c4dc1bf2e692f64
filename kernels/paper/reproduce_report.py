"""The reproduction check's report (:func:`check`: :mod:`kernels.paper.reproduce` judges, this writes): the
``Repro*`` macros and the appendix paragraph, which sets the tables and the figure of
:mod:`kernels.paper.reproduce_tables`, or the paragraph that says no second run is compared."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import PurePosixPath

import pandas as pd

from kernels.core.files import write_atomic
from kernels.paper import render, rows, style
from kernels.paper import report_kit as kit
from kernels.paper import reproduce as judge

log = logging.getLogger("kernels.paper.reproduce")
from kernels.paper.claims import (
    claim_labels,
    claim_verdicts,
    load_run,
    study_macros,
    tidy_tables,
)
from kernels.paper.reproduce_tables import _ms, figure, impl_table, outside_csv, outside_table, size_table


def second_runs(run: list[dict]) -> str:
    """The second run's commits and GPUs by study, in the paper's words: ``long context, tensor
    cores: commit 8da63ca, GPU-deab70f9; SwiGLU: commit b8612a2, GPU-775c3238`` (from the rows'
    ``env``; the studies of one commit and GPU together; :func:`kernels.paper.style.study_name`)."""
    by_run = defaultdict(list)
    for row in run:
        env = row.get("env", {})
        key = (str(env.get("git_commit") or "n/a")[:7], str(env.get("gpu_uuid") or "n/a")[:12])
        if row["study"] not in by_run[key]:
            by_run[key].append(row["study"])
    return "; ".join(f"{', '.join(style.study_name(s) for s in studies)}: commit {commit}, {gpu}"
                     for (commit, gpu), studies in sorted(by_run.items()))


def macros(table: pd.DataFrame, claims: pd.DataFrame, tolerance: float, min_within: float,
           candidate: Sequence[str], labels: dict[str, str] | None = None,
           run: list[dict] | None = None, refused: dict[str, str] | None = None) -> dict[str, str]:
    """The ``Repro*`` macros of the paper: ``ReproRowsWithin``, ``ReproRowsCompared`` (rows
    timed in both runs), ``ReproPercentWithin``, the same per study (``ReproRowsWithinSwiglu``,
    ...), ``ReproRowsMissing``, ``ReproRowsStatusChanged``, ``ReproTolerancePct``,
    ``ReproClaimsSame``, ``ReproClaimsCompared``, ``ReproClaimsOnLine`` and ``ReproClaimsOnLineList`` (the
    verdicts that differ only by a value on their claim's line: how many, and which), ``ReproClaimsDifferent``
    (the claims in ``labels``' words, else their macro names; or "none"), ``ReproOutcome`` (reproduced / not reproduced:
    reproduced when every study is and no study's second run was refused, ``refused``: :func:`not_one_run`),
    ``ReproOutcomeByStudy`` (:func:`kernels.paper.reproduce.outcome_by_study`, the refused studies
    included), ``ReproCriterion`` (:func:`criterion`) and
    ``ReproCandidate`` (the second run's folders: :func:`folders_latex`). Also ``ReproRowsWithinHostFree`` /
    ``ReproRowsComparedHostFree`` / ``ReproPercentWithinHostFree`` (the rows whose device time is
    host-free in both runs), ``ReproRowsWithinLatency`` / ``ReproPercentWithinLatency`` (the
    rows compared by latency instead), ``ReproRowsOutside`` with ``ReproRowsOutsideBelowTenUs``
    and ``ReproRowsOutsideFromOneMs`` (by the reference's device time),
    ``ReproRowsNotTimed`` (the cases that neither run timed, left out of the check),
    ``ReproOutsideFromOneMsList`` (the rows of a millisecond or more outside the tolerance: each
    implementation with the reference's device time and the ratio), and ``ReproRuns`` (the second
    run's commits and GPUs by study, :func:`second_runs` of its rows ``run``).
    Every share is :func:`percent`'s."""
    def within(t):
        timed = t[t["verdict"].isin(judge.TIMED)]
        good = int((timed["verdict"] == "reproduced").sum())
        return str(good), str(len(timed)), judge.percent(good, len(timed))

    out = {}
    out["ReproRowsWithin"], out["ReproRowsCompared"], out["ReproPercentWithin"] = within(table)
    out["ReproCriterion"] = criterion(tolerance, min_within)
    out["ReproRowsNotTimed"] = str(int((table["verdict"] == "not timed").sum()))
    out_rows = table[table["verdict"].isin(("slower", "faster"))]
    ms = out_rows["ms_reference"].astype(float)
    out.update(ReproRowsOutside=str(len(out_rows)), ReproRowsOutsideBelowTenUs=str(int((ms < 0.01).sum())),
               ReproRowsOutsideFromOneMs=str(int((ms >= 1.0).sum())))
    long = out_rows[ms >= 1.0].sort_values("ms_reference")
    out["ReproOutsideFromOneMsList"] = render.escape_latex("; ".join(
        f"{style.label(r.study, r.impl)} at {_ms(r.ms_reference)} ms: {r.ratio:.2f}"
        + (" (host-bound)" if r.host_bound is True else "")
        for r in long.itertuples()) or "none")
    out["ReproRuns"] = render.escape_latex(second_runs(run or []) or "n/a")
    lat = table.loc[table["verdict"].isin(judge.TIMED), "ratio_latency"].astype(float)
    lat_ok = sum(judge.verdict(r, tolerance) == "reproduced" for r in lat)
    out["ReproRowsWithinLatency"] = str(lat_ok)
    out["ReproPercentWithinLatency"] = judge.percent(lat_ok, len(lat))
    free = table[~table["host_bound"].fillna(False).astype(bool)]
    out["ReproRowsWithinHostFree"], out["ReproRowsComparedHostFree"], out["ReproPercentWithinHostFree"] = within(free)
    by_study = []
    for study, g in table.groupby("study", sort=False):
        name = kit.camel(study)
        out[f"ReproRowsWithin{name}"], out[f"ReproRowsCompared{name}"], out[f"ReproPercentWithin{name}"] = within(g)
        by_study.append(f"{style.study_name(study)} {out[f'ReproPercentWithin{name}']}\\,\\%")
    out["ReproByStudy"] = ", ".join(by_study) or "none"
    out["ReproStudies"] = kit.and_list([style.study_name(s) for s in table["study"].unique()]) or "none"
    n = judge.verdict_counts(table)
    outcomes = judge.study_outcomes(table, claims, min_within, tolerance)
    different = [(labels or {}).get(c, c) for c in claims.loc[~claims["same"] & ~claims["on_line"], "claim"]]
    on_line = [(labels or {}).get(c, c) for c in claims.loc[claims["on_line"], "claim"]]
    out.update(ReproRowsMissing=str(n["missing"]), ReproRowsStatusChanged=str(n["status changed"]),
               ReproTolerancePct=f"{100 * tolerance:g}",
               ReproClaimsSame=str(int(claims["same"].sum())), ReproClaimsCompared=str(len(claims)),
               ReproClaimsDifferent=render.escape_latex("; ".join(different) if different else "none"),
               ReproClaimsOnLine=str(len(on_line)),
               ReproClaimsOnLineList=render.escape_latex("; ".join(on_line) if on_line else "none"),
               ReproOutcome="reproduced" if judge.reproduced(outcomes, refused) else "not reproduced",
               ReproOutcomeByStudy=render.escape_latex(judge.outcome_by_study(outcomes, refused)),
               ReproCandidate=folders_latex(candidate))
    return out


def _path_latex(path: str) -> str:
    """``path`` in typewriter type, breakable after each slash but a last one."""
    body = render.escape_latex(path.rstrip("/")).replace("/", r"/\allowbreak{}")
    return r"\texttt{" + body + "/" * path.endswith("/") + "}"


def folders_latex(folders: Sequence[str]) -> str:
    """The second run's folders in the paper's words: folders of one parent named once, ``h200-a
    and h200-b in data/reproductions/`` (each name in typewriter type); otherwise each whole path."""
    parents = {str(PurePosixPath(f).parent) for f in folders}
    if len(folders) > 1 and len(parents) == 1 and parents != {"."}:
        return (kit.and_list([_path_latex(PurePosixPath(f).name) for f in folders])
                + " in " + _path_latex(parents.pop() + "/"))
    return kit.and_list([_path_latex(f) for f in folders])


def prepared_ahead(run: list[dict]) -> dict[str, set[str]]:
    """{study: its implementations whose rows the run's compile-ahead job prepared} (rows whose
    ``compile_ahead`` is set: config ``compile_ahead``, kernels.core.jobs.compile_ahead_job)."""
    out: dict[str, set[str]] = {}
    for row in run:
        impls = out.setdefault(row["study"], set())  # every study of the run, those without such rows too
        if row.get("compile_ahead"):
            impls.add(row["impl"])
    return out


def compile_ahead_differences(candidate: list[dict], reference: list[dict]) -> str:
    """The implementations that one run of a study prepared in its compile-ahead job and the other
    did not, in the paper's words (``long context: FLA in the committed run only``), or "none";
    studies of the candidate only. The timed repetitions follow a warm-up in either run: what
    differs is the cases' one-off costs (``setup_s``, ``first_call_s``) and the GPU time held."""
    cand, ref = prepared_ahead(candidate), prepared_ahead(reference)
    parts = []
    for study in cand:
        for impls, run in ((ref.get(study, set()) - cand[study], "the committed run"),
                           (cand[study] - ref.get(study, set()), "the second run")):
            if impls:  # in the study's legend order (its registry names every impl of a valid row)
                names = kit.and_list([style.label(study, i) for i in style.registry(study) if i in impls])
                parts.append(f"{style.study_name(study)}: {names} in {run} only")
    return render.escape_latex("; ".join(parts) or "none")


def criterion(tolerance: float, min_within: float) -> str:
    """The reproduction check's criterion in the paper's words (macro ``ReproCriterion``, set in Method
    before any result, whether or not a second run is compared): ``tolerance`` and ``min_within``,
    config ``reproduce``'s, as fractions."""
    return (r"A second cold run of a study on another GPU of its model reproduces its committed rows when"
            r" each of its verdicts is the same (one that differs only by a value on its claim's line counts"
            r" neither way), none of its rows is missing or changed status, and at least"
            rf" {100 * min_within:g}\,\% of its rows timed in both agree within $\pm${100 * tolerance:g}\,\% of"
            r" the median device time, as measured or, for its rows of 10\,\textmu{}s or more, once its"
            r" \emph{GPU factor} is divided out (the median over those rows of their second over first device"
            r" time, with a 95\,\% bootstrap interval); rows under 10\,\textmu{}s, bound by their launch and the"
            r" host, are then counted apart. The claims are ratios within one run on one GPU: what a"
            r" reproduction must give again is the main results~\citep{acmbadges2020}, and GPUs of one model"
            r" differ by about 8\,\% on average and up to 22\,\% through their clocks, power and"
            r" temperature~\citep{sinha2022gpus}, so a GPU slower in every row by one factor is another GPU,"
            r" not another result. Run by this artifact on GPUs its authors chose, such a run is what ACM calls"
            r" repeatability; a reader's own run of it (\texttt{--profile profiles/quick}) is a reproduction.")


#: The threats section's sentences on the second run (macro ``ReproThreats``), given one.
THREATS = (r"Second runs on other GPUs of the \EnvGpuName{} agree with its rows within $\pm$\ReproTolerancePct\,\% of device time for"
           r" \ReproPercentWithin\,\% of the rows, but by latency, the host's launch included, for only"
           r" \ReproPercentWithinLatency\,\% (Appendix~\ref{sec:reproducing}): the latencies and host overheads"
           r" quoted here are those of one host.")


def numbers(values: dict[str, str]) -> str:
    """The ``Repro*`` macros (``values``: :func:`macros`), ``ReproThreats`` (:data:`THREATS`)
    and the switches ``\\ifReproRun`` (true: a second run is compared) and ``\\ifReproOutside``
    (true: rows are outside the tolerance, and the tables of them exist), read in the paper's preamble."""
    header = "% Generated by the rule `reproduce` (kernels/paper/reproduce.py); do not edit."
    outside = r"\ReproOutsidetrue" if values.get("ReproRowsOutside", "0") != "0" else ""
    return "\n".join([header, r"\newif\ifReproRun\ReproRuntrue  % text on the second run: \ifReproRun ... \fi",
                      r"\newif\ifReproOutside" + outside + "  % rows outside the tolerance: their tables",
                      *render.macro_lines({**values, "ReproThreats": THREATS})]) + "\n"


def snippet(values: dict[str, str], studies: list[str], has_outside: bool, sizes: pd.DataFrame,
            impls: pd.DataFrame, without=()) -> str:
    """The appendix paragraph on the second run with its figure and tables (``values``:
    :func:`macros`, defined in :func:`numbers`; only their names are used here; ``studies``: those compared; ``has_outside``: whether any row is
    outside the tolerance; ``sizes``: :func:`size_table`; ``impls``: :func:`impl_table`; ``without``: the
    studies without a second run of their code, which the paragraph names)."""
    per_study = ", ".join(rf"{style.study_name(study)} \ReproRowsWithin{kit.camel(study)}{{}} of"
                          rf" \ReproRowsCompared{kit.camel(study)}{{}} (\ReproPercentWithin{kit.camel(study)}\,\%)"
                          for study in studies)
    table_ref = (r"Table~\ref{tab:reproduction_impls} counts the rows outside it per implementation and"
                 r" \tablecsv{reproduction_outside} lists them, worst first" if has_outside else "no row is outside it")
    text = "\n".join([
        r"\paragraph{Criterion.} Section~\ref{sec:method} states when a second run reproduces a study. The runs are",
        r"reproduced when every study is; the \ReproRowsNotTimed{} cases that neither run timed, with the same status",
        r"in both, are left out. Shares are given to one decimal, rounded down.",
        "",
        r"\paragraph{Reproduction.} A second cold run of the code of each study compared here (\ReproStudies) on",
        r"another GPU than its rows'",
        r"(\ReproCandidate: \ReproRuns) was compared with these",
        r"data case by case: \ReproRowsWithin{} of the \ReproRowsCompared{} rows timed in both",
        r"(\ReproPercentWithin\,\%) agree within $\pm$\ReproTolerancePct\,\% in device time",
        rf"({per_study}; Figure~\ref{{fig:reproduction}}); {table_ref}.",
        r"Of the \ReproRowsComparedHostFree{} rows whose device time is host-free in both runs (the spin",
        r"before the call outlasted its enqueue in at least 95\,\% of the repetitions),",
        r"\ReproRowsWithinHostFree{} (\ReproPercentWithinHostFree\,\%) agree;",
        r"Table~\ref{tab:reproduction_sizes} splits the rows by their device time. Compared by latency",
        r"(the host's launch included) instead, \ReproRowsWithinLatency{} of the \ReproRowsCompared{} rows",
        r"(\ReproPercentWithinLatency\,\%) agree.",
        r"Rows missing from the second run: \ReproRowsMissing; rows whose status changed:",
        r"\ReproRowsStatusChanged. A run may compile an implementation's cases in parallel processes before",
        r"they are timed; implementations compiled so in one run of a study and not in the other:",
        r"\ReproCompileAhead. Either run warms each case up before timing it, so only the cases' one-off costs",
        r"differ there.",
        "",
        r"\paragraph{Outcome.} \ReproOutcome{} (\ReproOutcomeByStudy; Table~\ref{tab:runs} gives each second run's",
        r"GPU factor and what its GPU recorded). Re-derived from each run, \ReproClaimsSame{} of the",
        r"\ReproClaimsCompared{} verdicts of Table~\ref{tab:claims} that both runs decide are the same; on their",
        r"claim's line (a value whose interval holds the threshold): \ReproClaimsOnLine{} (\ReproClaimsOnLineList);",
        r"different: \ReproClaimsDifferent{} (Table~\ref{tab:claims} gives the second run's verdict under each).",
        r"Table~\ref{tab:uncertainty} sets each headline number and each value the verdicts compare beside its range",
        r"over the GPUs that measured it."])
    if without:
        names = kit.and_list([style.study_name(s) for s in without])
        text += ("\n" + rf"No second run of the code that measured the rows of {names} is committed yet:"
                 r" their rows are not compared, and the outcome holds for the studies named above only.")
    floats = [r"\begin{figure}[tbp]", r"\centering", r"\fitgraphics{reproduction.pdf}",
              rf"\caption{{{render.caption(figure)}}}", r"\label{fig:reproduction}", r"\end{figure}"]
    floats += [r"\begin{table}[tbp]", r"\centering", r"\small",
               r"\caption{Rows timed in both runs by the reference's device time: how many agree within",
               r"the tolerance, how many either run flags host-bound (the spin before the call was too",
               r"short in more than 5\,\% of the repetitions) and how many of the others agree.}",
               r"\label{tab:reproduction_sizes}", render.table_to_latex(sizes).rstrip("\n"), r"\end{table}"]
    if has_outside:
        floats += [r"\begin{table}[tbp]", r"\centering", r"\small",
                   r"\caption{Implementations with rows outside the tolerance: rows timed in both runs,",
                   r"those slower and faster in the second run, how many of those either run flags",
                   r"host-bound, and the median ratio of the device time over all the rows.}",
                   r"\label{tab:reproduction_impls}", render.table_to_latex(impls).rstrip("\n"), r"\end{table}"]
    header = "% Generated by the rule `reproduce` (kernels/paper/reproduce.py); do not edit."
    return "\n".join([header, text, "", *floats]) + "\n"


def no_second_run(other_code: str | None = None) -> str:
    """The appendix paragraph when no second run is compared (rule ``reproduction_none``):
    none is configured, or ``other_code``, the one configured, holds rows of other code than
    every study's rows (:func:`kernels.paper.provenance.same_code`)."""
    first = (rf"\paragraph{{Reproduction.}} The committed second run (\texttt{{{render.escape_latex(other_code)}}}) is of"
             r" other code than every study's rows, so no second run of the code that measured these data is"
             r" committed yet. " if other_code else
             r"\paragraph{Reproduction.} No second run of these measurements is committed. ")
    return ("% Generated by the rule `reproduction_none` (kernels/paper/reproduce.py); do not edit.\n" + first
            + "A quick run on any GPU measures the main cases of each study and compares them with these data case"
            " by case (the artifact's \\texttt{README.md} gives its command).\n")


def no_second_run_numbers(other_code: str | None = None, studies=(), tolerance: float = 0.05,
                          min_within: float = 0.95) -> str:
    """The macros with :func:`no_second_run` (rule ``reproduction_none``): the threats section's
    sentence, the criterion a second run would be judged by (:func:`criterion`; ``tolerance`` and
    ``min_within``: config ``reproduce``'s) and each verdict's reproduction status of the claims table
    (:func:`claim_status`, :data:`NO_SECOND_RUN` for every verdict of ``studies``)."""
    what = "No second run of the code that measured these data" if other_code else \
        "No second run of these measurements"
    return ("% Generated by the rule `reproduction_none` (kernels/paper/reproduce.py); do not edit.\n"
            "\\newif\\ifReproRun  % false: no second run\n"
            "\\newif\\ifReproOutside  % false: no rows outside the tolerance\n"
            + "\n".join(render.macro_lines({
                "ReproThreats": f"{what} is committed, so their variation across GPUs and hosts is not"
                                " quantified here.",
                "ReproCriterion": criterion(tolerance, min_within),
                **judge.claim_status(pd.DataFrame(columns=["claim", "reference", "candidate"]), (), studies)})) + "\n")


def check(candidate_files: list[str], reference_files: list[str], *, gpu: str, tolerance: float,
          min_within: float, sections: dict[str, dict] | None, candidate: Sequence[str], out_csv: str,
          out_summary: str, out_figure: str, out_table: str, out_snippet: str, out_numbers: str,
          without: list[str] = (), partial: bool = False, stale: dict[str, str] | None = None) -> str:
    """Compare a candidate run with the reference run and write every output. A study whose
    candidate rows are not one run of one code (:func:`not_one_run`) is not compared: the summary
    line and the paper name it and why, its verdicts read :data:`NOT_COMPARED`, and the runs are
    not reproduced; the other studies are compared.

    Args:
        candidate_files, reference_files: the two runs' JSONL files.
        gpu: the data folder's GPU name (tidy tables for the claims).
        tolerance, min_within: config ``reproduce.tolerance`` and ``reproduce.min_within``.
        sections: {study: config section} the candidate ran (:func:`kernels.paper.rows.configured_cases`), which
            also gives the rows without roles theirs (:func:`kernels.paper.collect.with_roles`), or
            None to compare every reference row (rows without roles then have none).
        candidate: the candidate's folders (one per second run), as the paper names them.
        without: the studies left out, whose second run is of other code than their rows (or
            absent): the paper names them.
        partial: the candidate measured a part of each study (the quick profile): a claim it
            cannot derive is left out (:func:`compare_claims`).
        stale: {study: why} of the reference's studies whose rows are not current
            (:func:`stale_studies`): the summary line names those it compares.
        out_*: the comparison (CSV), the one-line summary (text), the figure (PDF), the
            table of rows outside the tolerance (CSV, :func:`kernels.paper.reproduce_tables.outside_csv`), the paper's snippet (appendix) and
            its macros (:func:`macros`).

    Returns:
        The summary line (also logged).

    Raises:
        ValueError: the candidate is no second run of the reference (:func:`check_pair`), or a
            row fails its schema (:func:`load_run`).
    """
    cand, ref = load_run(candidate_files), load_run(reference_files)
    judge.check_pair(cand, ref, partial)
    refused = judge.not_one_run(cand)
    for study, why in refused.items():
        log.warning("the second run of %s is not compared: %s (one run is one commit, GPU and fingerprint)",
                    study, why)
    cand, ref = ([r for r in run if r["study"] not in refused] for run in (cand, ref))
    expected = rows.configured_cases(sections) if sections is not None else None
    table = judge.compare(cand, ref, tolerance, expected)
    in_scope = {rows.case_id(r) for r in ref} if expected is None else expected
    ref_macros = study_macros(tidy_tables([r for r in ref if rows.case_id(r) in in_scope], gpu, sections))
    cand_macros = study_macros(tidy_tables(cand, gpu, sections))
    claims = judge.compare_claims(claim_verdicts(ref_macros), claim_verdicts(cand_macros), partial)
    line = judge.summary_line(table, claims, tolerance, min_within, refused, stale)
    outside = outside_table(table)
    write_atomic(out_csv, table.to_csv(index=False))
    style.save(figure(table, tolerance), out_figure)
    write_atomic(out_table, outside_csv(outside))
    found = sorted(table["study"].unique())  # in the config's order (sections), as the claims table
    studies = [s for s in (sections or {}) if s in found] + [s for s in found if s not in (sections or {})]
    values = (macros(table, claims, tolerance, min_within, candidate, claim_labels(studies), cand, refused)
              | judge.claim_status(claims, [*studies, *refused], [*studies, *refused, *without])
              | {"ReproCompileAhead": compile_ahead_differences(cand, ref)})
    write_atomic(out_numbers, numbers(values))
    write_atomic(out_snippet, snippet(values, studies, not outside.empty, size_table(table),
                                           impl_table(table), without))
    write_atomic(out_summary, line + "\n")
    log.info("%s", line)
    for r in claims.itertuples():
        log.info("claim %s: reference '%s', candidate '%s'", r.claim, r.reference, r.candidate)
    return line
