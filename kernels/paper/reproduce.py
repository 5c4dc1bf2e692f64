"""The reproduction check: a second run compared with the reference run, case by case.

A *run* is a folder of rows like ``data/raw/<gpu>/``: ``<root>/<study>/<impl>.jsonl``.
Rows of two runs are paired by their case (:func:`kernels.paper.rows.case_id`: study,
impl and every field that is not measured). Per case (:func:`compare`):

``ms_reference``, ``ms_candidate``
    each run's device time (``device_ms``: the median of ``device_times_ms``,
    the host's launch hidden; :mod:`kernels.core.timing`), which every timed row has.
``ratio``
    candidate over reference of the device time, the basis of the verdict;
    ``ratio_latency`` the same of the latency (``median_ms``, the host's
    launch included), reported beside it.
``band_lo_*``, ``band_hi_*``
    each run's noise band: the 10th and 90th percentiles of its device-time
    repetitions over their median.
``host_bound``
    either run's device time may hold host time (:func:`kernels.core.timing.host_bound`:
    the spin before the call was too short in more than 5 % of its repetitions);
    such rows are counted like any other and also reported apart.
``verdict``
    ``reproduced`` (|ratio - 1| <= tolerance), ``slower``, ``faster``,
    ``status changed`` (ok in one run and not in the other, or two different
    failures), ``missing`` (the reference has the case, the candidate not),
    ``new`` (only the candidate has it) or ``not timed`` (the same failure in both).

When the candidate was meant to measure only some cases (the quick profile),
``expected`` (:func:`kernels.paper.rows.configured_cases`, from the config section it ran) limits
the reference to them. The report splits the rows timed in both by the reference's device time
(:data:`kernels.paper.reproduce_tables.SIZE_CLASSES`). The claims are re-derived too (:func:`claim_verdicts`):
each study's ``report.macros`` runs on both runs' tidy tables (:func:`study_macros`) and every macro
whose name ends in ``Verdict`` is compared (:func:`compare_claims`).

Each study is judged in three terms, claims first (:func:`study_outcomes`): its
verdicts, its GPU factor (:mod:`kernels.paper.gpu_factor`) and its rows. :func:`kernels.paper.reproduce_report.check`
writes the comparison (CSV), a figure of the ratios, a LaTeX table of the rows outside the tolerance,
the paper's snippet with the ``Repro*`` macros, and the one-line summary (:func:`summary_line`). It
compares no study whose second-run rows are not one run of one code (:func:`not_one_run`), and the
summary names the compared studies whose reference rows are stale (:func:`stale_studies`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from kernels.core import timing
from kernels.paper import gpu_factor, provenance, render, rows, style
from kernels.paper import report_kit as kit
from kernels.paper.claims import (
    claim_labels,
    load_run,
)

VERDICTS = ("reproduced", "slower", "faster", "status changed", "missing", "new", "not timed")
COLUMNS = ["study", "impl", "case", "verdict", "status_reference", "status_candidate",
           "ms_reference", "ms_candidate", "ratio", "ratio_latency",
           "band_lo_reference", "band_hi_reference", "band_lo_candidate", "band_hi_candidate", "host_bound"]
TIMED = ("reproduced", "slower", "faster")


# ----------------------------------------------------------------------------
# inputs


def _env_values(run: list[dict], key: str) -> set[str]:
    return {str(r["env"][key]) for r in run if r.get("env", {}).get(key)}


def check_pair(candidate: list[dict], reference: list[dict], partial: bool = False) -> None:
    """Refuse a candidate that cannot be a second run of the reference: rows of another GPU model
    (``env.gpu_name``), or, unless ``partial`` (the quick profile, which may run on the reference's
    GPU), rows of a study measured on a GPU the reference's rows of that study were (``env.gpu_uuid``;
    the reference's own rows included): the paper calls the second run one of another GPU.

    Raises:
        ValueError: naming both runs' GPU models, or the GPUs they share.
    """
    cand_models, ref_models = _env_values(candidate, "gpu_name"), _env_values(reference, "gpu_name")
    if cand_models and ref_models and cand_models != ref_models:
        raise ValueError(f"the second run's rows are of {', '.join(sorted(cand_models))} (env.gpu_name) and the "
                         f"reference's of {', '.join(sorted(ref_models))}: a second run is of the same GPU model")
    for study in sorted({r["study"] for r in candidate}):
        shared = (_env_values([r for r in candidate if r["study"] == study], "gpu_uuid")
                  & _env_values([r for r in reference if r["study"] == study], "gpu_uuid"))
        if shared and not partial:
            raise ValueError(f"the second run's rows of {study} were measured on {', '.join(sorted(shared))}, as "
                             f"the reference's were: a second run is of another GPU (the quick profile may run "
                             f"on the same one)")


def _names(values, width: int) -> str:
    """``values`` sorted, each cut to ``width`` characters ("none" for a missing one), joined by commas."""
    return ", ".join(str(v)[:width] if v else "none" for v in sorted(values, key=str))


def not_one_run(run: list[dict]) -> dict[str, str]:
    """{study: why} of the studies whose rows in ``run`` are not one run of one code: rows of more
    than one commit, GPU or fingerprint (:func:`kernels.paper.provenance.runs_of`: the runs
    :func:`kernels.paper.provenance.study_state` counts when it calls rows "rows of N runs"). ``why`` names them: ``rows of 2 runs: fingerprints
    0123456789abcdef, cad599de9e81c6d2`` and, where more than one, ``; commits ...`` (7 digits) and
    ``; GPUs ...`` (``GPU-`` and 8 hex digits). The check compares no such study: a second run is one run."""
    out = {}
    for study in sorted({r["study"] for r in run}):
        envs = [r.get("env", {}) for r in run if r["study"] == study]
        runs = provenance.runs_of(envs)
        if len(runs) < 2:
            continue
        commits, gpus, fingerprints = map(set, zip(*runs))
        found = [f"fingerprint{'s' if len(fingerprints) > 1 else ''} {_names(fingerprints, 16)}"]
        found += [f"{what} {_names(values, width)}" for what, values, width in
                  (("commits", commits, 7), ("GPUs", gpus, 12)) if len(values) > 1]
        out[study] = f"rows of {len(runs)} runs: " + "; ".join(found)
    return out


def stale_studies(record: dict, studies: Sequence[str]) -> dict[str, str]:
    """{study: why} of ``studies`` whose committed rows are not current, as the workflow found them
    when it started (``record``: :func:`kernels.paper.provenance.states_record`, rule ``states``);
    ``why`` is the state's phrase, e.g. ``rows measured at abc1234 by other code or config``. A
    study without a state there (the smoke run's) is not stale. A comparison of such rows is one of
    the code that measured them, not of today's: the summary line says so (:func:`summary_line`)."""
    found = record["studies"]
    return {s: found[s]["why"] for s in sorted(studies)
            if found.get(s, {}).get("state", provenance.CURRENT) != provenance.CURRENT}


# ----------------------------------------------------------------------------
# the comparison


def verdict(ratio: float, tolerance: float) -> str:
    """``reproduced`` when ``ratio`` (candidate over reference) is within 1 ± ``tolerance``,
    else ``slower`` (above) or ``faster`` (below)."""
    if abs(ratio - 1.0) <= tolerance + 1e-12:  # 0.95 is within 5 %, whatever the float rounding
        return "reproduced"
    return "slower" if ratio > 1.0 else "faster"


def _band(times: list[float]) -> tuple[float, float]:
    """10th and 90th percentiles of ``times`` over their median."""
    t = np.asarray(times, dtype=float)
    median = float(np.median(t))
    return float(np.quantile(t, 0.1)) / median, float(np.quantile(t, 0.9)) / median


def compare_rows(ref: dict | None, cand: dict | None, tolerance: float) -> dict:
    """One record of :data:`COLUMNS` for a case with reference row ``ref`` and candidate
    row ``cand`` (either may be None, not both)."""
    any_row = ref if ref is not None else cand
    rec = {c: np.nan for c in COLUMNS}
    rec.update(study=any_row["study"], impl=any_row["impl"], case=rows.case_label(any_row),
               status_reference=ref["status"] if ref else None, status_candidate=cand["status"] if cand else None)
    if cand is None:
        return {**rec, "verdict": "missing"}
    if ref is None:
        return {**rec, "verdict": "new"}
    if ref["status"] != cand["status"]:
        return {**rec, "verdict": "status changed"}
    if ref["status"] != "ok":
        return {**rec, "verdict": "not timed"}
    rec.update(ms_reference=ref["device_ms"], ms_candidate=cand["device_ms"],
               ratio=cand["device_ms"] / ref["device_ms"], ratio_latency=cand["median_ms"] / ref["median_ms"])
    for name, row in (("reference", ref), ("candidate", cand)):
        rec[f"band_lo_{name}"], rec[f"band_hi_{name}"] = _band(row["device_times_ms"])
    rec["host_bound"] = any(timing.host_bound(r.get("timing", {}).get("spin_short"), len(r["device_times_ms"]))
                            for r in (ref, cand))
    rec["verdict"] = verdict(rec["ratio"], tolerance)
    return rec


def compare(candidate: list[dict], reference: list[dict], tolerance: float,
            expected: set[str] | None = None) -> pd.DataFrame:
    """Compare two runs case by case (module docstring); one row per case of either run.

    Args:
        candidate, reference: rows of the two runs (:func:`load_run`).
        tolerance: relative tolerance of a reproduced time (0.05: within ±5 %).
        expected: case ids the candidate was meant to measure; reference rows of
            other cases are left out. None: every reference row is compared.

    Returns:
        A DataFrame of :data:`COLUMNS`, sorted by study, impl and case.
    """
    ref = {rows.case_id(r): r for r in reference}
    if expected is not None:
        ref = {k: r for k, r in ref.items() if k in expected}
    cand = {rows.case_id(r): r for r in candidate}
    records = [compare_rows(ref.get(k), cand.get(k), tolerance) for k in sorted(set(ref) | set(cand))]
    table = pd.DataFrame.from_records(records, columns=COLUMNS)
    return table.sort_values(["study", "impl", "case"], kind="stable").reset_index(drop=True)


# ----------------------------------------------------------------------------
# the claims


def compare_claims(reference: dict[str, str], candidate: dict[str, str], partial: bool = False) -> pd.DataFrame:
    """The verdicts of both runs side by side: columns ``claim``, ``reference``,
    ``candidate``, ``same``; a verdict a run lacks reads "n/a". Claims whose
    reference verdict decides nothing ("n/a": no rows for it in the reference's cases; "not tested":
    :func:`kernels.paper.style.decided`) are left out: nothing to re-derive. With ``partial`` (the quick profile, which measures a part of
    each study), so are those the candidate cannot derive from its own cases ("n/a" there):
    they are not in its profile, not a difference. Column ``on_line``: two verdicts that differ where
    either run has a value on its claim's line (:func:`kernels.paper.report_kit.claim_verdict`: an
    interval that holds the claimed bound), which that run cannot place on either side: reported as
    such, neither the same nor different."""
    names = sorted(n for n in set(reference) | set(candidate) if style.decided(reference.get(n, "n/a"))
                   and not (partial and candidate.get(n, "n/a") == "n/a"))
    table = pd.DataFrame({"claim": names, "reference": [reference[n] for n in names],
                          "candidate": [candidate.get(n, "n/a") for n in names]})
    same = table["reference"] == table["candidate"]
    line = [differs_on_the_line(str(a), str(b)) for a, b in zip(table["reference"], table["candidate"])]
    return table.assign(same=same, on_line=pd.Series(line, index=table.index, dtype=bool))


#: The words of a verdict with a value on its claim's line (:func:`kernels.paper.report_kit.claim_verdict`).
ON_THE_LINE = "on the line"


def verdict_parts(verdict: str) -> tuple[str, int, int, int]:
    """A verdict (:func:`kernels.paper.report_kit.claim_verdict`) as its kind ("partly holds", "holds",
    ...), its counts k and n ("(k of n)", 0 without), and how many of its values are on the line."""
    head, _, tail = verdict.partition("; ")
    line = int(m.group(1)) if (m := re.match(r"(\d+) on the line", tail)) else 0
    if head == ON_THE_LINE:
        return head, 0, 0, 1
    counts = re.search(r" \((\d+) of (\d+)\)$", head)
    kind = head[:counts.start()] if counts else head
    return kind, *(map(int, counts.groups()) if counts else (0, 0)), line


def differs_on_the_line(first: str, second: str) -> bool:
    """Whether two verdicts on a claim differ only by values on its line: they differ, either has a
    value on the line, and they are of one kind ("partly holds", "not reached", ...) with counts no
    further apart than the values on the line (or one is wholly "on the line"). A kind that changes
    otherwise ("not reached" against "exceeded") is a difference, whatever lies on the line."""
    if first == second:
        return False
    a, b = verdict_parts(first), verdict_parts(second)
    line = a[3] + b[3]
    if not line:
        return False
    if ON_THE_LINE in (a[0], b[0]):
        return True
    return a[0] == b[0] and abs(a[1] - b[1]) <= line and abs(a[2] - b[2]) <= line


# ----------------------------------------------------------------------------
# outputs


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    counts = table["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


#: Each verdict's reproduction status in the claims table (macro ``Repro<verdict macro>``): the same in
#: the second run, or not compared (the reference decides nothing: n/a, or, in the quick profile, the
#: second run measured none of its cases; or its study's second run was refused, not being one run),
#: or no second run of its study's code. A different verdict reads "2nd run: " and the second run's verdict.
SAME, DIFFERENT, NOT_COMPARED, NO_SECOND_RUN = "2nd run: same", "2nd run: ", "2nd run: not compared", "no 2nd run"


def claim_status(claims: pd.DataFrame, compared, studies) -> dict[str, str]:
    """Each verdict of the claims table (``report.CLAIMS`` of each study in ``studies``) with its
    reproduction status, as the macro ``Repro<verdict macro>`` (``ReproSwigluClaimLatencyVerdict``):
    a verdict in ``claims`` (:func:`compare_claims`) reads :data:`SAME`, or :data:`DIFFERENT` followed
    by the second run's verdict; another of a study whose rows were compared, or whose second run was
    refused (``compared``), :data:`NOT_COMPARED`; one of any other study, :data:`NO_SECOND_RUN`."""
    reference = dict(zip(claims["claim"], claims["reference"]))
    candidate = dict(zip(claims["claim"], claims["candidate"]))
    out = {}
    for study in studies:
        for name in claim_labels([study]):
            if name in reference:
                status = SAME if reference[name] == candidate[name] else DIFFERENT + candidate[name]
                if differs_on_the_line(reference[name], candidate[name]) and ON_THE_LINE not in candidate[name]:
                    status += f" ({ON_THE_LINE} in the first)"
            else:
                status = NOT_COMPARED if study in compared else NO_SECOND_RUN
            out[f"Repro{name}"] = render.escape_latex(status)
    return out


def rows_needed(timed: int, min_within: float) -> int:
    """The fewest of ``timed`` rows that must be reproduced: ``min_within`` of them, rounded up."""
    return math.ceil(min_within * timed)


def _reasons(table: pd.DataFrame, claims: pd.DataFrame, min_within: float, tolerance: float | None = None) -> list[str]:
    """Why the rows of ``table`` with ``claims`` are not reproduced (empty when they are): the share
    within the tolerance below ``min_within`` (with a ``tolerance``, also once the study's GPU factor
    is divided out: :func:`kernels.paper.gpu_factor.study_factor`), rows missing or of changed status,
    verdicts that differ."""
    n = verdict_counts(table)
    timed = n["reproduced"] + n["slower"] + n["faster"]
    out = []
    if not timed:
        out.append("no row timed in both runs")
    elif n["reproduced"] < rows_needed(timed, min_within):
        f = gpu_factor.study_factor(table, tolerance) if tolerance is not None else None
        if f is None or f["within_after"] < rows_needed(f["rows_long"], min_within):
            after = (f", {percent(f['within_after'], f['rows_long'])} % after the GPU factor {f['factor']:.2f}"
                     if f is not None else "")
            out.append(f"{percent(n['reproduced'], timed)} % of rows within{after}, needs {100 * min_within:g} %")
    out += [f"{n[v]} {v}" for v in ("missing", "status changed") if n[v]]
    different = int((~claims["same"] & ~claims["on_line"]).sum())
    if different:
        out.append(f"{different} verdict{'s' if different > 1 else ''} different")
    return out


def study_claims(table: pd.DataFrame, claims: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each study of ``table`` with its claims (verdict macros named after it, ``Swiglu...Verdict``: each
    report's prefix :func:`kernels.paper.report_kit.camel`; a claim named after no study of the table
    counts for each)."""
    prefixes = {study: kit.camel(study) for study in table["study"].unique()}
    owner = claims["claim"].astype(str).map(
        lambda claim: next((s for s, prefix in prefixes.items() if claim.startswith(prefix)), None))
    return {study: claims[(owner == study) | owner.isna()] for study in prefixes}


def study_outcomes(table: pd.DataFrame, claims: pd.DataFrame, min_within: float,
                   tolerance: float | None = None) -> dict[str, list[str]]:
    """Each study of ``table`` with its rows and its claims (:func:`study_claims`): why it is not
    reproduced (:func:`_reasons`; with a ``tolerance``, its rows may agree once its GPU factor is
    divided out), an empty list where it is. A study is the unit of reproduction: each is checked
    against ``min_within`` on its own."""
    return {study: _reasons(table[table["study"] == study], mine, min_within, tolerance)
            for study, mine in study_claims(table, claims).items()}


def reproduced(outcomes: dict[str, list[str]], refused: dict[str, str] | None = None) -> bool:
    """Whether the runs are reproduced: every study of :func:`study_outcomes` is (and there is one),
    and no study's second run was refused (``refused``: :func:`not_one_run`)."""
    return bool(outcomes) and not any(outcomes.values()) and not refused


def is_reproduced(table: pd.DataFrame, claims: pd.DataFrame, min_within: float,
                  tolerance: float | None = None) -> bool:
    """True when every study of ``table`` is (:func:`study_outcomes`): at least ``min_within`` of
    its rows timed in both runs are reproduced (as measured, or with a ``tolerance`` once its GPU
    factor is divided out), none is missing or changed status, and each of its claims' verdicts is the same."""
    return reproduced(study_outcomes(table, claims, min_within, tolerance))


def outcome_by_study(outcomes: dict[str, list[str]], refused: dict[str, str] | None = None) -> str:
    """Each study's outcome (:func:`study_outcomes`) in the paper's words, e.g. ``long context:
    reproduced; SwiGLU: not reproduced (91.0 % of rows within, needs 95 %)``
    (:func:`kernels.paper.style.study_name`), then each study whose second run was refused
    (``refused``: :func:`not_one_run`), ``Gated DeltaNet: not compared (rows of 2 runs: ...)``."""
    return "; ".join([*(f"{style.study_name(study)}: " + (f"not reproduced ({', '.join(why)})" if why else "reproduced")
                        for study, why in outcomes.items()),
                      *(f"{style.study_name(study)}: not compared ({why})" for study, why in (refused or {}).items())])


def percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` in per cent with one decimal, rounded down (a share checked against a
    threshold never reads above what it is: 588 of 616 is 95.4); "n/a" when ``whole`` is 0."""
    return f"{math.floor(1000 * part / whole) / 10:.1f}" if whole else "n/a"


def _by_study(table: pd.DataFrame, verdicts) -> str:
    parts = []
    for study, g in table[table["verdict"].isin(verdicts)].groupby("study"):
        detail = ", ".join(f"{int((g['verdict'] == v).sum())} {v}" for v in verdicts if (g["verdict"] == v).any())
        parts.append(f"{study} {len(g)}" + (f" ({detail})" if len(verdicts) > 1 else ""))
    return ", ".join(parts)


def summary_line(table: pd.DataFrame, claims: pd.DataFrame, tolerance: float, min_within: float,
                 refused: dict[str, str] | None = None, stale: dict[str, str] | None = None) -> str:
    """The one line a reviewer reads, in the check's three terms, claims first: e.g. ``reproduced:
    claims: 4 of 4 verdicts the same; GPU factor: toy 1.01 [1.00, 1.02] (400 of 407 within after it);
    391 of 407 rows within ±5 % of device time (96.0 %)``, or ``NOT reproduced: ...`` with where not:
    the studies not reproduced and why (:func:`study_outcomes`: a study whose rows agree once its GPU
    factor is divided out is reproduced), those whose second run was refused (``refused``, {study:
    why}: :func:`not_one_run`; ``not compared: gdn (rows of 2 runs: ...)``), rows outside per study,
    missing, status changed. Last, the studies of ``table`` whose reference rows are stale (``stale``,
    {study: why}: :func:`stale_studies`): ``compared although stale: gdn (rows measured at abc1234 by
    other code or config)``."""
    n = verdict_counts(table)
    timed = n["reproduced"] + n["slower"] + n["faster"]
    outcomes = study_outcomes(table, claims, min_within, tolerance)
    ok = reproduced(outcomes, refused)
    same = int(claims["same"].sum())
    claim_part = f"claims: {same} of {len(claims)} verdicts the same" if len(claims) else "claims: none to re-derive"
    for words, rows_of in ((ON_THE_LINE, claims[claims["on_line"]]),
                           ("different", claims[~claims["same"] & ~claims["on_line"]])):
        if len(rows_of):
            claim_part += f", {words}: " + ", ".join(
                f"{r.claim} ('{r.reference}' -> '{r.candidate}')" for r in rows_of.itertuples())
    parts = [claim_part]
    factors = gpu_factor.factor_table(table, tolerance)
    if (factors["rows"] > 0).any():
        parts.append("GPU factor: " + ", ".join(
            f"{f.study} {f.factor:.2f} [{f.low:.2f}, {f.high:.2f}] ({f.within_after} of {f.rows_long} within after it)"
            for f in factors.itertuples() if f.rows))
    if timed:
        parts.append(f"{n['reproduced']} of {timed} rows within ±{100 * tolerance:g} % of "
                     f"device time ({percent(n['reproduced'], timed)} %)")
    else:
        parts.append("no row timed in both runs")
    failed = [f"{study} ({', '.join(why)})" for study, why in outcomes.items() if why]
    if failed:
        parts.append("not reproduced: " + ", ".join(failed))
    if refused:
        parts.append("not compared: " + ", ".join(f"{study} ({why})" for study, why in refused.items()))
    if n["slower"] + n["faster"] and not ok:
        parts.append("outside: " + _by_study(table, ("slower", "faster")))
    for v in ("missing", "status changed"):
        if n[v]:
            parts.append(f"{v}: {n[v]} ({_by_study(table, (v,))})")
    old = [f"{study} ({why})" for study, why in (stale or {}).items() if study in outcomes]
    if old:
        parts.append("compared although stale: " + ", ".join(old))
    return ("reproduced: " if ok else "NOT reproduced: ") + "; ".join(parts)


def second_runs(reproductions: str | Path, studies) -> list[tuple[Path, str, list[dict]]]:
    """Every second and third run in ``reproductions`` (``data/reproductions/<name>/<study>/*.jsonl``):
    ``(folder, study, its rows)`` per folder and study of ``studies`` with rows there, sorted by folder,
    then in ``studies``' order.

    Raises:
        ValueError: a row fails its schema (:func:`kernels.paper.claims.load_run`).
    """
    out = []
    for folder in sorted(p for p in Path(reproductions).glob("*") if p.is_dir()):
        for study in studies:
            paths = sorted(str(p) for p in Path(folder, study).glob("*.jsonl"))
            if paths:
                out.append((folder, study, load_run(paths)))
    return out
