"""The reproduction check's report (:func:`check`: :mod:`kernels.paper.reproduce` judges, this writes): the
tables of the rows by size and by implementation, of the claims of both runs and of each study's three
terms, the rows outside the tolerance, the figure of the ratios, the ``Repro*`` macros and the appendix
paragraph, or the paragraph that says no second run is compared."""

from __future__ import annotations

import itertools
import logging
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import PurePosixPath

import numpy as np
import pandas as pd

from kernels.core.files import write_atomic
from kernels.paper import gpu_factor, render, rows, style
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

#: Verdicts that make a run not reproduced; the table lists these rows, in this order.
OUTSIDE = ("status changed", "missing", "slower", "faster")
#: Marker and colour of each study's cases in the figure, in turn (one per study of the project;
#: a study beyond them starts the list again).
STUDY_MARKERS = (("o", "#4C72B0"), ("s", "#DD8452"), ("^", "#55A868"), ("D", "#C44E52"), ("v", "#8172B3"))
#: Rows shown in the LaTeX table of the rows outside the tolerance (with case labels of two or three
#: lines, they share a page with the table of those rows per implementation); the rest are counted
#: (every row of both runs is in the rule's CSV, results/reproduction.csv).
TABLE_ROWS = 20
#: Classes of the reference's device time, ms (lower bounds; the last is open), with their labels.
SIZE_CLASSES = ((0.0, "below 10 µs"), (0.01, "10–100 µs"), (0.1, "0.1–1 ms"), (1.0, "1–10 ms"),
                (10.0, "10 ms and more"))


def size_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows timed in both runs by the reference's device time (:data:`SIZE_CLASSES`):
    columns ``device time`` (the class), ``rows``, ``within`` (reproduced), ``within %``,
    ``host-bound`` (rows of :func:`kernels.core.timing.host_bound` in either run) and ``within,
    host-free`` (reproduced rows among the others); empty classes are left out."""
    timed = table[table["verdict"].isin(judge.TIMED)]
    bounds = [lo for lo, _ in SIZE_CLASSES] + [np.inf]
    cls = pd.cut(timed["ms_reference"].astype(float), bounds, right=False, labels=[lab for _, lab in SIZE_CLASSES])
    out = []
    for label, g in timed.groupby(cls, observed=True):
        ok, host = g["verdict"] == "reproduced", g["host_bound"].astype(bool)
        out.append({"device time": label, "rows": len(g), "within": int(ok.sum()),
                    "within %": judge.percent(int(ok.sum()), len(g)), "host-bound": int(host.sum()),
                    "within, host-free": f"{int((ok & ~host).sum())} of {int((~host).sum())}"})
    return pd.DataFrame(out)


def impl_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per study and implementation with a row outside the tolerance: ``rows`` timed in both,
    ``slower``, ``faster``, ``host-bound`` among those outside, and the ``median ratio`` of
    the device time over all its timed rows; most rows outside first."""
    timed = table[table["verdict"].isin(judge.TIMED)]
    out = []
    for (study, impl), g in timed.groupby(["study", "impl"]):
        outside = g[g["verdict"] != "reproduced"]
        if len(outside):
            out.append({"study": style.study_label(study), "implementation": style.label(study, impl),
                        "rows": len(g),
                        "slower": int((outside["verdict"] == "slower").sum()),
                        "faster": int((outside["verdict"] == "faster").sum()),
                        "host-bound": int(outside["host_bound"].astype(bool).sum()),
                        "median ratio": f"{g['ratio'].astype(float).median():.3f}"})
    if not out:
        return pd.DataFrame()
    d = pd.DataFrame(out)
    most = (d["slower"] + d["faster"]).sort_values(ascending=False, kind="stable").index
    return d.loc[most].reset_index(drop=True)


