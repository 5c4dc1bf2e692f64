"""Measurement harness shared by every study.

A *study* is a module ``kernels.<study>.study`` that defines

``STUDY: str``
    The study name written in every row (``swiglu``, ``flex``, ``gdn``).
``SHAPE_FIELDS: tuple[str, ...]``
    The shape fields every row of the study carries.
``cases(sweep: dict, impl: str) -> list[dict]``
    The configurations one implementation is measured on. Each case holds
    ``pass`` (fwd|bwd|fwdbwd), ``dtype`` and the shape fields; anything else
    it holds is copied into the row too.
``prepare(impl: str, case: dict, device: torch.device) -> Prepared``
    Builds random inputs, runs the implementation once, compares its output
    with the reference on the same inputs (:func:`kernels.core.correctness.check_close`, raising
    :class:`kernels.core.correctness.Mismatch`) and returns the call to time. It raises
    :class:`Unsupported` when the implementation cannot run the case here.
``ISOLATE: frozenset[str]`` (optional)
    Implementations whose every case runs in a child process, because a
    failure of theirs can poison the CUDA context.
``check_config(section: dict) -> None`` (optional)
    Checks the study's config section beyond its schema (a value against
    another) before any job runs; raises ValueError ``'<key>: what is wrong'``,
    the key relative to the section (``sweep.groups[0].impls``).

This module prepares, checks and times one case (:func:`measure_case`; :func:`prepare_case`
without the timing). :func:`kernels.core.jobs.run_job` measures every case of one (study, impl) pair
and writes one JSON line per case, atomically (the row schema:
``workflow/schemas/row.schema.yaml``); :mod:`kernels.core.children` runs a case in a fresh process,
:mod:`kernels.core.ahead` prepares many in parallel before any is timed.
A failed case becomes a row with its ``status`` (ok|oom|unsupported|error|
wrong) and ``error``; the sweep goes on.

Each ok row holds two timings of every repetition (:mod:`kernels.core.timing`):
``device_times_ms`` / ``device_ms`` (their median), the GPU's work alone with
the host's launch hidden behind a GPU spin, and ``times_ms`` / ``median_ms``,
the latency of a call launched from Python onto an idle GPU; ``timing`` says
how (method, warm-up used and whether it settled, the spin). Both start each
repetition with the L2 flushed.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time
import traceback
from typing import Any, Callable

from kernels.core import timing as timing_mod
from kernels.core.correctness import Mismatch
from kernels.core.profiling import kernel_breakdown

log = logging.getLogger("kernels.core.harness")


class Unsupported(Exception):
    """The implementation cannot run this case here (missing package, no GPU, ...)."""


@dataclasses.dataclass
class Prepared:
    """A checked call ready to be timed.

    Attributes:
        fn: zero-argument callable doing exactly the work to time.
        bytes: minimum bytes the operation must move through device memory
            (each input read once, each output written once), as an int.
        flops: minimum floating-point operations, as an int (0 for
            bandwidth-bound operations counted in bytes only).
        extra: study-specific fields copied into the row (compile seconds,
            recompile count, densities, the measured error, ...).
        cuda_graph: time replays of a CUDA graph of ``fn`` captured once
            (:func:`kernels.core.timing.time_cuda`) instead of launches.
        profile: after timing, also record the row's ``kernels`` field, the
            device time of each kernel ``fn`` launches (:func:`kernel_breakdown`).
    """

    fn: Callable[[], Any]
    bytes: int
    flops: int
    extra: dict = dataclasses.field(default_factory=dict)
    cuda_graph: bool = False
    profile: bool = False


# ----------------------------------------------------------------------------
# timing


def synchronize(device) -> None:
    """Wait for the GPU's queued work when ``device`` is CUDA (nothing to wait for on the CPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def call_peak_bytes(fn: Callable[[], Any], device) -> int | None:
    """Peak bytes allocated while ``fn`` runs once (what it is given, its outputs and every
    temporary; not the timer's L2 flush buffer), CUDA only: None on the CPU."""
    import torch

    if device.type != "cuda":
        return None
    synchronize(device)
    torch.cuda.reset_peak_memory_stats()
    fn()
    synchronize(device)
    return int(torch.cuda.max_memory_allocated())


