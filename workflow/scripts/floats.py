"""Snakemake script of rule `floats`: the figure and table environments of one study."""

from kernels.core.logs import setup_logging
from kernels.paper.render import render_floats

setup_logging(snakemake.log[0])  # noqa: F821
render_floats(snakemake.wildcards.study, snakemake.output[0])  # noqa: F821
