"""Claims re-derived from rows: each study's tidy tables and report macros of a run, its claims'
verdicts, and the words the paper gives each claim. The reproduction check (a second run against
the reference, :mod:`kernels.paper.reproduce`) and the models' comparison (each claim on every
committed GPU model, :mod:`kernels.paper.models`) derive their claims through the same code as the
paper (the rules ``collect`` and ``numbers``)."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import pandas as pd

from kernels.paper import render
from kernels.paper.collect import load_rows, tidy, with_roles


def load_run(paths: list[str], only: set[str] | None = None) -> list[dict]:
    """The rows of the JSONL files ``paths`` (``<root>/<study>/<impl>.jsonl``), validated
    per study (:func:`kernels.paper.collect.load_rows`: the study is the file's folder); ``only``:
    the case ids to read (:func:`kernels.paper.rows.case_id`; None: every row).

    Raises:
        ValueError: ``'path:line: ...'``: a row fails its study's row schema, or is
            the same case as an earlier row (``'path:line: same case as path:line'``).
    """
    by_study = defaultdict(list)
    for path in paths:
        by_study[Path(path).parent.name].append(path)
    return [row for study, study_paths in by_study.items() for row in load_rows(study_paths, study, only=only)]


def tidy_tables(run: list[dict], gpu: str, sections: dict[str, dict] | None = None) -> dict[str, pd.DataFrame]:
    """Each study's tidy table of ``run`` as the rule ``collect`` writes it and the rule
    ``numbers`` reads it back (:func:`kernels.paper.collect.with_roles` from the study's section of
    ``sections``, :func:`kernels.paper.collect.tidy`, the study's ``derive``, a CSV round trip);
    ``gpu`` is the data folder's name (the reports look up datasheet peaks by it)."""
    by_study = defaultdict(list)
    for row in run:
        by_study[row["study"]].append(row)
    out = {}
    for study, study_rows in sorted(by_study.items()):
        study_rows = with_roles(study_rows, study, (sections or {}).get(study))
        df = render.report_module(study).derive(tidy(study_rows, gpu))
        out[study] = pd.read_csv(io.StringIO(df.to_csv(index=False)))
    return out


def study_macros(tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    """Every macro of each study's ``report.macros`` on its tidy table in ``tables``."""
    out = {}
    for study, df in tables.items():
        out.update(render.report_module(study).macros(df))
    return out


def claim_verdicts(macros: dict[str, str]) -> dict[str, str]:
    """The macros (:func:`study_macros`) whose names end in ``Verdict``: the claims table's verdicts."""
    return {name: value for name, value in macros.items() if name.endswith("Verdict")}


def claim_labels(studies) -> dict[str, str]:
    """Each verdict macro's claim as the paper's claims table words it (``report.CLAIMS`` of
    each study in ``studies``)."""
    out = {}
    for study in studies:
        out.update(getattr(render.report_module(study), "CLAIMS", {}))
    return out
