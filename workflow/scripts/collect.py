"""Snakemake script of rule `collect`: raw JSONL rows of one study -> one tidy CSV."""

from kernels.paper.collect import collect
from kernels.core.logs import setup_logging

setup_logging(snakemake.log[0])  # noqa: F821
collect(snakemake.wildcards.study, list(snakemake.input), snakemake.params.gpu,  # noqa: F821
        snakemake.output[0], dict(snakemake.params.section),  # noqa: F821
        bool(snakemake.params.configured))  # noqa: F821
