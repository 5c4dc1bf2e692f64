"""Snakemake script of rule `reproduction_none`: the paper's paragraph when no second run is configured."""

from kernels.harness import setup_logging, write_atomic
from kernels.reproduce import NO_SECOND_RUN

setup_logging(snakemake.log[0])  # noqa: F821
write_atomic(snakemake.output[0], NO_SECOND_RUN)  # noqa: F821
