"""Every measuring run in the data, with its role and outcome (Table ``tab:runs``, ``results/runs.csv``).

A *run* is the rows of one study in one folder (``data/raw/<model>/`` or ``data/reproductions/<name>/``)
of one commit, GPU and fingerprint (:func:`kernels.paper.provenance.runs_of`). Its role:

:data:`COMMITTED`
    rows of ``data/raw/<model>/``: every number the paper gives of that model and study;
:data:`CHECKED`
    the second run that config ``reproduce.committed`` names for its model: the reproduction check
    compares it with the committed rows when that model's rows are rendered;
:data:`FURTHER`
    any other second or third run in ``data/reproductions/``: outside the check;
:data:`FAILED`
    a run none of whose rows was timed (every status a failure: ``error``, ``oom``, ...).

The outcome of a run other than the committed one is the check's own (:mod:`kernels.paper.reproduce`)
against its model's committed rows of the study (:func:`check_outcome`): reproduced or not and why,
its rows within the tolerance, its GPU factor with a 95 % interval and how many of the rows of 10 µs
or more lie within the tolerance once it is divided out (:func:`kernels.paper.gpu_factor.study_factor`),
and how many of its verdicts are the same. A run the check would not compare (rows of another code or
of several runs, the committed rows' GPU) reads :data:`NOT_COMPARED` and why. Beside each run, what its
GPU recorded (:func:`kernels.paper.gpu_factor.gpu_settings`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernels.core.files import write_atomic
from kernels.paper import gpu_factor, provenance, render, rows, style
from kernels.paper import report_kit as kit
from kernels.paper import reproduce as judge
from kernels.paper.claims import claim_labels, claim_verdicts, study_macros, tidy_tables
from kernels.paper.reproduce_tables import with_columns

COMMITTED, CHECKED, FURTHER, FAILED = ("committed", "2nd run, in the check", "further run, outside the check",
                                       "failed run")
ROLES = (COMMITTED, CHECKED, FURTHER, FAILED)
#: The outcome of a committed run.
PAPERS = "the paper's numbers"
REPRODUCED, NOT_REPRODUCED, NOT_COMPARED, NOT_TIMED = "reproduced", "not reproduced", "not compared", "no row timed"
COLUMNS = ["model", "study", "role", "folder", "commit", "gpu", "date", "settings", "rows_timed", "rows",
           "outcome", "rows_within", "rows_compared", "within_pct", "factor", "low", "high", "rows_long",
           "within_after", "rows_short", "within_short", "claims_same", "claims", "claims_on_line", "why"]


def split_runs(rows_of: list[dict]) -> list[list[dict]]:
    """``rows_of`` (one folder's rows of one study) as runs: the rows of each commit, GPU and fingerprint
    (:func:`kernels.paper.provenance.runs_of`), the earliest first (``env.date``)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows_of:
        key = next(iter(provenance.runs_of([row.get("env") or {}])))
        groups.setdefault(key, []).append(row)
    return sorted(groups.values(), key=lambda run: (run_dates(run), str(run_commit(run))))


def run_dates(run: list[dict]) -> str:
    """The days (UTC, ``env.date``) ``run``'s rows were measured on, joined by ", "; "n/a" without one."""
    return ", ".join(sorted({str(r["env"]["date"])[:10] for r in run if (r.get("env") or {}).get("date")})) or "n/a"


def run_commit(run: list[dict]) -> str:
    """The commits ``run``'s rows were measured at (``env.git_commit``), each as git prints it (7 digits,
    ``-dirty`` kept), joined by ", "; "n/a" without one."""
    commits = {str(r["env"]["git_commit"]) for r in run if (r.get("env") or {}).get("git_commit")}
    return ", ".join(c.split("-")[0][:7] + ("-dirty" if c.endswith("-dirty") else "") for c in sorted(commits)) or "n/a"


def roles(committed: dict[str, list[dict]], second: list[tuple[Path, str, list[dict]]], raw: str | Path,
          checked: dict[str, str | list[str]], studies) -> list[dict]:
    """Every run of ``committed`` ({model: its rows in ``raw/<model>/``}) and of ``second``
    (:func:`kernels.paper.reproduce.second_runs`; a run of a model without committed rows is left out),
    each a dict with ``model``, ``study``, ``folder``, ``role`` (module docstring; :data:`CHECKED` where
    ``checked``, config ``reproduce.committed`` ({model: a folder or a list}), names its folder), ``rows``
    (its rows) and ``all`` (its folder's rows of the study: the check compares them, or none if they are
    of several runs); by model (``committed``'s order), study (``studies``' order), role and date."""
    def named(model):
        return {Path(f).resolve() for f in provenance.committed_second_runs(checked, model)}

    found = [(model, Path(raw, model), study, [r for r in run if r["study"] == study])
             for model, run in committed.items() for study in studies]
    found += [(rows.row_model(run[0]), Path(folder), study, run) for folder, study, run in second]
    out = []
    for model, folder, study, all_rows in found:
        if not all_rows or model not in committed:
            continue
        for run in split_runs(all_rows):
            role = (FAILED if not any(r["status"] == "ok" for r in run) else
                    COMMITTED if folder == Path(raw, model) else CHECKED if folder.resolve() in named(model) else FURTHER)
            out.append({"model": model, "study": study, "folder": folder, "role": role, "rows": run, "all": all_rows})
    order = {m: i for i, m in enumerate(committed)}
    return sorted(out, key=lambda r: (order[r["model"]], list(studies).index(r["study"]), ROLES.index(r["role"]),
                                      run_dates(r["rows"]), str(r["folder"])))


def check_outcome(run: list[dict], first: list[dict], first_macros: dict[str, str], study: str, model: str,
                  sections: dict[str, dict], tolerance: float, min_within: float) -> dict:
    """The reproduction check's outcome of ``run`` (a folder's rows of ``study``) against ``first`` (the
    committed rows of ``study`` on ``model``; ``first_macros``: their report macros,
    :func:`kernels.paper.models.model_macros`), by the check's functions: :data:`NOT_COMPARED` where the check
    would not compare them (:func:`kernels.paper.reproduce.check_pair`, :func:`kernels.paper.reproduce.not_one_run`,
    :func:`kernels.paper.provenance.same_code`), else :data:`REPRODUCED` or :data:`NOT_REPRODUCED`
    (:func:`kernels.paper.reproduce.study_outcomes`, ``why``: its reasons) with the rows within ``tolerance``
    of those timed in both, the GPU factor with its interval, the rows of 10 µs or more within once it is
    divided out, those under 10 µs within, and the verdicts the same and on the line (the fields of
    :data:`COLUMNS` from ``outcome``)."""
    if not first:
        return {"outcome": NOT_COMPARED, "why": f"no committed rows of {study} on the {rows.model_label(model)}"}
    try:
        judge.check_pair(run, first)
    except ValueError as e:
        return {"outcome": NOT_COMPARED, "why": str(e)}
    refused = judge.not_one_run(run).get(study)
    if refused:
        return {"outcome": NOT_COMPARED, "why": refused}
    if not provenance.same_code(*(provenance.code_identity([r.get("env") or {} for r in x]) for x in (first, run))):
        return {"outcome": NOT_COMPARED, "why": "of other code than the committed rows"}
    table = judge.compare(run, first, tolerance, rows.configured_cases({study: sections[study]}))
    mine = claim_labels([study])
    claims = judge.compare_claims(
        {k: v for k, v in claim_verdicts(first_macros).items() if k in mine},
        {k: v for k, v in claim_verdicts(study_macros(tidy_tables(run, model, sections))).items() if k in mine})
    why = judge.study_outcomes(table, claims, min_within, tolerance).get(study, ["no case of its study compared"])
    f = gpu_factor.study_factor(table, tolerance)
    return {"outcome": NOT_REPRODUCED if why else REPRODUCED, "why": "; ".join(why), "rows_within": f["within"],
            "rows_compared": f["rows"], "within_pct": judge.percent(f["within"], f["rows"]),
            **{k: f[k] for k in ("factor", "low", "high", "rows_long", "within_after", "rows_short", "within_short")},
            "claims_same": int(claims["same"].sum()), "claims": len(claims), "claims_on_line": int(claims["on_line"].sum())}


def runs_table(found: list[dict], committed: dict[str, list[dict]], by_model: dict[str, dict[str, str]],
               sections: dict[str, dict], tolerance: float, min_within: float) -> pd.DataFrame:
    """Each run of ``found`` (:func:`roles`) with its outcome: :data:`COLUMNS` (``folder`` as given,
    ``gpu``: :func:`kernels.paper.gpu_factor.run_gpu`, ``settings``: :func:`kernels.paper.gpu_factor.gpu_settings`,
    ``rows_timed`` of ``rows``: status ok); a committed
    run's outcome is :data:`PAPERS` (of its model: the paper's, or that of the section on GPU models), a
    failed run's :data:`NOT_TIMED` (``why``: its statuses), any other's :func:`check_outcome` against ``committed``
    ({model: its rows}; ``by_model``: {model: their macros})."""
    records = []
    for r in found:
        run, study, model = r["rows"], r["study"], r["model"]
        record = {"model": model, "study": study, "role": r["role"], "folder": str(r["folder"]),
                  "commit": run_commit(run), "gpu": gpu_factor.run_gpu(run, study), "date": run_dates(run),
                  "settings": gpu_factor.gpu_settings(run, study), "rows_timed": sum(x["status"] == "ok" for x in run),
                  "rows": len(run)}
        if r["role"] == FAILED:
            statuses = pd.Series([x["status"] for x in run]).value_counts()
            record |= {"outcome": NOT_TIMED, "why": ", ".join(f"{n} {s}" for s, n in statuses.items())}
        elif r["role"] == COMMITTED:
            record["outcome"] = PAPERS
        else:
            first = [x for x in committed[model] if x["study"] == study]
            record |= check_outcome(r["all"], first, by_model[model], study, model, sections, tolerance, min_within)
        records.append(record)
    return pd.DataFrame(records, columns=COLUMNS)


def _factor(r) -> str:
    return f"{r.factor:.3f} [{r.low:.3f}, {r.high:.3f}]" if pd.notna(r.factor) else ""


def _claims(r) -> str:
    if pd.isna(r.claims):
        return ""
    line = f", {int(r.claims_on_line)} on the line" if r.claims_on_line else ""
    return f"{int(r.claims_same)} of {int(r.claims)}{line}"


#: Each role's name in the paper's table (:func:`runs_latex`; its caption says what they mean).
SHORT_ROLES = {COMMITTED: "committed", CHECKED: "2nd, checked", FURTHER: "further", FAILED: "failed"}


def runs_latex(table: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """:func:`runs_table` for the paper: GPU model (its first word), study, role (:data:`SHORT_ROLES`), commit,
    GPU (8 hex digits: the folder of a run in ``data/reproductions/`` is its model and these, as
    ``results/runs.csv`` gives it), date, what the GPU recorded (power limit and SM clock), rows timed of
    all, outcome (but the committed run's, which gives the paper's numbers), rows within ``tolerance`` (per
    cent, of those timed in both), GPU factor with its interval, the rows of 10 µs or more within once it
    is divided out, verdicts the same; empty cells where they do not apply."""
    rs = list(table.itertuples())
    return pd.DataFrame({
        "GPU": [rows.model_short(r.model) for r in rs],
        "study": [style.study_label(r.study) for r in rs],
        "role": [SHORT_ROLES[r.role] for r in rs],
        "commit": [r.commit for r in rs],
        "GPU UUID": [r.gpu.replace("GPU-", "") for r in rs],
        "date": [r.date for r in rs],
        "power limit, SM clock": [r.settings.replace(" limit", "").replace("SM ", "") for r in rs],
        "rows timed": [f"{r.rows_timed} of {r.rows}" for r in rs],
        "outcome": ["" if r.role == COMMITTED else r.outcome for r in rs],
        f"within ±{100 * tolerance:g} %": [f"{r.within_pct} ({int(r.rows_within)} of {int(r.rows_compared)})"
                                           if pd.notna(r.rows_compared) else "" for r in rs],
        "GPU factor": [_factor(r) for r in rs],
        "within after it": [f"{int(r.within_after)} of {int(r.rows_long)}" if pd.notna(r.rows_long) else ""
                            for r in rs],
        "verdicts same": [_claims(r) for r in rs]})


def runs_float(table: pd.DataFrame, tolerance: float) -> str:
    """The runs (:func:`runs_table`) as a LaTeX table float set sideways on a page of its own (package
    rotating), label ``tab:runs``; its caption counts the failed runs ("none" without one)."""
    frame = runs_latex(table, tolerance)
    body = render.table_to_latex(frame)  # the one-cell "not measured" tabular without a run
    if len(frame):  # the verdicts wrap
        body = with_columns(body, "l" * 12 + r">{\raggedright\arraybackslash}p{5.2em}")
    failed = int((table["role"] == FAILED).sum())
    caption = (r"\caption{Every measuring run in \texttt{data/}, per GPU model and study: the committed run (folder"
               r" \texttt{data/raw/<model>/}, every number of the paper), the second run that the reproduction check"
               r" compares (\emph{2nd, checked}) and further runs outside the check, each in \texttt{data/reproductions/}"
               r" in a folder named by its model and GPU (\texttt{results/runs.csv} names each), and failed runs, none"
               r" of whose rows was timed (" + (str(failed) if failed else "none") + r"); a run is one commit, GPU and"
               r" fingerprint. Each with its GPU's power limit and median SM clock at the end of the timed repetitions"
               r" (``not recorded'' for rows measured before the GPU's state was). Beside each run but the committed"
               r" one, the check's outcome against the committed rows: the rows within the tolerance of those timed in"
               r" both (per cent), the GPU factor (its device time over the committed one's, median over the rows of"
               r" 10\,\textmu{}s or more, 95\,\% bootstrap interval), how many of those rows lie within the tolerance"
               r" once it is divided out, and how many of its verdicts of Table~\ref{tab:claims} are the same"
               r" (\texttt{results/runs.csv} gives why a run is not reproduced, and its rows under 10\,\textmu{}s"
               r" within). Earlier runs, whose rows were replaced, are in the repository's history.}")
    return "\n".join([r"\begin{sidewaystable}", r"\centering", r"\scriptsize", r"\setlength{\tabcolsep}{3pt}", caption,
                      r"\label{tab:runs}", r"\fitwidth{" + body.rstrip("\n") + "}", r"\end{sidewaystable}"])


def _place(rank: int, n: int) -> str:
    """A run's place by time among ``n``: ``fastest of 3``, ``slowest of 3``, ``2nd fastest of 4``."""
    if n > 1 and rank == n:
        return f"slowest of {n}"
    return ("fastest" if rank == 1 else f"{rank}{'nd' if rank == 2 else 'rd' if rank == 3 else 'th'} fastest") + f" of {n}"


def tensorcore_macros(found: list[dict], table: pd.DataFrame, paper: str, sections: dict[str, dict]) -> dict[str, str]:
    """The bf16 GEMM at the largest FP8 size of the tensor-core sweep (``fp8`` of its section in ``sections``;
    M = N = K), whose TFLOP/s the paper quotes, on ``paper``'s runs with it timed (``found``: :func:`roles`,
    failed runs left out): ``RunsTensorcoreSize`` (8192), ``RunsTensorcoreBfMs`` (the committed run's device
    time, ms), ``RunsTensorcoreBfOtherMs`` (the other runs', fastest first, each with its unit and GPU),
    ``RunsTensorcoreBfRatio`` (their times over the committed run's), ``RunsTensorcoreBfPlace`` (the committed
    run's place, ``fastest of 3``), ``RunsTensorcoreFactorRange`` (the other runs' GPU factors against the
    committed one, over all of the study's rows; ``table``: :func:`runs_table`), each "n/a" without, and
    ``RunsTensorcoreText``, the end of a sentence that says them after "; " (or that the committed run is
    the only one; "." without it)."""
    section = sections.get("tensorcore")
    size = max(section["fp8"]) if section and section.get("fp8") else None
    times = []
    for r in found:
        if r["study"] != "tensorcore" or r["model"] != paper or r["role"] == FAILED:
            continue
        ms = [x["device_ms"] for x in r["rows"] if x["impl"] == "bf16" and x["status"] == "ok"
              and x.get("m") == x.get("n") == x.get("k") == size]
        if ms:
            times.append((float(ms[0]), r["role"] == COMMITTED, gpu_factor.run_gpu(r["rows"], "tensorcore")))
    times.sort()
    mine = next((i for i, (_, committed, _) in enumerate(times) if committed), None)
    other = [(ms, gpu) for ms, committed, gpu in times if not committed]
    place = sum(ms < times[mine][0] for ms, _ in other) + 1 if mine is not None else None  # a tie: the same place
    others = table[(table["study"] == "tensorcore") & (table["model"] == paper) & (table["role"] != COMMITTED)]
    out = {"RunsTensorcoreSize": str(size) if size else style.MISSING,
           "RunsTensorcoreBfMs": kit.fmt(times[mine][0], 3) if mine is not None else style.MISSING,
           "RunsTensorcoreBfOtherMs": kit.and_list([f"{ms:.3f}\\,ms on {gpu}" for ms, gpu in other]) or style.MISSING,
           "RunsTensorcoreBfRatio": (kit.span([ms / times[mine][0] for ms, _ in other])
                                     if mine is not None else style.MISSING),
           "RunsTensorcoreBfPlace": _place(place, len(times)) if mine is not None else style.MISSING,
           "RunsTensorcoreFactorRange": kit.span(others["factor"].tolist())}
    what = f"the bf16 GEMM at {size}$^3$, whose TFLOP/s the paper quotes,"
    if mine is None:
        out["RunsTensorcoreText"] = "."
    elif not other:
        out["RunsTensorcoreText"] = f"; {what} has one run, the committed one ({out['RunsTensorcoreBfMs']}\\,ms)."
    else:
        out["RunsTensorcoreText"] = (
            f"; on {what} the committed GPU ({times[mine][2]}) ran the {out['RunsTensorcoreBfPlace']} runs"
            f" ({out['RunsTensorcoreBfMs']}\\,ms against {out['RunsTensorcoreBfOtherMs']}:"
            f" {out['RunsTensorcoreBfRatio']} times as long), while the other runs' GPU factors over all of the"
            f" study's rows are {out['RunsTensorcoreFactorRange']}.")
    return out


def _started(run: list[dict]) -> str:
    """When ``run``'s first row was measured (``env.date``, ISO 8601 in UTC); "" without one."""
    return min((str(r["env"]["date"]) for r in run if (r.get("env") or {}).get("date")), default="")


def committed_first(found: list[dict]) -> dict[tuple[str, str], bool]:
    """Per model and study of ``found`` (:func:`roles`) with a committed run and another: whether the committed
    run was measured before every other run of its model and study (its first row before theirs)."""
    out = {}
    for key in dict.fromkeys((r["model"], r["study"]) for r in found):
        runs = [r for r in found if (r["model"], r["study"]) == key]
        mine = [_started(r["rows"]) for r in runs if r["role"] == COMMITTED]
        others = [_started(r["rows"]) for r in runs if r["role"] != COMMITTED]
        if mine and others and mine[0]:
            out[key] = all(mine[0] < t for t in others if t)
    return out


def _per_model(counts: list[tuple[str, int, int]], paper: str, noun: str) -> str:
    """``(model, k, n)`` counts as the abstract gives them, the paper's model first: ``16 of 18 verdicts on
    the H200 and 15 of 18 on the H100`` (``noun``: "verdicts"); :data:`kernels.paper.style.MISSING` without one."""
    ordered = sorted(counts, key=lambda x: x[0] != paper)
    return kit.and_list([f"{k} of {n}{f' {noun}' * (i == 0)} on the {rows.model_short(m)}"
                         for i, (m, k, n) in enumerate(ordered)]) or style.MISSING


def runs_macros(found: list[dict], table: pd.DataFrame, paper: str, sections: dict[str, dict],
                tolerance: float) -> dict[str, str]:
    """The paper's macros of the runs (``table``: :func:`runs_table` of ``found``): ``RunsCount`` (every run),
    ``RunsByModel`` (per model, ``11 on the H200 and 5 on the H100 SXM``), ``RunsCommitted``,
    ``RunsChecked``, ``RunsFurther`` and ``RunsFailed`` (per role), ``RunsCommittedFirst`` (of the models'
    studies with more than one run, in how many the committed run was measured first: ``10 of 10``,
    :func:`committed_first`), ``RunsTensorcoreFirst`` ("the earliest" or "not the earliest": the paper model's
    committed tensor-core run among its others; "n/a" without others), ``RunsClaimsSameByModel`` (per model, the
    paper's first, its checked second runs' verdicts the same as its committed rows': ``16 of 18 verdicts on the
    H200 and 15 of 18 on the H100``), ``RunsReproducedByModel`` (per model, the paper's first, how many
    of its studies' checked second runs the check judged reproduced: ``4 of 5 studies on the H200 and 4 of 5 on
    the H100``), ``RunsFactorRange`` (the lowest to the highest GPU factor of the runs but the committed ones:
    ``0.99--1.01``), :func:`tensorcore_macros` and ``RunsTable`` (:func:`runs_float`)."""
    counts = table.groupby("model", sort=False).size()
    by_role = table["role"].value_counts()
    first = committed_first(found)
    tensorcore = first.get((paper, "tensorcore"))
    checked = table[table["role"] == CHECKED].dropna(subset=["claims"])
    same = [(m, int(d["claims_same"].sum()), int(d["claims"].sum())) for m, d in checked.groupby("model", sort=False)]
    judged = table[(table["role"] == CHECKED) & table["outcome"].isin((REPRODUCED, NOT_REPRODUCED))]
    reproduced = [(m, int((d["outcome"] == REPRODUCED).sum()), len(d)) for m, d in judged.groupby("model", sort=False)]
    return {"RunsCount": str(len(table)),
            "RunsReproducedByModel": _per_model(reproduced, paper, "studies"),
            "RunsClaimsSameByModel": _per_model(same, paper, "verdicts"),
            "RunsCommittedFirst": f"{sum(first.values())} of {len(first)}",
            "RunsFactorRange": kit.span(table.loc[table["role"] != COMMITTED, "factor"].tolist()),
            "RunsTensorcoreFirst": (style.MISSING if tensorcore is None
                                    else "the earliest" if tensorcore else "not the earliest"),
            "RunsByModel": kit.and_list([f"{n} on the {rows.model_label(m)}" for m, n in counts.items()]),
            **{f"Runs{name}": str(int(by_role.get(role, 0)))
               for name, role in (("Committed", COMMITTED), ("Checked", CHECKED), ("Further", FURTHER),
                                  ("Failed", FAILED))},
            **tensorcore_macros(found, table, paper, sections),
            "RunsTable": runs_float(table, tolerance)}


def render_runs(committed: dict[str, list[dict]], by_model: dict[str, dict[str, str]],
                second: list[tuple[Path, str, list[dict]]], raw: str | Path, paper: str, studies,
                sections: dict[str, dict], checked: dict, tolerance: float, min_within: float,
                out_csv: str, out_tex: str) -> pd.DataFrame:
    """Write every run (:func:`roles` of ``committed``, ``second`` and ``checked``; :func:`runs_table`) to
    ``out_csv`` and its macros (:func:`runs_macros`) to ``out_tex``; returns the table."""
    found = roles(committed, second, raw, checked, studies)
    table = runs_table(found, committed, by_model, sections, tolerance, min_within)
    write_atomic(out_csv, table.to_csv(index=False))
    header = "% Generated by the rule `models` (kernels/paper/runs.py); do not edit."
    values = runs_macros(found, table, paper, sections, tolerance)
    write_atomic(out_tex, "\n".join([header, *render.macro_lines(values)]) + "\n")
    return table
