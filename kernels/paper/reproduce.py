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
the reference to them. :func:`size_table` splits the rows timed in both by the
reference's device time (:data:`SIZE_CLASSES`). The claims are re-derived too (:func:`claim_verdicts`):
each study's ``report.macros`` runs on both runs' tidy tables (:func:`study_macros`) and every macro
whose name ends in ``Verdict`` is compared (:func:`compare_claims`); the abstract's numbers, each
study's ``report.HEADLINES``, are set side by side (:func:`headline_table`).

:func:`check` writes the comparison (CSV), a figure of the ratios, a LaTeX
table of the rows outside the tolerance, the paper's snippet with the
``Repro*`` macros (:func:`numbers`), and the one-line summary (:func:`summary_line`). It compares
no study whose second-run rows are not one run of one code (:func:`not_one_run`), and the summary
names the compared studies whose reference rows are stale (:func:`stale_studies`).
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import PurePosixPath

import numpy as np
import pandas as pd

from kernels.core import timing
from kernels.paper import provenance, render, rows, style
from kernels.paper import report_kit as kit
from kernels.paper.claims import claim_labels, claim_verdicts, load_run, study_macros, tidy_tables
from kernels.core.files import write_atomic

log = logging.getLogger("kernels.paper.reproduce")

VERDICTS = ("reproduced", "slower", "faster", "status changed", "missing", "new", "not timed")
#: Verdicts that make a run not reproduced; the table lists these rows, in this order.
OUTSIDE = ("status changed", "missing", "slower", "faster")
#: Marker and colour of each study's cases in the figure, in turn (one per study of the project;
#: a study beyond them starts the list again).
STUDY_MARKERS = (("o", "#4C72B0"), ("s", "#DD8452"), ("^", "#55A868"), ("D", "#C44E52"), ("v", "#8172B3"))
#: Rows shown in the LaTeX table of the rows outside the tolerance (with case labels of two or three
#: lines, they share a page with the table of those rows per implementation); the rest are counted
#: (every row of both runs is in the rule's CSV, results/reproduction.csv).
TABLE_ROWS = 20
COLUMNS = ["study", "impl", "case", "verdict", "status_reference", "status_candidate",
           "ms_reference", "ms_candidate", "ratio", "ratio_latency",
           "band_lo_reference", "band_hi_reference", "band_lo_candidate", "band_hi_candidate", "host_bound"]
#: Classes of the reference's device time, ms (lower bounds; the last is open), with their labels.
SIZE_CLASSES = ((0.0, "below 10 µs"), (0.01, "10–100 µs"), (0.1, "0.1–1 ms"), (1.0, "1–10 ms"),
                (10.0, "10 ms and more"))
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


def headline_table(reference: dict[str, str], candidate: dict[str, str], studies) -> pd.DataFrame:
    """The abstract's numbers of both runs (each study's ``report.HEADLINES``, in ``studies``' order,
    from :func:`study_macros` of each run): columns ``number`` (its words), ``reference`` and
    ``second run`` (the macros' text, followed by its interval where the run has one, the macro of the
    same name with ``Ci``, :func:`kernels.paper.report_kit.interval`; "n/a" where a run lacks it)."""
    def text(macros: dict[str, str], name: str) -> str:
        value = macros.get(name, style.MISSING)
        return f"{value} {macros[name + 'Ci']}" if value != style.MISSING and name + "Ci" in macros else value

    rows = []
    for study in studies:
        for name, words in getattr(render.report_module(study), "HEADLINES", {}).items():
            rows.append({"number": words, "reference": text(reference, name), "second run": text(candidate, name)})
    return pd.DataFrame(rows, columns=["number", "reference", "second run"])


def compare_claims(reference: dict[str, str], candidate: dict[str, str], partial: bool = False) -> pd.DataFrame:
    """The verdicts of both runs side by side: columns ``claim``, ``reference``,
    ``candidate``, ``same``; a verdict a run lacks reads "n/a". Claims whose
    reference verdict is "n/a" (no rows for it in the reference's cases) are
    left out: nothing to re-derive. With ``partial`` (the quick profile, which measures a part of
    each study), so are those the candidate cannot derive from its own cases ("n/a" there):
    they are not in its profile, not a difference."""
    names = sorted(n for n in set(reference) | set(candidate) if reference.get(n, "n/a") != "n/a"
                   and not (partial and candidate.get(n, "n/a") == "n/a"))
    table = pd.DataFrame({"claim": names, "reference": [reference[n] for n in names],
                          "candidate": [candidate.get(n, "n/a") for n in names]})
    return table.assign(same=table["reference"] == table["candidate"])