def time_call(prepared: Prepared, device, timing: dict) -> "timing_mod.Timed":
    """Time ``prepared.fn``: every repetition's device time and latency (:mod:`kernels.core.timing`).

    On CUDA: :func:`kernels.core.timing.time_cuda` with the ``timing`` config,
    replaying a CUDA graph of ``fn`` when ``prepared.cuda_graph``. On the
    CPU: ``timing["cpu_reps"]`` wall-clock repetitions.
    """
    if device.type == "cuda":
        return timing_mod.time_cuda(prepared.fn, timing, cuda_graph=prepared.cuda_graph)
    return timing_mod.time_cpu(prepared.fn, timing["cpu_reps"])


# ----------------------------------------------------------------------------
# running cases


def _status_of(exc: BaseException) -> str:
    import torch

    if isinstance(exc, Mismatch):
        return "wrong"
    if isinstance(exc, (Unsupported, NotImplementedError, ImportError)):
        return "unsupported"
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    return "error"


def _row(study: str, impl: str, case: dict, status: str = "ok", error: str | None = None) -> dict:
    """A row of one case before timing: no times, no counts, the given status."""
    return {"study": study, "impl": impl, **case, "times_ms": [], "median_ms": None, "device_times_ms": [],
            "device_ms": None, "bytes": None, "flops": None, "status": status, "error": error,
            "peak_mem_bytes": None, "setup_s": None}


def measure_case(study_mod, impl: str, case: dict, device, timing: dict) -> dict:
    """Prepare, check and time one case; return its row (without ``env``).

    Never raises for a failure of the implementation: the row's ``status``
    and ``error`` say what happened, and ``times_ms`` is empty unless ok.
    A case's own ``warmup_ms`` (a config group's, kept in the row) replaces
    ``timing["warmup_ms"]``.
    """
    import torch

    if "warmup_ms" in case:
        timing = {**timing, "warmup_ms": case["warmup_ms"]}

    row = _row(study_mod.STUDY, impl, case)
    t0 = time.perf_counter()
    try:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        prepared = study_mod.prepare(impl, case, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        row["setup_s"] = round(time.perf_counter() - t0, 3)
        row.update(bytes=int(prepared.bytes), flops=int(prepared.flops), **prepared.extra)
        timed = time_call(prepared, device, timing)
        row["times_ms"] = [round(t, 6) for t in timed.latency_ms]
        row["median_ms"] = statistics.median(timed.latency_ms)
        row["device_times_ms"] = [round(t, 6) for t in timed.device_ms]
        row["device_ms"] = statistics.median(timed.device_ms)
        row["timing"] = timed.info
        if device.type == "cuda":
            row["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated())
        if prepared.profile:
            try:  # a profiler failure costs the breakdown, never the timed row
                row["kernels"] = kernel_breakdown(prepared.fn, device)
            except Exception as exc:  # noqa: BLE001
                row["kernels_error"] = f"{type(exc).__name__}: {exc}"[:500]
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        row["status"] = _status_of(exc)
        row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        row["times_ms"], row["median_ms"] = [], None
        row["device_times_ms"], row["device_ms"] = [], None
        if row["status"] == "error":
            log.debug("%s", traceback.format_exc())
    finally:
        prepared = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row


def prepare_case(study_mod, impl: str, case: dict, device) -> dict:
    """Prepare and check one case without timing it: ``{"status", "error", "setup_s"}``, plus the
    one-off seconds (``*_s``: ``first_call_s``, ``compile_s``, ...) and ``recompiles`` that the
    study's ``prepare`` put in ``extra``: a cold compile where this process is the first to compile.

    The first call compiles and autotunes the implementation (Triton, TileLang, Inductor, CuTe),
    which fills the on-disk caches that a later process preparing the same case reads back.
    """
    import torch

    t0 = time.perf_counter()
    status, error, cold = "ok", None, {}
    try:
        prepared = study_mod.prepare(impl, case, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        cold = {k: v for k, v in prepared.extra.items() if k.endswith("_s") or k == "recompiles"}
    except Exception as exc:  # noqa: BLE001 - a failure here is the timed pass's to record
        status, error = _status_of(exc), f"{type(exc).__name__}: {exc}"[:500]
    return {"status": status, "error": error, "setup_s": round(time.perf_counter() - t0, 3), **cold}
