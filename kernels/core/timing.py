"""Timing of one checked call: its device time apart from the latency of a call launched from Python.

Two quantities are measured for every case and kept apart (BRIEF section 9; issue 18):

device time
    What the call's kernels cost the GPU. Each repetition flushes the L2
    (a 256 MiB buffer zeroed, as ``triton.testing.do_bench`` does), then
    waits for the GPU to be idle and enqueues a GPU spin
    (``torch.cuda._sleep``) before the start event, so that the host has
    queued the whole call before the GPU reaches it: the host's launch cost is
    hidden and the events bracket the GPU's work alone (including the GPU's
    own gaps between the call's kernels, about 4 µs for a one-kernel call).
    The spin is checked, not assumed: a third event before the spin gives its
    real length on the GPU, and a repetition whose host enqueue (from before
    the spin to after the end event) took longer than that spin is counted in
    ``spin_short`` (its time may include host time). The spin starts at about
    twice the call's measured enqueue time and is doubled, up to
    ``spin_max_ms``, while more than 5 % of the repetitions are short and the
    spin is within four times the call's enqueue time; a call that
    synchronises inside (or takes longer than ``spin_max_ms`` to enqueue)
    keeps its short count in the row, so a reader sees that its device time
    is not host-free. Method: ``cuda-events+spin``; CUDA-graph cases replay a
    graph captured once (``cuda-graph+spin``), with the same flush and spin.
latency
    What a user waits for: the GPU idle and the L2 flushed
    (``torch.cuda.synchronize`` before the start event), then the call
    launched from Python; the events bracket the host's enqueue and the GPU's
    work together.

Warm-up reaches a steady state before either is timed: windows of about
``warmup_window_ms`` of repetitions (timed as device time; one repetition
per window for a call longer than that) run until the
medians of the last three windows agree within ``warmup_tolerance`` (or
1 µs), after at least ``warmup_ms`` and at most ``warmup_max_ms`` of warm-up;
the warm-up used and whether it settled go into the row (``timing``). The
number of timed repetitions is about ``rep_ms`` of device work, clamped to
``[min_reps, max_reps]``; latency takes as many. Every repetition is kept.

On the CPU (the smoke run) both are ``time.perf_counter`` around
synchronous calls (method ``cpu-wallclock``): the two lists are the same.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any, Callable

#: Bytes of the buffer zeroed before every repetition to evict the L2 (60 MB on an H200).
FLUSH_BYTES = 256 * 2**20
#: Shortest spin before the start event, µs (covers the enqueue of a single kernel).
MIN_SPIN_US = 50.0
#: The spin's doubling stops once it lasts this many times the call's enqueue: a spin still short
#: then means the call waits for the GPU inside, which no longer spin can hide.
SPIN_ENQUEUE_FACTOR = 4
#: A host enqueue must end this long before the spin does, µs (the GPU sees queued work late).
SPIN_MARGIN_US = 5.0
#: Share of short-spin repetitions above which the spin is doubled and the repetitions redone.
MAX_SHORT_SHARE = 0.05
#: Windows of warm-up whose medians must agree.
STABLE_WINDOWS = 3
#: Host time spent sampling a call's enqueue, ms: at most 5 samples, fewer once this much has passed
#: (a call that runs for hundreds of ms is sampled once, as it takes as long as the flush-and-spin).
ENQUEUE_BUDGET_MS = 50.0


def host_bound(spin_short: float | None, n_reps: float | None) -> bool:
    """Whether a row's device time may hold host time: more than :data:`MAX_SHORT_SHARE`
    of its ``n_reps`` repetitions had a host enqueue that outlasted the spin
    (``spin_short`` of the row's ``timing``). False when either count is missing."""
    if spin_short is None or n_reps is None or math.isnan(spin_short) or math.isnan(n_reps):
        return False
    return spin_short > MAX_SHORT_SHARE * n_reps


@dataclasses.dataclass
class Timed:
    """Every repetition of one case.

    Attributes:
        device_ms: device time of each repetition, milliseconds.
        latency_ms: latency of each repetition launched from Python, milliseconds.
        info: the row's ``timing`` block: ``method``, ``warmup_ms`` (warm-up
            spent, ms), ``warmup_stable`` (bool), ``warmup_windows``,
            ``spin_us`` (the spin's real length on the GPU, median, µs),
            ``enqueue_us`` (host time to enqueue the call, median, µs) and
            ``spin_short`` (repetitions whose enqueue outlasted the spin).
    """

    device_ms: list[float]
    latency_ms: list[float]
    info: dict


def _settled(medians: list[float], tolerance: float) -> bool:
    """True when the last :data:`STABLE_WINDOWS` window medians (ms) agree within ``tolerance`` or 1 µs."""
    if len(medians) < STABLE_WINDOWS:
        return False
    last = medians[-STABLE_WINDOWS:]
    return max(last) - min(last) <= max(tolerance * statistics.fmean(last), 1e-3)


class _CudaTimer:
    """Repetitions of one call on the current CUDA device (see the module docstring)."""

    def __init__(self, fn: Callable[[], Any]):
        import torch

        self.torch = torch
        self.fn = fn
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.cycles_per_us = self.calibrate()

    def _events(self, n: int) -> list:
        return [self.torch.cuda.Event(enable_timing=True) for _ in range(n)]

    def calibrate(self) -> float:
        """GPU clock cycles per µs of ``torch.cuda._sleep``, at the current clock."""
        torch = self.torch
        a, b = self._events(2)
        torch.cuda._sleep(10_000)
        a.record()
        torch.cuda._sleep(1_000_000)
        b.record()
        torch.cuda.synchronize()
        return 1_000_000 / max(a.elapsed_time(b) * 1e3, 1e-3)

    def enqueue_us(self, n: int = 5) -> list[float]:
        """Host time (µs) to enqueue one call, each on an idle GPU: ``n`` samples, or fewer (at
        least one) once :data:`ENQUEUE_BUDGET_MS` of sampling have passed."""
        out = []
        start = time.perf_counter()
        while len(out) < n and (not out or (time.perf_counter() - start) * 1e3 < ENQUEUE_BUDGET_MS):
            self.torch.cuda.synchronize()
            t0 = time.perf_counter()
            self.fn()
            out.append((time.perf_counter() - t0) * 1e6)
        self.torch.cuda.synchronize()
        return out

    def device(self, n: int, spin_us: float) -> tuple[list[float], list[float], int]:
        """``n`` device-time repetitions: (ms each, spin µs each, repetitions with a short spin)."""
        torch, fn, flush = self.torch, self.fn, self.flush
        cycles = max(1, int(spin_us * self.cycles_per_us))
        marks, starts, ends = self._events(n), self._events(n), self._events(n)
        host_us = []
        for i in range(n):
            flush.zero_()
            # An idle GPU at t0: the spin cannot start before the host asks for it, so an enqueue that
            # ends within the spin's measured length was queued before the GPU reached the start event
            # (a host running ahead would instead block on a full launch queue and look short).
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            marks[i].record()
            torch.cuda._sleep(cycles)
            starts[i].record()
            fn()
            ends[i].record()
            host_us.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        spins = [m.elapsed_time(s) * 1e3 for m, s in zip(marks, starts)]
        short = sum(h > s - SPIN_MARGIN_US for h, s in zip(host_us, spins))
        return [s.elapsed_time(e) for s, e in zip(starts, ends)], spins, short

    def latency(self, n: int) -> list[float]:
        """``n`` repetitions, each launched from Python onto an idle GPU with the L2 flushed (ms)."""
        torch, fn, flush = self.torch, self.fn, self.flush
        starts, ends = self._events(n), self._events(n)
        for i in range(n):
            flush.zero_()
            torch.cuda.synchronize()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _graph_replay(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture ``fn`` once in a CUDA graph (after three warm-up calls on a side stream); return its replay."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def time_cuda(fn: Callable[[], Any], timing: dict, cuda_graph: bool = False) -> Timed:
    """Device time and latency of ``fn`` on the current CUDA device.

    Args:
        fn: zero-argument callable enqueueing the work to time (its result is discarded).
        timing: ``warmup_ms``, ``warmup_max_ms``, ``warmup_window_ms``,
            ``warmup_tolerance``, ``rep_ms``, ``min_reps``, ``max_reps``,
            ``spin_max_ms`` (``config/config.yaml``, key ``timing``).
        cuda_graph: capture ``fn`` once in a CUDA graph and time its replays.
    Returns:
        :class:`Timed`.
    """
    import torch

    if cuda_graph:
        fn = _graph_replay(fn)
    fn()
    torch.cuda.synchronize()
    timer = _CudaTimer(fn)
    spin_max_us = timing["spin_max_ms"] * 1e3
    spin_us = min(max(MIN_SPIN_US, 2 * max(timer.enqueue_us())), spin_max_us)

    # warm-up: windows of device-time repetitions until their medians settle
    t0 = time.perf_counter()
    medians: list[float] = []
    per_rep_ms = None
    while True:
        elapsed = (time.perf_counter() - t0) * 1e3
        if elapsed >= timing["warmup_ms"] and _settled(medians, timing["warmup_tolerance"]):
            break
        if elapsed >= timing["warmup_max_ms"]:
            break
        if per_rep_ms is None:  # a first repetition tells how long one takes
            n = 1
        else:
            n = math.ceil(timing["warmup_window_ms"] / per_rep_ms)
            n = max(1, min(n, math.ceil((timing["warmup_max_ms"] - elapsed) / per_rep_ms)))
        w0 = time.perf_counter()
        times, _, _ = timer.device(n, spin_us)
        per_rep_ms = max((time.perf_counter() - w0) * 1e3 / n, 1e-3)
        medians.append(statistics.median(times))
    warmup_ms = (time.perf_counter() - t0) * 1e3
    stable = _settled(medians, timing["warmup_tolerance"])

    timer.cycles_per_us = timer.calibrate()  # at the settled clock
    estimate = max(medians[-1], 1e-4)
    n = min(timing["max_reps"], max(timing["min_reps"], int(timing["rep_ms"] / estimate)))
    enqueue = timer.enqueue_us()
    while True:
        device_ms, spins, short = timer.device(n, spin_us)
        if short <= MAX_SHORT_SHARE * n or spin_us >= spin_max_us:
            break
        if spin_us > SPIN_ENQUEUE_FACTOR * statistics.median(enqueue):
            break  # a spin far beyond the enqueue is still short: the call waits for the GPU inside
        spin_us = min(2 * spin_us, spin_max_us)
    latency_ms = timer.latency(n)
    info = {"method": "cuda-graph+spin" if cuda_graph else "cuda-events+spin",
            "warmup_ms": round(warmup_ms, 1), "warmup_stable": stable, "warmup_windows": len(medians),
            "spin_us": round(statistics.median(spins), 1), "enqueue_us": round(statistics.median(enqueue), 1),
            "spin_short": int(short)}
    return Timed(device_ms, latency_ms, info)


def time_cpu(fn: Callable[[], Any], reps: int) -> Timed:
    """``reps`` wall-clock repetitions of the synchronous ``fn`` after one warm-up call (ms)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return Timed(list(times), list(times), {"method": "cpu-wallclock", "warmup_ms": None,
                                            "warmup_stable": None, "warmup_windows": 1})
