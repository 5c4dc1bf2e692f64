"""One GPU per measurement job on a multi-GPU host.

Snakemake's ``--resources gpu=N`` bounds how many measurement jobs measure at
once, but does not say which GPU each one takes. A job holds a lease: an
exclusive ``flock`` on ``<lock_dir>/gpu<d>.lock`` for the first free device
``d`` of :func:`devices`, then sets ``CUDA_VISIBLE_DEVICES=d`` (and
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so that CUDA's index ``d`` is nvidia-smi's)
before CUDA is initialised. A compile-ahead job holds a shared lease instead:
the studies' compile-ahead jobs share a GPU with each other, never with a
measurement job. The operating system drops the lock when the process ends,
so a crashed job frees its GPU. Where a scheduler already set
``CUDA_VISIBLE_DEVICES`` to one GPU (SLURM), that choice stands and no lease
is taken. Each job's lease record (:func:`record_path`) names the GPU it held
and for how long.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

log = logging.getLogger("kernels.core.gpulease")


def record_path(benchmark: str | os.PathLike) -> Path:
    """Where a job's :func:`lease` record goes: beside its Snakemake ``benchmark:`` file
    (``benchmarks/measure_gdn_chunk.tsv`` -> ``benchmarks/measure_gdn_chunk.lease.json``)."""
    benchmark = Path(benchmark)
    return benchmark.with_name(benchmark.stem + ".lease.json")


def gpu_uuids() -> list[str]:
    """The UUIDs (``GPU-...``) of this host's GPUs in nvidia-smi's order (its ``index``: PCI bus
    order, which ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` gives CUDA); [] where nvidia-smi is missing,
    fails (no driver) or prints a line that is not a UUID."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    uuids = [line.strip() for line in out.splitlines() if line.strip()]
    return uuids if all(u.startswith("GPU-") for u in uuids) else []


def devices(n_gpus: int) -> list[str]:
    """The values of ``CUDA_VISIBLE_DEVICES`` that a lease picks from, in order: the first
    ``n_gpus`` of those it lists when it lists several (a host some of whose GPUs are kept for
    others), else ``"0"`` to ``str(n_gpus - 1)``. Raises ValueError when ``n_gpus`` < 1."""
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be at least 1, got {n_gpus}")
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:n_gpus] if len(listed) > 1 else [str(i) for i in range(n_gpus)]


def _uuid(device: str, uuids: list[str]) -> str | None:
    """The UUID of ``device`` (a ``CUDA_VISIBLE_DEVICES`` value: an index of ``uuids``, those of
    :func:`gpu_uuids`, or a UUID itself); None where ``uuids`` has no such index."""
    if device.startswith("GPU-"):
        return device
    return uuids[int(device)] if device.isdigit() and int(device) < len(uuids) else None


def _record(record_file: str | os.PathLike | None, waited: float, held: float, leased_at: datetime,
            visible: str | None, uuid: str | None) -> None:
    """Write a lease's record to ``record_file`` (atomically), when given: its wait and held time
    (seconds), when it was leased (UTC) and the GPU (``CUDA_VISIBLE_DEVICES``, UUID); see :func:`lease`."""
    if record_file is not None:
        from kernels.core.files import write_atomic

        write_atomic(record_file, json.dumps({
            "lease_wait_s": round(waited, 3), "lease_held_s": round(held, 3),
            "leased_at": leased_at.isoformat(timespec="milliseconds"),
            "cuda_visible_devices": visible, "gpu_uuid": uuid}) + "\n")


@contextlib.contextmanager
def _environ(**values: str):
    """Set the environment variables ``values`` for the ``with`` block, then restore those before."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def lease(n_gpus: int, lock_dir: str | os.PathLike, poll_s: float = 0.1, timeout_s: float | None = None,
          shared: bool = False, record_file: str | os.PathLike | None = None):
    """Hold one of ``n_gpus`` GPUs for the ``with`` block; yields its ``CUDA_VISIBLE_DEVICES``.

    The GPU is the first of :func:`devices` whose lock in ``lock_dir`` is free (GPU ``"0"``
    first), polled every ``poll_s`` seconds while none is. Sets ``CUDA_VISIBLE_DEVICES`` to it and
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (call before torch touches CUDA), and restores both after
    the block. Yields ``None`` without a lease when ``CUDA_VISIBLE_DEVICES`` already names one
    GPU (a scheduler's choice). ``shared``: any number of shared leases hold a GPU together (the
    first GPU that no exclusive lease holds), and an exclusive lease waits until none is held, as
    shared ones wait for an exclusive one. ``record_file``: where to write, atomically, once the
    block has ended without an exception, ``{"lease_wait_s", "lease_held_s", "leased_at",
    "cuda_visible_devices", "gpu_uuid"}``: how long the lease took to get and was held (seconds),
    when it was got (UTC, ISO 8601), the GPU (``CUDA_VISIBLE_DEVICES``: nvidia-smi's index, or
    the scheduler's value) and its UUID (from :func:`gpu_uuids`; None without nvidia-smi or
    where the scheduler chose: each row's ``env.gpu_uuid`` still names it). A job that Snakemake
    starts while the one before it still measures waits here, and its process ends after it lets
    go: the wall time of its ``benchmark:`` file holds both, the held time is its time on the GPU
    (:func:`kernels.paper.render.benchmark_macros`). Raises ValueError when ``n_gpus`` < 1 and
    TimeoutError when no GPU frees up within ``timeout_s`` seconds.
    """
    choices = devices(n_gpus)
    start = time.monotonic()
    leased_at = datetime.now(timezone.utc)
    given = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if given and "," not in given:
        yield None
        _record(record_file, 0.0, time.monotonic() - start, leased_at, given, None)
        return
    uuids = gpu_uuids()
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    while True:
        for device in choices:
            f = open(lock_dir / f"gpu{device}.lock", "a+")
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
                uuid = _uuid(device, uuids)
                waited = time.monotonic() - start
                leased_at = datetime.now(timezone.utc)
                log.info("leased GPU %s (%s) of %d (pid %d%s) after %.1f s", device, uuid or "no UUID",
                         len(choices), os.getpid(), ", shared" if shared else "", waited)
                with _environ(CUDA_VISIBLE_DEVICES=device, CUDA_DEVICE_ORDER="PCI_BUS_ID"):
                    yield device
                _record(record_file, waited, time.monotonic() - start - waited, leased_at, device, uuid)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise TimeoutError(f"no free GPU among {choices} in {lock_dir} after {timeout_s} s")
        time.sleep(poll_s)
