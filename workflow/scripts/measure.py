"""Snakemake script of rule `measure`: one (study, impl) sweep -> one JSONL file.

The job holds a lease on one GPU of the host (kernels/gpulease.py) for its
whole sweep, so that concurrent jobs under --resources gpu=N never share one.
Finished rows also go to a checkpoint under .tmp/checkpoints/ (never data/),
so a job killed part-way resumes where it stopped when run again.
"""

import os

if snakemake.params.interpret:  # noqa: F821 - provided by Snakemake
    os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

from kernels.gpulease import lease  # noqa: E402
from kernels.harness import run_job, setup_logging  # noqa: E402

setup_logging(snakemake.log[0])  # noqa: F821
with lease(snakemake.params.gpus, ".tmp/gpu-leases"):  # noqa: F821
    run_job(snakemake.wildcards.study, snakemake.wildcards.impl, snakemake.params.sweep,  # noqa: F821
            snakemake.output[0], dict(snakemake.params.timing),  # noqa: F821
            checkpoint=os.path.join(".tmp/checkpoints", snakemake.output[0]))  # noqa: F821
