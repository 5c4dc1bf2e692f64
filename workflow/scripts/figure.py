"""Snakemake script of rule `figure`: one tidy CSV -> one figure PDF."""

from kernels.core.logs import setup_logging
from kernels.paper.render import render_figure

setup_logging(snakemake.log[0])  # noqa: F821
render_figure(snakemake.params.study, snakemake.wildcards.name, snakemake.input[0],  # noqa: F821
              snakemake.output[0])  # noqa: F821