# ----------------------------------------------------------------------------
# outputs


def _counts(table: pd.DataFrame) -> dict[str, int]:
    counts = table["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


def size_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows timed in both runs by the reference's device time (:data:`SIZE_CLASSES`):
    columns ``device time`` (the class), ``rows``, ``within`` (reproduced), ``within %``,
    ``host-bound`` (rows of :func:`kernels.core.timing.host_bound` in either run) and ``within,
    host-free`` (reproduced rows among the others); empty classes are left out."""
    timed = table[table["verdict"].isin(TIMED)]
    bounds = [lo for lo, _ in SIZE_CLASSES] + [np.inf]
    cls = pd.cut(timed["ms_reference"].astype(float), bounds, right=False, labels=[lab for _, lab in SIZE_CLASSES])
    out = []
    for label, g in timed.groupby(cls, observed=True):
        ok, host = g["verdict"] == "reproduced", g["host_bound"].astype(bool)
        out.append({"device time": label, "rows": len(g), "within": int(ok.sum()),
                    "within %": percent(int(ok.sum()), len(g)), "host-bound": int(host.sum()),
                    "within, host-free": f"{int((ok & ~host).sum())} of {int((~host).sum())}"})
    return pd.DataFrame(out)


def impl_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per study and implementation with a row outside the tolerance: ``rows`` timed in both,
    ``slower``, ``faster``, ``host-bound`` among those outside, and the ``median ratio`` of
    the device time over all its timed rows; most rows outside first."""
    timed = table[table["verdict"].isin(TIMED)]
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
                         "same": claims["same"].map({True: "yes", False: "no"})})


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
            else:
                status = NOT_COMPARED if study in compared else NO_SECOND_RUN
            out[f"Repro{name}"] = render.escape_latex(status)
    return out


def rows_needed(timed: int, min_within: float) -> int:
    """The fewest of ``timed`` rows that must be reproduced: ``min_within`` of them, rounded up."""
    return math.ceil(min_within * timed)


def _reasons(table: pd.DataFrame, claims: pd.DataFrame, min_within: float) -> list[str]:
    """Why the rows of ``table`` with ``claims`` are not reproduced (empty when they are): the share
    within the tolerance below ``min_within``, rows missing or of changed status, verdicts that differ."""
    n = _counts(table)
    timed = n["reproduced"] + n["slower"] + n["faster"]
    out = []
    if not timed:
        out.append("no row timed in both runs")
    elif n["reproduced"] < rows_needed(timed, min_within):
        out.append(f"{percent(n['reproduced'], timed)} % of rows within, needs {100 * min_within:g} %")
    out += [f"{n[v]} {v}" for v in ("missing", "status changed") if n[v]]
    different = int((~claims["same"]).sum())
    if different:
        out.append(f"{different} verdict{'s' if different > 1 else ''} different")
    return out


def study_outcomes(table: pd.DataFrame, claims: pd.DataFrame, min_within: float) -> dict[str, list[str]]:
    """Each study of ``table`` with its rows and its claims (verdict macros named after it,
    ``Swiglu...Verdict``: each report's prefix :func:`kernels.paper.report_kit.camel`; a claim named
    after no study of the table counts for each): why it is not reproduced (:func:`_reasons`), an
    empty list where it is. A study is the unit of reproduction: each is checked against
    ``min_within`` on its own."""
    prefixes = {study: kit.camel(study) for study in table["study"].unique()}
    owner = claims["claim"].astype(str).map(
        lambda claim: next((s for s, prefix in prefixes.items() if claim.startswith(prefix)), None))
    return {study: _reasons(table[table["study"] == study], claims[(owner == study) | owner.isna()], min_within)
            for study in prefixes}


def reproduced(outcomes: dict[str, list[str]], refused: dict[str, str] | None = None) -> bool:
    """Whether the runs are reproduced: every study of :func:`study_outcomes` is (and there is one),
    and no study's second run was refused (``refused``: :func:`not_one_run`)."""
    return bool(outcomes) and not any(outcomes.values()) and not refused