def claims_latex(claims: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """The claims' verdicts of both runs for the paper: columns ``claim`` (its words in
    ``labels``, else the macro's name), ``reference``, ``second run`` and ``same``; in the order
    of ``labels`` (the claims table's), the others after them."""
    order = {name: i for i, name in enumerate(labels)}
    rank = claims["claim"].map(lambda c: order.get(c, len(order)))
    claims = claims.loc[rank.sort_values(kind="stable").index].reset_index(drop=True)
    return pd.DataFrame({"claim": [labels.get(c, c) for c in claims["claim"]],
                         "reference": claims["reference"], "second run": claims["candidate"],
                         "same": [("yes" if s else "on the line" if line else "no")
                                  for s, line in zip(claims["same"], claims["on_line"])]})




def terms_table(table: pd.DataFrame, claims: pd.DataFrame, tolerance: float, candidate: list[dict],
                reference: list[dict]) -> pd.DataFrame:
    """Each study's three terms for the paper, claims first: columns ``study``, ``claims the same``,
    ``GPU factor`` (with its interval, :func:`kernels.paper.gpu_factor.study_factor`), ``within after
    it`` (of the rows of 10 µs or more), ``rows within`` (as measured), ``under 10 µs within`` and
    ``GPUs (2nd / 1st)`` (each run's GPU and what it recorded: :func:`kernels.paper.gpu_factor.gpu_settings`)."""
    out = []
    for study, mine in judge.study_claims(table, claims).items():
        f = gpu_factor.study_factor(table[table["study"] == study], tolerance)
        out.append({"study": style.study_name(study),
                    "claims the same": f"{int(mine['same'].sum())} of {len(mine)}",
                    "GPU factor": f"{f['factor']:.2f} [{f['low']:.2f}, {f['high']:.2f}]" if f["rows"] else "n/a",
                    "within after it": f"{f['within_after']} of {f['rows_long']}",
                    "rows within": f"{f['within']} of {f['rows']}",
                    "under 10 µs within": f"{f['within_short']} of {f['rows_short']}",
                    "GPUs (2nd / 1st)": " / ".join(f"{gpu_factor.run_gpu(run, study)}: {gpu_factor.gpu_settings(run, study)}"
                                                   for run in (candidate, reference))})
    return pd.DataFrame(out)


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


def outside_table(table: pd.DataFrame, limit: int = TABLE_ROWS) -> pd.DataFrame:
    """The rows outside the tolerance (:data:`OUTSIDE`), worst first: status changes, missing
    rows, then slower and faster by how far their ratio is from 1 (in log); at most ``limit``
    rows, then one row counting the rest. Each run's noise band is its q10 and q90 over the
    median; a case's ``field=value`` parts that most of its study's cases share are left out."""
    d = table[table["verdict"].isin(OUTSIDE)].copy()
    if d.empty:
        return pd.DataFrame()
    d["_rank"] = d["verdict"].map({v: i for i, v in enumerate(OUTSIDE[:2])}).fillna(len(OUTSIDE))
    d["_far"] = -np.abs(np.log(d["ratio"].astype(float)))
    d = d.sort_values(["_rank", "_far", "study", "impl", "case"], kind="stable")
    shown = d.head(limit)
    common = {study: _common_parts(g["case"]) for study, g in table.groupby("study")}

    def band(r, run):
        lo, hi = getattr(r, f"band_lo_{run}"), getattr(r, f"band_hi_{run}")
        return "" if pd.isna(lo) else f"{lo:.2f}-{hi:.2f}"

    out = pd.DataFrame({
        "study": [style.study_label(x) for x in shown["study"]],
        "implementation": [style.label(a, b) for a, b in zip(shown["study"], shown["impl"])],
        "case": [" ".join(p for p in r.case.split(" ") if p not in common[r.study]) for r in shown.itertuples()],
        "ref. ms": shown["ms_reference"].map(_ms), "2nd ms": shown["ms_candidate"].map(_ms),
        "ratio": shown["ratio"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}"),
        "ref. band": [band(r, "reference") for r in shown.itertuples()],
        "2nd band": [band(r, "candidate") for r in shown.itertuples()],
        "verdict": [f"{a} to {b}" if v == "status changed" else v + (", host-bound" if h is True else "")
                    for v, a, b, h in zip(shown["verdict"], shown["status_reference"], shown["status_candidate"],
                                          shown["host_bound"])]})
    if len(d) > limit:
        rest = pd.DataFrame([{c: "" for c in out.columns} | {"case": f"and {len(d) - limit} more rows"}])
        out = pd.concat([out, rest], ignore_index=True)
    return out.reset_index(drop=True)


def with_columns(tabular: str, spec: str) -> str:
    """``tabular`` (:func:`kernels.paper.render.table_to_latex`) with the column spec ``spec``."""
    head, rest = tabular.split("\n", 1)
    return re.sub(r"\{[^{}]*\}$", lambda _: "{" + spec + "}", head) + "\n" + rest.rstrip("\n")


#: Column spec of the table of the rows outside the tolerance (the case wraps).
OUTSIDE_COLUMNS = r"ll>{\raggedright\arraybackslash}p{0.27\linewidth}rrrll>{\raggedright\arraybackslash}p{0.09\linewidth}"


def _ms(value) -> str:
    """A time in ms without an exponent: four decimals below 1 ms, three to 100 ms, none above."""
    if pd.isna(value):
        return ""
    return f"{value:.4f}" if value < 1 else f"{value:.3f}" if value < 100 else f"{value:.0f}"


def _common_parts(cases: pd.Series) -> set[str]:
    """The ``field=value`` parts of case labels held by more than half of ``cases`` (a study's defaults)."""
    parts = pd.Series([p for case in cases for p in set(case.split(" ")) if "=" in p])
    counts = parts.value_counts()
    return set(counts[counts > len(cases) / 2].index)


def figure(table: pd.DataFrame, tolerance: float):
    """Reproduction: each case's device time in the second run over the reference run's, against
    the reference's device time (log scales; shaded: within the tolerance), per study; the
    legend counts the cases within the tolerance of those timed in both (and any case missing
    from the second run or whose status changed)."""
    from matplotlib import ticker

    fig, ax = style.figure(width=style.COLUMN_WIDTH, height=2.6)
    timed = table[table["verdict"].isin(judge.TIMED)]
    ax.axhspan(1 - tolerance, 1 + tolerance, color="0.85", zorder=0, lw=0)
    ax.axhline(1.0, color="0.5", lw=0.6, zorder=1)
    for (study, d), (marker, color) in zip(timed.groupby("study"), itertools.cycle(STUDY_MARKERS)):
        within = int((d["verdict"] == "reproduced").sum())
        ax.scatter(d["ms_reference"].astype(float), d["ratio"].astype(float), s=9, marker=marker, color=color,
                   zorder=2, linewidths=0, alpha=0.8,
                   label=f"{style.study_label(study)} ({within} of {len(d)})")
    n = judge.verdict_counts(table)
    for v in ("missing", "status changed"):
        if n[v]:
            ax.scatter([], [], marker="x", color="k", label=f"{v} ({n[v]})")
    ratios = [*timed["ratio"].astype(float), 0.8, 1.25]  # at least 0.8-1.25
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(min(ratios) / 1.05, max(ratios) * 1.05)
    ax.yaxis.set_major_locator(ticker.FixedLocator([0.2, 0.3, 0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0]))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("reference device time (ms)")
    ax.set_ylabel("device time, second run / reference")
    ax.legend(loc="upper right", fontsize=6)
    return fig


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
THREATS = (r"Second runs on other GPUs agree with them within $\pm$\ReproTolerancePct\,\% of device time for"
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
            impls: pd.DataFrame, claims: pd.DataFrame, headlines: pd.DataFrame, without=(),
            terms: pd.DataFrame | None = None) -> str:
    """The appendix paragraph on the second run with its figure and tables (``values``:
    :func:`macros`, defined in :func:`numbers`; only their names are used here; ``studies``: those compared; ``has_outside``: whether any row is
    outside the tolerance; ``sizes``: :func:`size_table`; ``impls``: :func:`impl_table`;
    ``claims``: :func:`compare_claims`; ``headlines``: :func:`headline_table`; ``without``: the
    studies without a second run of their code, which the paragraph names; ``terms``:
    :func:`terms_table`, each study's three terms)."""
    per_study = ", ".join(rf"{style.study_name(study)} \ReproRowsWithin{kit.camel(study)}{{}} of"
                          rf" \ReproRowsCompared{kit.camel(study)}{{}} (\ReproPercentWithin{kit.camel(study)}\,\%)"
                          for study in studies)
    table_ref = (r"Table~\ref{tab:reproduction_impls} counts the rows outside it per implementation and"
                 r" Table~\ref{tab:reproduction} lists them, worst first" if has_outside else "no row is outside it")
    text = "\n".join([
        r"\paragraph{Criterion.} Section~\ref{sec:method} states when a second run reproduces a study. The runs are",
        r"reproduced when every study is (config \texttt{reproduce}); the \ReproRowsNotTimed{} cases that neither run",
        r"timed, with the same status in both, are left out. Shares are given to one decimal, rounded down.",
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
        r"\ReproRowsStatusChanged. The compile-ahead job (config \texttt{compile\_ahead}) compiles an",
        r"implementation's cases in parallel processes before they are timed; implementations that it",
        r"prepared in one run of a study and not in the other: \ReproCompileAhead. Either run warms each",
        r"case up before timing it, so only the cases' one-off costs differ there.",
        "",
        r"\paragraph{Outcome.} \ReproOutcome{} (\ReproOutcomeByStudy; Table~\ref{tab:reproduction_terms} gives each",
        r"study's three terms and what each GPU recorded). Re-derived from each run, \ReproClaimsSame{} of the",
        r"\ReproClaimsCompared{} verdicts of Table~\ref{tab:claims} that both runs decide are the same; on their",
        r"claim's line (a value whose interval holds the threshold): \ReproClaimsOnLine{} (\ReproClaimsOnLineList;",
        r"Table~\ref{tab:reproduction_claims}); different: \ReproClaimsDifferent.",
        r"Table~\ref{tab:reproduction_headlines} sets each study's headline numbers of the two runs side by side."])
    if without:
        names = kit.and_list([style.study_name(s) for s in without])
        text += ("\n" + rf"No second run of the code that measured the rows of {names} is committed yet:"
                 r" their rows are not compared, and the outcome holds for the studies named above only.")
    floats = [r"\begin{figure}[tbp]", r"\centering", r"\fitgraphics{reproduction.pdf}",
              rf"\caption{{{render.caption(figure)}}}", r"\label{fig:reproduction}", r"\end{figure}"]
    if terms is not None and len(terms):
        floats += [r"\begin{table}[tbp]", r"\centering", r"\scriptsize",
                   r"\caption{Each study's second run in the check's three terms: its verdicts of",
                   r"Table~\ref{tab:claims} the same, its GPU factor (second over first device time, median over",
                   r"the rows of 10\,\textmu{}s or more, 95\,\% bootstrap interval) and how many of those rows agree",
                   r"within the tolerance once it is divided out, its rows as measured and those under 10\,\textmu{}s,",
                   r"and each run's GPU with its power limit and median SM clock at the end of the timed repetitions",
                   r"(``not recorded'' for rows measured before the GPU's state was).}",
                   r"\label{tab:reproduction_terms}",
                   r"\fitwidth{" + render.table_to_latex(terms).rstrip("\n") + "}", r"\end{table}"]
    floats += [r"\begin{table}[tbp]", r"\centering", r"\small",
               r"\caption{Rows timed in both runs by the reference's device time: how many agree within",
               r"the tolerance, how many either run flags host-bound (the spin before the call was too",
               r"short in more than 5\,\% of the repetitions) and how many of the others agree.}",
               r"\label{tab:reproduction_sizes}", render.table_to_latex(sizes).rstrip("\n"), r"\end{table}",
               r"\begin{table}[tbp]", r"\centering", r"\small",
               r"\caption{The verdicts of Table~\ref{tab:claims} derived from each run.}",
               r"\label{tab:reproduction_claims}",
               with_columns(render.table_to_latex(claims_latex(claims, claim_labels(studies))),
                        r"p{0.48\linewidth}" + 2 * r">{\raggedright\arraybackslash}p{0.16\linewidth}" + "l"),
               r"\end{table}",
               r"\begin{table}[tbp]", r"\centering", r"\small",
               r"\caption{Each study's headline numbers (its report's \texttt{HEADLINES}) from each run.}", r"\label{tab:reproduction_headlines}",
               with_columns(render.table_to_latex(headlines.set_index("number")),
                            r"p{0.40\linewidth}" + 2 * r">{\raggedright\arraybackslash}p{0.24\linewidth}"),
               r"\end{table}"]
    if has_outside:
        floats += [r"\begin{table}[tbp]", r"\centering", r"\small",
                   r"\caption{Implementations with rows outside the tolerance: rows timed in both runs,",
                   r"those slower and faster in the second run, how many of those either run flags",
                   r"host-bound, and the median ratio of the device time over all the rows.}",
                   r"\label{tab:reproduction_impls}", render.table_to_latex(impls).rstrip("\n"), r"\end{table}"]
        floats += [r"\begin{table}[tbp]", r"\centering", r"\small",
                   r"\caption{Rows of the second run (2nd) outside the tolerance, worst first (ratio: of the",
                   r"device time; band: each run's q10 and q90 over its median; case fields that most cases of",
                   r"their study share are left out; every case of both runs: \texttt{results/reproduction.csv}).}",
                   r"\label{tab:reproduction}", r"\scriptsize", r"\setlength{\tabcolsep}{3pt}",
                   r"\fitwidth{\input{generated/reproduction_outside.tex}}",
                   r"\end{table}"]
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
            + r"\texttt{snakemake --profile profiles/quick} measures the main cases of each study on a GPU "
            "and compares them with these data case by case (\\texttt{docs/reproducing.md}).\n")


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
            table of rows outside the tolerance (LaTeX), the paper's snippet (appendix) and
            its macros (:mod:`kernels.paper.reproduce_text`).

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
    outside_latex = render.table_to_latex(outside)  # the one-cell "not measured" tabular when empty
    write_atomic(out_table, outside_latex if outside.empty
                 else with_columns(outside_latex, OUTSIDE_COLUMNS) + "\n")
    found = sorted(table["study"].unique())  # in the config's order (sections), as the claims table
    studies = [s for s in (sections or {}) if s in found] + [s for s in found if s not in (sections or {})]
    values = (macros(table, claims, tolerance, min_within, candidate, claim_labels(studies), cand, refused)
              | judge.claim_status(claims, [*studies, *refused], [*studies, *refused, *without])
              | {"ReproCompileAhead": compile_ahead_differences(cand, ref)})
    write_atomic(out_numbers, numbers(values))
    write_atomic(out_snippet, snippet(values, studies, not outside.empty, size_table(table),
                                           impl_table(table), claims, judge.headline_table(ref_macros, cand_macros, studies),
                                           without, terms_table(table, claims, tolerance, cand, ref)))
    write_atomic(out_summary, line + "\n")
    log.info("%s", line)
    for r in claims.itertuples():
        log.info("claim %s: reference '%s', candidate '%s'", r.claim, r.reference, r.candidate)
    return line
