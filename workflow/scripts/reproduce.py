"""Snakemake script of rule `reproduce`: a second run against the reference run, case by case."""

import json
from pathlib import Path

from kernels.core.logs import setup_logging
from kernels.paper.reproduce import stale_studies
from kernels.paper.reproduce_report import check

setup_logging(snakemake.log[0])  # noqa: F821
out = snakemake.output  # noqa: F821
params = snakemake.params  # noqa: F821
reference = list(snakemake.input.reference)  # noqa: F821
check(list(snakemake.input.candidate), reference, gpu=params.gpu,  # noqa: F821
      tolerance=float(params.tolerance), min_within=float(params.min_within),
      sections={study: dict(section) for study, section in params.sections.items()},
      without=list(params.without), partial=bool(params.partial),
      stale=stale_studies(json.loads(Path(snakemake.input.states).read_text()), list(params.sections)),  # noqa: F821
      candidate=params.candidate, out_csv=out.csv, out_summary=out.summary, out_figure=out.figure,
      out_table=out.table, out_snippet=out.snippet, out_numbers=out.numbers)
