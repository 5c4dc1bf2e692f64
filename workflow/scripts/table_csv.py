"""Snakemake script of rule `table_csv`: one tidy CSV -> one table as CSV (results/tables/)."""

from kernels.core.logs import setup_logging
from kernels.paper.render import render_table_csv

setup_logging(snakemake.log[0])  # noqa: F821
render_table_csv(snakemake.params.study, snakemake.wildcards.name, snakemake.input[0],  # noqa: F821
                 snakemake.output[0])  # noqa: F821
