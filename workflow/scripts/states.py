"""Snakemake script of rule `states`: each study's fingerprint and state, and the tree, as JSON."""

from kernels.core.logs import setup_logging
from kernels.paper.provenance import write_states

setup_logging(snakemake.log[0])  # noqa: F821
write_states(dict(snakemake.params.record), snakemake.output[0])  # noqa: F821
