"""Snakemake script of rule `table`: one tidy CSV -> one LaTeX table."""

from kernels.core.logs import setup_logging
from kernels.paper.render import render_table

setup_logging(snakemake.log[0])  # noqa: F821
render_table(snakemake.params.study, snakemake.wildcards.name, snakemake.input[0],  # noqa: F821
             snakemake.output[0])  # noqa: F821
