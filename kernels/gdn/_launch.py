"""Launch helpers of the GDN Triton kernels: the value-block split that fills
the SMs (interpreter detection and autotuning: :mod:`kernels.launch`)."""

from __future__ import annotations

from kernels.launch import interpreting


def sm_count(device) -> int:
    """Number of streaming multiprocessors of ``device`` (132 on an H200; 132 on the CPU)."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def value_block(V: int, programs_per_block: int, device, min_block: int = 16) -> int:
    """Width BV of the value block one program owns.

    The largest of 64, 32, 16 (at most V) that still gives at least one program
    per two SMs (``programs_per_block * V / BV``); a long sequential walk over
    few (sequence, head) pairs otherwise leaves most SMs idle. Measured on the
    H200 (K = V = 128): the sequential kernels ran fastest with 128 programs
    on its 132 SMs, e.g. 64 (sequence, head) pairs at BV = 64 rather than 32,
    32 pairs at BV = 32 rather than 16 or 64. Never below
    ``min_block`` (a kernel that Triton miscompiles at narrower blocks sets
    it). Under the interpreter: min(V, 64), the fewest programs.
    """
    bv = min(V, 64)
    if interpreting():
        return bv
    sms = sm_count(device)
    while bv > max(min_block, 16) and 2 * programs_per_block * (V // bv) < sms:
        bv //= 2
    return bv
