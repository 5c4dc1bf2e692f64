"""Snakemake script of rule `measure`: one (study, impl) sweep -> one JSONL file.

The job holds a lease on one GPU of the host (kernels/core/gpulease.py) for its
whole sweep, so that concurrent jobs under --resources gpu=N never share one:
the first free one of params.gpus, which it sees alone as CUDA_VISIBLE_DEVICES.
Snakemake starts the next job of a GPU while one measures there (rule measure's
gpu_slots): it imports torch and its study before asking for the lease, so its
start-up overlaps the measurement before it; how long it waited for the lease and
held it, from when, and which GPU (index and UUID) go to params.lease_record (the
held time is what kernels.paper.render.benchmark_macros counts).
Finished rows also go to a checkpoint under .tmp/checkpoints/ (never data/),
so a job killed part-way resumes where it stopped when run again. The
implementations of config key compile_ahead had their cases prepared by the
study's job of rule compile_ahead (kernels.core.jobs.compile_ahead_job), whose
answers go in their rows. Outside the
smoke run, the job first checks that its GPU is the one its folder
data/raw/<gpu>/ names, and fails before measuring or writing anything if not.
"""

import importlib
import os
from pathlib import Path

if snakemake.params.interpret:  # noqa: F821 - provided by Snakemake
    os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

from kernels.core.checks import require_gpu, require_no_cuda_yet  # noqa: E402
from kernels.core.gpulease import lease  # noqa: E402
from kernels.core.jobs import run_job  # noqa: E402
from kernels.core.logs import setup_logging  # noqa: E402

setup_logging(snakemake.log[0])  # noqa: F821
# the study's imports (torch, Triton, its kernels) before the lease, while another job may measure;
# CUDA must wait for the lease, which picks the GPU (CUDA_VISIBLE_DEVICES)
require_no_cuda_yet(importlib.import_module(f"kernels.{snakemake.wildcards.study}.study"))  # noqa: F821
with lease(snakemake.params.gpus, ".tmp/gpu-leases", record_file=snakemake.params.lease_record):  # noqa: F821
    if snakemake.params.require_gpu:  # noqa: F821 - the folder names the GPU that measures
        require_gpu(Path(snakemake.output[0]).parents[1])  # noqa: F821 - data/raw/<gpu>/<study>/<impl>.jsonl
    run_job(snakemake.wildcards.study, snakemake.wildcards.impl, snakemake.params.sweep,  # noqa: F821
            snakemake.output[0], dict(snakemake.params.timing),  # noqa: F821
            checkpoint=snakemake.params.checkpoint,  # noqa: F821
            ahead_workers=snakemake.params.ahead_workers,  # noqa: F821
            ahead=snakemake.input.ahead[0] if snakemake.input.ahead else None)  # noqa: F821
