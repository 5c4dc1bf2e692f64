"""Snakemake script of rule `coverage`: which configured implementations have rows, by status."""

from kernels.core.logs import setup_logging
from kernels.paper.render import render_coverage

setup_logging(snakemake.log[0])  # noqa: F821
render_coverage(dict(snakemake.params.configured), list(snakemake.input), snakemake.output[0])  # noqa: F821
