"""The device time of each kernel one call launches, from ``torch.profiler`` (a row's ``kernels``)."""

from __future__ import annotations

import re
from typing import Any, Callable

#: Profiler entries that are CUDA runtime/driver calls or profiler bookkeeping, not
#: kernels (cudaLaunchKernel, cuLaunchKernelEx, Activity Buffer Request); kernels
#: such as cuBLAS's cutlass* are kept.
_API_EVENT = re.compile(r"cuda[A-Z]|cu[A-Z]|Activity ")


def kernel_breakdown(fn: Callable[[], Any], device, calls: int = 5, top: int = 12) -> list[dict]:
    """Per-kernel time of one call of ``fn``, from ``torch.profiler``.

    Runs ``fn`` twice to warm up, then ``calls`` times under the profiler
    (CUDA activity on a GPU, where each entry is a kernel or memory copy with
    its device time; CPU activity elsewhere, where entries are ATen ops with
    their self CPU time). Unlike the timed repetitions, the L2 cache is not
    flushed between calls. Returns at most ``top`` entries, longest first,
    each ``{"name": str, "calls": launches per call of fn, "us": microseconds
    per call of fn}``, plus ``{"name": "other", ...}`` for the rest.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    for _ in range(2):
        fn()
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
        if cuda:
            torch.cuda.synchronize()
    entries = []
    for ev in prof.key_averages():
        us = (ev.self_device_time_total if cuda else ev.self_cpu_time_total) / calls
        if us > 0 and not _API_EVENT.match(ev.key):
            entries.append({"name": ev.key[:200], "calls": round(ev.count / calls, 2), "us": round(us, 3)})
    entries.sort(key=lambda e: -e["us"])
    rest = entries[top:]
    if rest:
        entries = entries[:top] + [{"name": "other", "calls": round(sum(e["calls"] for e in rest), 2),
                                    "us": round(sum(e["us"] for e in rest), 3)}]
    return entries
