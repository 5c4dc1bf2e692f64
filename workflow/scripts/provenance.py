"""Snakemake script of rule `provenance`: each study's run and state -> the paper's provenance macros."""

from kernels.core.logs import setup_logging
from kernels.paper.provenance import render_provenance

setup_logging(snakemake.log[0])  # noqa: F821
params = snakemake.params  # noqa: F821
render_provenance(list(params.studies), list(params.folders), {s: dict(v) for s, v in params.sections.items()},
                  dict(params.timing), snakemake.output[0])  # noqa: F821