def is_reproduced(table: pd.DataFrame, claims: pd.DataFrame, min_within: float) -> bool:
    """True when every study of ``table`` is (:func:`study_outcomes`): at least ``min_within`` of
    its rows timed in both runs are reproduced, none is missing or changed status, and each of its
    claims' verdicts is the same."""
    return reproduced(study_outcomes(table, claims, min_within))


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
    """The one line a reviewer reads, e.g. ``reproduced: 391 of 407 rows within ±5 % of
    device time (96.0 %); claims: 4 of 4 verdicts the same``, or ``NOT reproduced: ...`` with
    where not: the studies not reproduced and why (:func:`study_outcomes`), those whose second run
    was refused (``refused``, {study: why}: :func:`not_one_run`; ``not compared: gdn (rows of 2 runs:
    ...)``), rows outside per study, missing, status changed, the claims that differ. Last, the
    studies of ``table`` whose reference rows are stale (``stale``, {study: why}: :func:`stale_studies`):
    ``compared although stale: gdn (rows measured at abc1234 by other code or config)``."""
    n = _counts(table)
    timed = n["reproduced"] + n["slower"] + n["faster"]
    outcomes = study_outcomes(table, claims, min_within)
    ok = reproduced(outcomes, refused)
    if timed:
        rows_part = (f"{n['reproduced']} of {timed} rows within ±{100 * tolerance:g} % of "
                     f"device time ({percent(n['reproduced'], timed)} %)")
    else:
        rows_part = "no row timed in both runs"
    parts = [rows_part]
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
    same = int(claims["same"].sum())
    claim_part = f"claims: {same} of {len(claims)} verdicts the same" if len(claims) else "claims: none to re-derive"
    different = claims[~claims["same"]]
    if len(different):
        claim_part += ", different: " + ", ".join(
            f"{r.claim} ('{r.reference}' -> '{r.candidate}')" for r in different.itertuples())
    parts.append(claim_part)
    old = [f"{study} ({why})" for study, why in (stale or {}).items() if study in outcomes]
    if old:
        parts.append("compared although stale: " + ", ".join(old))
    return ("reproduced: " if ok else "NOT reproduced: ") + "; ".join(parts)


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
    ``ReproClaimsSame``, ``ReproClaimsCompared``, ``ReproClaimsDifferent``
    (the claims in ``labels``' words, else their macro names; or "none"), ``ReproOutcome`` (reproduced / not reproduced:
    reproduced when every study is and no study's second run was refused, ``refused``: :func:`not_one_run`),
    ``ReproOutcomeByStudy`` (:func:`outcome_by_study`, the refused studies included) and
    ``ReproCandidate`` (the second run's folders: :func:`folders_latex`). Also ``ReproRowsWithinHostFree`` /
    ``ReproRowsComparedHostFree`` / ``ReproPercentWithinHostFree`` (the rows whose device time is
    host-free in both runs), ``ReproRowsWithinLatency`` / ``ReproPercentWithinLatency`` (the
    rows compared by latency instead), ``ReproRowsOutside`` with ``ReproRowsOutsideBelowTenUs``
    and ``ReproRowsOutsideFromOneMs`` (by the reference's device time), ``ReproMinWithinPct``
    (the share of each study's rows the check asks, %),
    ``ReproRowsNotTimed`` (the cases that neither run timed, left out of the check),
    ``ReproOutsideFromOneMsList`` (the rows of a millisecond or more outside the tolerance: each
    implementation with the reference's device time and the ratio), and ``ReproRuns`` (the second
    run's commits and GPUs by study, :func:`second_runs` of its rows ``run``).
    Every share is :func:`percent`'s."""
    def within(t):
        timed = t[t["verdict"].isin(TIMED)]
        good = int((timed["verdict"] == "reproduced").sum())
        return str(good), str(len(timed)), percent(good, len(timed))

    out = {}
    out["ReproRowsWithin"], out["ReproRowsCompared"], out["ReproPercentWithin"] = within(table)
    out["ReproMinWithinPct"] = f"{100 * min_within:g}"
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
    lat = table.loc[table["verdict"].isin(TIMED), "ratio_latency"].astype(float)
    lat_ok = sum(verdict(r, tolerance) == "reproduced" for r in lat)
    out["ReproRowsWithinLatency"] = str(lat_ok)
    out["ReproPercentWithinLatency"] = percent(lat_ok, len(lat))
    free = table[~table["host_bound"].fillna(False).astype(bool)]
    out["ReproRowsWithinHostFree"], out["ReproRowsComparedHostFree"], out["ReproPercentWithinHostFree"] = within(free)
    by_study = []
    for study, g in table.groupby("study", sort=False):
        name = kit.camel(study)
        out[f"ReproRowsWithin{name}"], out[f"ReproRowsCompared{name}"], out[f"ReproPercentWithin{name}"] = within(g)
        by_study.append(f"{style.study_name(study)} {out[f'ReproPercentWithin{name}']}\\,\\%")
    out["ReproByStudy"] = ", ".join(by_study) or "none"
    out["ReproStudies"] = kit.and_list([style.study_name(s) for s in table["study"].unique()]) or "none"
    n = _counts(table)
    outcomes = study_outcomes(table, claims, min_within)
    different = [(labels or {}).get(c, c) for c in claims.loc[~claims["same"], "claim"]]
    out.update(ReproRowsMissing=str(n["missing"]), ReproRowsStatusChanged=str(n["status changed"]),
               ReproTolerancePct=f"{100 * tolerance:g}",
               ReproClaimsSame=str(int(claims["same"].sum())), ReproClaimsCompared=str(len(claims)),
               ReproClaimsDifferent=render.escape_latex("; ".join(different) if different else "none"),
               ReproOutcome="reproduced" if reproduced(outcomes, refused) else "not reproduced",
               ReproOutcomeByStudy=render.escape_latex(outcome_by_study(outcomes, refused)),
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


def _columns(tabular: str, spec: str) -> str:
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
    timed = table[table["verdict"].isin(TIMED)]
    ax.axhspan(1 - tolerance, 1 + tolerance, color="0.85", zorder=0, lw=0)
    ax.axhline(1.0, color="0.5", lw=0.6, zorder=1)
    for (study, d), (marker, color) in zip(timed.groupby("study"), itertools.cycle(STUDY_MARKERS)):
        within = int((d["verdict"] == "reproduced").sum())
        ax.scatter(d["ms_reference"].astype(float), d["ratio"].astype(float), s=9, marker=marker, color=color,
                   zorder=2, linewidths=0, alpha=0.8,
                   label=f"{style.study_label(study)} ({within} of {len(d)})")
    n = _counts(table)
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


#: The threats section's sentences on the second run (macro ``ReproThreats``), given one.
THREATS = (r"Second cold runs on other GPUs than their studies' rows (\ReproRuns; \ReproCandidate,"
           r" Appendix~\ref{sec:reproducing}) agree within $\pm$\ReproTolerancePct\,\% of device time"
           r" for \ReproRowsWithin{} of the \ReproRowsCompared{} rows timed in both (\ReproPercentWithin\,\%; the check"
           r" asks \ReproMinWithinPct\,\% of each study's rows; outcome: \ReproOutcomeByStudy), and \ReproClaimsSame{} of the"
           r" \ReproClaimsCompared{} verdicts of Table~\ref{tab:claims} come out the same from both. By latency, the"
           r" host's launch included, only \ReproRowsWithinLatency{} of those rows agree (\ReproPercentWithinLatency\,\%):"
           r" the host overheads and latencies quoted in this paper are those of one host.")


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
            impls: pd.DataFrame, claims: pd.DataFrame, headlines: pd.DataFrame, without=()) -> str:
    """The appendix paragraph on the second run with its figure and tables (``values``:
    :func:`macros`, defined in :func:`numbers`; only their names are used here; ``studies``: those compared; ``has_outside``: whether any row is
    outside the tolerance; ``sizes``: :func:`size_table`; ``impls``: :func:`impl_table`;
    ``claims``: :func:`compare_claims`; ``headlines``: :func:`headline_table`; ``without``: the
    studies without a second run of their code, which the paragraph names)."""
    per_study = ", ".join(rf"{style.study_name(study)} \ReproRowsWithin{kit.camel(study)}{{}} of"
                          rf" \ReproRowsCompared{kit.camel(study)}{{}} (\ReproPercentWithin{kit.camel(study)}\,\%)"
                          for study in studies)
    table_ref = (r"Table~\ref{tab:reproduction_impls} counts the rows outside it per implementation and"
                 r" Table~\ref{tab:reproduction} lists them, worst first" if has_outside else "no row is outside it")
    text = "\n".join([
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
        r"case up before timing it, so only the cases' one-off costs differ there. Re-derived from each run, \ReproClaimsSame{} of the \ReproClaimsCompared{}",
        r"verdicts of Table~\ref{tab:claims} that both runs decide are the same (Table~\ref{tab:reproduction_claims};",
        r"different: \ReproClaimsDifferent); Table~\ref{tab:reproduction_headlines} sets the abstract's",
        r"numbers of the two runs side by side.",
        r"The check counts a study as reproduced when at least \ReproMinWithinPct\,\% of its rows timed in both",
        r"agree within $\pm$\ReproTolerancePct\,\% of the median device time, none of its rows is",
        r"missing or changed status and each of its verdicts is the same, and the runs as reproduced when every",
        r"study is (config \texttt{reproduce}); the",
        r"\ReproRowsNotTimed{} cases that neither run timed, with the same status in both, are left out.",
        r"Shares are given to one decimal, rounded down. Outcome: \ReproOutcome{} (\ReproOutcomeByStudy)."])
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
               r"\label{tab:reproduction_sizes}", render.table_to_latex(sizes).rstrip("\n"), r"\end{table}",
               r"\begin{table}[tbp]", r"\centering", r"\small",
               r"\caption{The verdicts of Table~\ref{tab:claims} derived from each run.}",
               r"\label{tab:reproduction_claims}",
               _columns(render.table_to_latex(claims_latex(claims, claim_labels(studies))),
                        r"p{0.48\linewidth}" + 2 * r">{\raggedright\arraybackslash}p{0.16\linewidth}" + "l"),
               r"\end{table}",
               r"\begin{table}[tbp]", r"\centering", r"\small",
               r"\caption{The numbers of the abstract from each run.}", r"\label{tab:reproduction_headlines}",
               _columns(render.table_to_latex(headlines.set_index("number")), r"p{0.45\linewidth}ll"),
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


def no_second_run_numbers(other_code: str | None = None, studies=()) -> str:
    """The macros with :func:`no_second_run` (rule ``reproduction_none``): the threats section's
    sentence and each verdict's reproduction status of the claims table (:func:`claim_status`,
    :data:`NO_SECOND_RUN` for every verdict of ``studies``)."""
    what = "No second run of the code that measured these data" if other_code else \
        "No second run of these measurements"
    return ("% Generated by the rule `reproduction_none` (kernels/paper/reproduce.py); do not edit.\n"
            "\\newif\\ifReproRun  % false: no second run\n"
            "\\newif\\ifReproOutside  % false: no rows outside the tolerance\n"
            + "\n".join(render.macro_lines({
                "ReproThreats": f"{what} is committed, so their variation across GPUs and hosts is not"
                                " quantified here.",
                **claim_status(pd.DataFrame(columns=["claim", "reference", "candidate"]), (), studies)})) + "\n")


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
            its macros (:func:`numbers`).

    Returns:
        The summary line (also logged).

    Raises:
        ValueError: the candidate is no second run of the reference (:func:`check_pair`), or a
            row fails its schema (:func:`load_run`).
    """
    cand, ref = load_run(candidate_files), load_run(reference_files)
    check_pair(cand, ref, partial)
    refused = not_one_run(cand)
    for study, why in refused.items():
        log.warning("the second run of %s is not compared: %s (one run is one commit, GPU and fingerprint)",
                    study, why)
    cand, ref = ([r for r in run if r["study"] not in refused] for run in (cand, ref))
    expected = rows.configured_cases(sections) if sections is not None else None
    table = compare(cand, ref, tolerance, expected)
    in_scope = {rows.case_id(r) for r in ref} if expected is None else expected
    ref_macros = study_macros(tidy_tables([r for r in ref if rows.case_id(r) in in_scope], gpu, sections))
    cand_macros = study_macros(tidy_tables(cand, gpu, sections))
    claims = compare_claims(claim_verdicts(ref_macros), claim_verdicts(cand_macros), partial)
    line = summary_line(table, claims, tolerance, min_within, refused, stale)
    outside = outside_table(table)
    write_atomic(out_csv, table.to_csv(index=False))
    style.save(figure(table, tolerance), out_figure)
    outside_latex = render.table_to_latex(outside)  # the one-cell "not measured" tabular when empty
    write_atomic(out_table, outside_latex if outside.empty else _columns(outside_latex, OUTSIDE_COLUMNS) + "\n")
    found = sorted(table["study"].unique())  # in the config's order (sections), as the claims table
    studies = [s for s in (sections or {}) if s in found] + [s for s in found if s not in (sections or {})]
    values = (macros(table, claims, tolerance, min_within, candidate, claim_labels(studies), cand, refused)
              | claim_status(claims, [*studies, *refused], [*studies, *refused, *without])
              | {"ReproCompileAhead": compile_ahead_differences(cand, ref)})
    write_atomic(out_numbers, numbers(values))
    write_atomic(out_snippet, snippet(values, studies, not outside.empty, size_table(table), impl_table(table), claims,
                                      headline_table(ref_macros, cand_macros, studies), without))
    write_atomic(out_summary, line + "\n")
    log.info("%s", line)
    for r in claims.itertuples():
        log.info("claim %s: reference '%s', candidate '%s'", r.claim, r.reference, r.candidate)
    return line
