"""Snakemake script of rule `numbers`: tidy CSVs -> LaTeX macros for every number in the text."""

from kernels.core.logs import setup_logging
from kernels.paper.render import render_numbers

setup_logging(snakemake.log[0])  # noqa: F821
render_numbers(list(snakemake.params.studies), list(snakemake.input), snakemake.output[0],  # noqa: F821
               snakemake.params.bench, dict(snakemake.params.timing),  # noqa: F821
               list(snakemake.params.other_timing))  # noqa: F821
