"""Snakemake script of rule `reproduction_none`: the paper's paragraph when no second run is configured."""

from kernels.core.files import write_atomic
from kernels.core.logs import setup_logging
from kernels.paper.reproduce_report import no_second_run, no_second_run_numbers

setup_logging(snakemake.log[0])  # noqa: F821
write_atomic(snakemake.output.snippet, no_second_run(snakemake.params.other_code))  # noqa: F821
params = snakemake.params  # noqa: F821
write_atomic(snakemake.output.numbers, no_second_run_numbers(  # noqa: F821
    params.other_code, list(params.studies), float(params.tolerance), float(params.min_within)))
