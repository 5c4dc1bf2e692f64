"""Snakemake script of rule `paper`: latexmk builds main.pdf from the rule's inputs in a
scratch folder, then moves it into place (kernels/paper/latex.py: build_paper)."""

from kernels.core.logs import setup_logging
from kernels.paper.latex import build_paper

setup_logging(snakemake.log[0])  # noqa: F821
build_paper(snakemake.input[0], snakemake.output[0], list(snakemake.input))  # noqa: F821
