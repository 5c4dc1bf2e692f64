"""Snakemake script of rule `reproduction_none`: the paper's paragraph when no second run is configured."""

from kernels.logs import setup_logging
from kernels.files import write_atomic
from kernels.reproduce import NO_SECOND_RUN, NO_SECOND_RUN_NUMBERS

setup_logging(snakemake.log[0])  # noqa: F821
write_atomic(snakemake.output.snippet, NO_SECOND_RUN)  # noqa: F821
write_atomic(snakemake.output.numbers, NO_SECOND_RUN_NUMBERS)  # noqa: F821
