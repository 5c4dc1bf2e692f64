"""Snakemake script of rule `paper`: latexmk builds main.pdf beside main.tex."""

from kernels.harness import setup_logging
from kernels.render import build_paper

setup_logging(snakemake.log[0])  # noqa: F821
build_paper(snakemake.input[0], snakemake.output[0])  # noqa: F821
