"""Launch helpers shared by the GDN Triton kernels: interpreter detection,
autotuning only on a GPU, and the value-block split that fills the SMs."""

from __future__ import annotations

import os

import triton


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def maybe_autotune(configs, key):
    """Decorator: ``triton.autotune(configs, key)`` on a GPU; under the interpreter,
    where autotune finds no driver, the plain ``@triton.jit`` kernel (launch
    parameters num_warps/num_stages do not matter there)."""

    def wrap(kernel):
        if interpreting():
            return kernel
        return triton.autotune(configs=configs, key=key)(kernel)

    return wrap


def sm_count(device) -> int:
    """Number of streaming multiprocessors of ``device`` (132 on an H200; 132 on the CPU)."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def value_block(V: int, programs_per_block: int, device) -> int:
    """Width BV of the value block one program owns.

    The largest of 64, 32, 16 (at most V) that still gives at least one program
    per SM (``programs_per_block * V / BV``); a long sequential walk over few
    (sequence, head) pairs otherwise leaves most SMs idle. Under the
    interpreter: min(V, 64), the fewest programs.
    """
    bv = min(V, 64)
    if interpreting():
        return bv
    sms = sm_count(device)
    while bv > 16 and programs_per_block * (V // bv) < sms:
        bv //= 2
    return bv
