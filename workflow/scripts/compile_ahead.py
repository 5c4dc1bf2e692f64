"""Snakemake script of rule `compile_ahead`: a study's compile-ahead job.

Before the measurement jobs of the study's implementations that config key compile_ahead
names, their cases are prepared in one queue of parallel processes
(kernels.core.jobs.compile_ahead_job), which fills the on-disk kernel caches; each of those jobs
then reads the answers (kernels.core.jobs.run_job's `ahead`). The job holds a shared GPU lease
(the first GPU that no measurement job holds), which the other studies' compile-ahead jobs share
and a measurement job waits for, so nothing is timed on that GPU while it runs (on a host of
several, measurements on the others share the CPU with its children); it asks for the lease
before its imports and a measurement job after its own, so the compile-ahead jobs go first when
Snakemake starts a measurement job with them. An
implementation whose rows are already written is left out (a forced rerun of another's job),
unless the run measures the whole study again (params.remeasure). If the pass itself fails, the file
holds no answer and each job prepares its own cases: the failure costs time, not rows.
"""

import logging
from pathlib import Path

from kernels.core.gpulease import lease
from kernels.core.logs import setup_logging

setup_logging(snakemake.log[0])  # noqa: F821 - provided by Snakemake
# an implementation whose rows are there is left out, unless the run measures its study again
# (stale, or named by config measure): then every job of the study runs
jobs = [job for job in snakemake.params.jobs  # noqa: F821
        if not Path(job.pop("output")).exists() or snakemake.params.remeasure]  # noqa: F821
# the lease first, then the imports: a measurement job that Snakemake starts beside this one
# imports its study before it asks, so the compile-ahead jobs get the GPU first
with lease(snakemake.params.gpus, ".tmp/gpu-leases", shared=True,  # noqa: F821
           record_file=snakemake.params.lease_record):  # noqa: F821
    from kernels.core.checks import require_gpu
    from kernels.core.files import write_atomic
    from kernels.core.jobs import compile_ahead_job

    if snakemake.params.require_gpu:  # noqa: F821 - the folder names the GPU that measures
        require_gpu(Path(snakemake.params.raw))  # noqa: F821 - data/raw/<gpu>/
    try:
        compile_ahead_job(jobs, dict(snakemake.params.timing), snakemake.output[0],  # noqa: F821
                          snakemake.params.workers)  # noqa: F821
    except Exception:  # noqa: BLE001 - the measurement jobs then prepare their own cases
        logging.getLogger("kernels.compile_ahead").exception("compile-ahead pass failed; no answers")
        write_atomic(snakemake.output[0], "{}\n")  # noqa: F821
