"""One GPU per measurement job on a multi-GPU host.

Snakemake's ``--resources gpu=N`` bounds how many measurement jobs run at
once, but does not say which GPU each one takes. A job holds a lease: an
exclusive ``flock`` on ``<lock_dir>/gpu<i>.lock`` for the first free ``i``,
then sets ``CUDA_VISIBLE_DEVICES=i`` before CUDA is initialised. A
compile-ahead job holds a shared lease instead: the studies' compile-ahead
jobs share a GPU with each other, never with a measurement job. The
operating system drops the lock when the process ends, so a crashed job
frees its GPU. Where a scheduler already set ``CUDA_VISIBLE_DEVICES`` (SLURM),
that choice stands and no lease is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from pathlib import Path

log = logging.getLogger("kernels.core.gpulease")


def record_path(benchmark: str | os.PathLike) -> Path:
    """Where a job's :func:`lease` record goes: beside its Snakemake ``benchmark:`` file
    (``benchmarks/measure_gdn_chunk.tsv`` -> ``benchmarks/measure_gdn_chunk.lease.json``)."""
    benchmark = Path(benchmark)
    return benchmark.with_name(benchmark.stem + ".lease.json")


def _record(record_file: str | os.PathLike | None, waited: float, held: float) -> None:
    """Write ``{"lease_wait_s": waited, "lease_held_s": held}`` to ``record_file`` (atomically), when given."""
    if record_file is not None:
        from kernels.core.files import write_atomic

        write_atomic(record_file, json.dumps({"lease_wait_s": round(waited, 3), "lease_held_s": round(held, 3)}) + "\n")


@contextlib.contextmanager
def lease(n_gpus: int, lock_dir: str | os.PathLike, poll_s: float = 0.1, timeout_s: float | None = None,
          shared: bool = False, record_file: str | os.PathLike | None = None):
    """Hold one of ``n_gpus`` GPUs for the ``with`` block; yields its index.

    Sets ``CUDA_VISIBLE_DEVICES`` to that index (call before torch touches
    CUDA). Yields ``None`` without a lease when ``CUDA_VISIBLE_DEVICES`` was
    already set. ``shared``: any number of shared leases hold a GPU together
    (the first GPU that no exclusive lease holds), and an exclusive lease waits
    until none is held, as shared ones wait for an exclusive one. ``record_file``:
    where to write, atomically, how long the lease took to get and was held, in seconds,
    ``{"lease_wait_s": ..., "lease_held_s": ...}``, once the block has ended without an exception.
    A job that Snakemake starts while the one before it still measures waits here, and its process
    ends after it lets go: the wall time of its ``benchmark:`` file holds both, the held time is
    its time on the GPU (:func:`kernels.paper.render.benchmark_macros`). Raises ValueError when
    ``n_gpus`` < 1 and TimeoutError when no GPU frees up within ``timeout_s`` seconds.
    """
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be at least 1, got {n_gpus}")
    start = time.monotonic()
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        yield None
        _record(record_file, 0.0, time.monotonic() - start)
        return
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    while True:
        for i in range(n_gpus):
            f = open(lock_dir / f"gpu{i}.lock", "a+")
            try:
                fcntl.flock(f, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            try:
                if not shared:  # the holder's pid, for whoever looks; shared holders leave it
                    f.seek(0)
                    f.truncate()
                    f.write(f"{os.getpid()}\n")
                    f.flush()
                os.environ["CUDA_VISIBLE_DEVICES"] = str(i)
                waited = time.monotonic() - start
                log.info("leased GPU %d of %d (pid %d%s) after %.1f s", i, n_gpus, os.getpid(),
                         ", shared" if shared else "", waited)
                yield i
                _record(record_file, waited, time.monotonic() - start - waited)
            finally:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise TimeoutError(f"no free GPU among {n_gpus} in {lock_dir} after {timeout_s} s")
        time.sleep(poll_s)
