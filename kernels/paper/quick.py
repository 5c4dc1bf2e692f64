"""The quick run's claims on the GPU at hand (``snakemake --profile profiles/quick``): each claim of the
paper's claims table derived from the quick run's own rows, with the values it compares and their
intervals, beside each committed GPU model's verdict on the same cases.

The quick run measures a part of each study (each study's ``quick`` section). Its claims go through
the paper's own tidy tables and report macros (:mod:`kernels.paper.claims`), and so do the rows of
every model of ``data/raw/`` restricted to the quick run's cases, so that a verdict here and a model's
verdict are decided on the same cases by the same code. On a model with committed rows the
reproduction check (:mod:`kernels.paper.reproduce`) compares the rows too; on one without (an A100, an
RTX card, a B200, or any model named by config ``gpu``) these claims are the whole check.

A claim is *not testable on this GPU* (:data:`NOT_TESTABLE`) when an implementation it cannot be
decided without (``report.CLAIM_IMPLS``) has rows here and none of them timed ok (FlashQLA and
FlashInfer need SM90, FlexAttention's FLASH backend SM90 or newer: :func:`untestable`); it is *not in
the quick profile* (:data:`NOT_IN_PROFILE`) when neither this run nor any committed model derives it
from the quick cases. Neither counts as an agreement or a difference.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pandas as pd

from kernels.core.files import write_atomic
from kernels.paper import provenance, render, rows, style
from kernels.paper import report_kit as kit
from kernels.paper.claims import claim_labels, load_run, study_macros, tidy_tables
from kernels.paper.models import NOT_MEASURED, evidence_text, state_note
from kernels.paper.reproduce import ON_THE_LINE, differs_on_the_line

log = logging.getLogger(__name__)

#: The verdict of a claim that an implementation it needs cannot be timed for on this GPU.
NOT_TESTABLE = "not testable on this GPU"
#: The verdict of a claim that neither this run nor a committed model derives from the quick cases.
NOT_IN_PROFILE = "not in the quick profile"
#: A committed model's verdict against this GPU's (column ``<model> agrees``).
SAME, DIFFERS, NOT_COMPARED = "same", "differs", "not compared"
#: The most characters of an error message a line quotes.
MESSAGE_CHARS = 80


def untestable(run: list[dict], study: str, impls) -> str:
    """Why a claim cannot be decided on this GPU: each of ``impls`` (its ``report.CLAIM_IMPLS``) of
    which ``run`` holds rows of ``study`` and none with status ``ok``, as ``"flash_qla: 4 unsupported
    (its first message)"``, joined by "; "; "" where each ran (or has no rows here: a part of the
    study the quick run does not measure)."""
    parts = []
    for impl in impls:
        mine = [r for r in run if r["study"] == study and r["impl"] == impl]
        if not mine or any(r["status"] == "ok" for r in mine):
            continue
        counts = ", ".join(f"{n} {status}" for status, n in Counter(r["status"] for r in mine).most_common())
        message = kit.clip(next((str(r["error"]) for r in mine if r.get("error")), ""), MESSAGE_CHARS)
        parts.append(f"{impl}: {counts}" + (f" ({message})" if message else ""))
    return "; ".join(parts)


def committed_runs(raw: str | Path, studies, quick_sections: dict[str, dict], first: str = "") -> dict[str, list[dict]]:
    """The rows of every model folder of ``raw`` (``data/raw``; ``cpu`` is none) that are cases of the
    quick run (:func:`kernels.paper.rows.configured_cases` of ``quick_sections``; the others are not
    read), per model, ``first`` first where it has rows, the others sorted by name; a model whose folder
    holds rows of none of ``studies`` is left out. Each row's recorded roles are dropped, so that its
    roles are those the quick sections give its case (:func:`kernels.paper.collect.with_roles`), as
    the quick run's own rows have them: a verdict that reads rows by role (the CUDA-graph pairs, the
    published configurations) reads the same cases on both sides.

    Raises:
        ValueError: a committed row fails its schema (:func:`kernels.paper.claims.load_run`).
    """
    expected = rows.configured_cases(quick_sections)
    out = {}
    for folder in sorted((p for p in Path(raw).glob("*") if p.is_dir() and p.name != "cpu"),
                         key=lambda p: (p.name != first, p.name)):
        paths = sorted(str(p) for s in studies for p in Path(folder, s).glob("*.jsonl"))
        if paths:
            out[folder.name] = [{k: v for k, v in row.items() if k != rows.ROLES}
                                for row in load_run(paths, only=expected)]
    return out


def agreement(here: str, there: str) -> str:
    """A committed model's verdict ``there`` against this GPU's ``here``: :data:`SAME`, :data:`DIFFERS`,
    :data:`~kernels.paper.reproduce.ON_THE_LINE` where they differ and either has a value on its claim's
    line (neither the same nor different, as in the reproduction check), or :data:`NOT_COMPARED` where either
    is no verdict (not measured, not testable, not in the profile, n/a: e.g. a datasheet peak the code lacks
    for this GPU, or a claim's quantity not tested: :func:`kernels.paper.style.decided`)."""
    if here in (NOT_TESTABLE, NOT_IN_PROFILE) or there == NOT_MEASURED:
        return NOT_COMPARED
    if not (style.decided(here) and style.decided(there)):
        return NOT_COMPARED
    if differs_on_the_line(here, there):
        return ON_THE_LINE
    return SAME if here == there else DIFFERS


def claims_table(run: list[dict], gpu: str, sections: dict[str, dict], committed: dict[str, list[dict]],
                 states: dict[str, dict[str, provenance.StudyState]], studies) -> pd.DataFrame:
    """Each claim of ``studies`` (``report.CLAIMS``, in the claims table's order) on this run's rows
    ``run`` (folder ``gpu``, measured with the quick ``sections``) and on each model of ``committed``
    (:func:`committed_runs`): columns ``study``, ``macro``, ``claim``, ``verdict`` and ``values`` (this
    GPU's, :func:`kernels.paper.models.evidence_text` of the study's ``EVIDENCE``; or
    :data:`NOT_TESTABLE` and :func:`untestable`'s reason; or :data:`NOT_IN_PROFILE`), and per model
    ``<model> verdict`` (with its rows' state where not current, :func:`kernels.paper.models.state_note`,
    from ``states``) and ``<model> agrees`` (:func:`agreement`)."""
    here = study_macros(tidy_tables(run, gpu, sections))
    theirs = {model: study_macros(tidy_tables(model_rows, model, sections)) for model, model_rows in committed.items()}
    records = []
    for study in studies:
        report = render.report_module(study)
        evidence, needs = getattr(report, "EVIDENCE", {}), getattr(report, "CLAIM_IMPLS", {})
        for macro, words in claim_labels([study]).items():
            record = {"study": study, "macro": macro, "claim": words}
            verdicts = {}
            for model, macros in theirs.items():
                note = state_note(states.get(model, {}).get(study))
                verdicts[model] = NOT_MEASURED if note == NOT_MEASURED else macros.get(macro, style.MISSING)
                record[f"{model} verdict"] = verdicts[model] + ("" if note == NOT_MEASURED else note)
            why = untestable(run, study, needs.get(macro, ()))
            verdict = here.get(macro, style.MISSING)
            if verdict == style.MISSING and all(v in (style.MISSING, NOT_MEASURED) for v in verdicts.values()):
                verdict, values = NOT_IN_PROFILE, ""
            elif why:
                verdict, values = NOT_TESTABLE, why
            else:  # the values the quick cases give (all of them, n/a included, where they give none)
                pairs = evidence.get(macro, ())
                values = evidence_text(here, [p for p in pairs if here.get(p[0], style.MISSING) != style.MISSING]
                                       or pairs)
            record.update(verdict=verdict, values=values)
            for model in theirs:
                record[f"{model} agrees"] = agreement(verdict, verdicts[model])
            records.append(record)
    columns = ["study", "macro", "claim", "verdict", "values",
               *[f"{m} {c}" for m in committed for c in ("verdict", "agrees")]]
    return pd.DataFrame(records, columns=columns)


def gpu_names(run: list[dict]) -> str:
    """The GPUs that measured ``run`` (``env.gpu_name``, distinct, in order), joined by ", "."""
    return ", ".join(dict.fromkeys(str(r["env"]["gpu_name"]) for r in run)) or "no rows"


def summary(table: pd.DataFrame, models) -> str:
    """The closing line: per committed model in ``models``, how many of the claims compared with it
    (:func:`agreement`) have its verdict, then how many claims are not testable here and how many read
    n/a here."""
    parts = []
    for model in models:
        compared = table[table[f"{model} agrees"] != NOT_COMPARED]
        same = int((compared[f"{model} agrees"] == SAME).sum())
        parts.append(f"{same} of {len(compared)} as on the {rows.model_label(model)}")
    line = "claims: " + ("; ".join(parts) if parts else "no committed model to compare with")
    for verdict, words in ((NOT_TESTABLE, NOT_TESTABLE), (style.MISSING, f"{style.MISSING} here")):
        n = int((table["verdict"] == verdict).sum())
        line += f"; {n} {words}" if n else ""
    return line


def lines(table: pd.DataFrame, run: list[dict], folder: str, models) -> list[str]:
    """What the quick run prints of its claims: a heading naming this GPU (:func:`gpu_names`) and the
    rows' folder, a line per claim (this GPU's verdict and values, then each model's verdict and whether
    it agrees) and :func:`summary`."""
    out = [(f"Claims on this GPU ({gpu_names(run)}; rows in {folder}/), each beside every committed model's "
            f"verdict on the same cases:")]
    for _, r in table.iterrows():
        text = f"- {r['study']}: {r['claim']}: {r['verdict']}" + (f" ({r['values']})" if r["values"] else "")
        theirs = [f"{rows.model_label(m)} {r[f'{m} verdict']}" + (f" ({r[f'{m} agrees']})"
                                                                     if r[f"{m} agrees"] != NOT_COMPARED else "")
                  for m in models]
        out.append((text + (f"; {'; '.join(theirs)}" if theirs else "")).replace("--", "–"))  # LaTeX's en dash
    out.append(summary(table, models))
    return out


def check(candidate_files: list[str], *, raw: str, gpu: str, folder: str, sections: dict[str, dict],
          sweeps: dict[str, dict], timing: dict, out_csv: str, out_text: str) -> list[str]:
    """Derive every claim from the quick run's rows and set it beside each committed model's verdict on
    the same cases; write ``out_csv`` (:func:`claims_table`) and ``out_text`` (:func:`lines`), and
    return the lines.

    Args:
        candidate_files: the quick run's JSONL files (``<folder>/<study>/<impl>.jsonl``).
        raw: the committed models' folder (``data/raw``).
        gpu: this run's model folder name (config ``gpu``: the host's GPU, or one named by config).
        folder: where the quick rows are (``results/quick/raw/<gpu>``), as the heading names it.
        sections: {study: its ``quick`` section}; ``sweeps``: {study: its ``sweep`` section} and
            ``timing`` (config ``timing``), against which each committed model's rows are current or
            stale (:func:`kernels.paper.provenance.study_state`).
        out_csv, out_text: the table (CSV) and the printed lines (text).

    Raises:
        ValueError: a row fails its study's schema (:func:`kernels.paper.claims.load_run`).
    """
    run = load_run(candidate_files)
    studies = list(sections)
    committed = committed_runs(raw, studies, sections, first=gpu)
    states = {m: {s: provenance.study_state(s, Path(raw, m), sweeps[s], timing) for s in studies} for m in committed}
    table = claims_table(run, gpu, sections, committed, states, studies)
    out = lines(table, run, folder, list(committed))
    write_atomic(out_csv, table.to_csv(index=False))
    write_atomic(out_text, "\n".join(out) + "\n")
    for line in out:
        log.info("%s", line)
    return out
