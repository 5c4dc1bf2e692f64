"""Launch helpers shared by the Triton kernels of every study.

Under ``TRITON_INTERPRET=1`` (Triton's CPU interpreter, used by the tests
and the smoke run) ``@triton.autotune`` finds no driver, so kernels launch
with a fixed configuration there and are autotuned only on a GPU
(:func:`interpreting`, :func:`maybe_autotune`). Grids sized to the GPU read
its SM count (:func:`sm_count`; :func:`value_block`, the value-axis split of
the sequential GDN kernels). :class:`TunedPicks` keeps an autotuner's picks
per launch key, and the latest pick of each kernel, which a row reports.
"""

from __future__ import annotations

import os

import triton


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def maybe_autotune(configs, key, restore_value=()):
    """Decorator: ``triton.autotune(configs, key, restore_value=...)`` on a GPU; under the
    interpreter, the plain ``@triton.jit`` kernel (num_warps/num_stages do not matter there).

    ``restore_value`` names the arguments that the kernel reads and then overwrites: the
    autotuner runs every configuration several times, so without restoring them between
    runs the first call returns the accumulation of all those runs.
    """

    def wrap(kernel):
        if interpreting():
            return kernel
        return triton.autotune(configs=configs, key=key, restore_value=list(restore_value))(kernel)

    return wrap


def sm_count(device) -> int:
    """Number of streaming multiprocessors of the ``torch.device`` ``device`` (132 on an
    H200; 132 for a CPU device, so the interpreter sizes grids as on the H200)."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def value_block(V: int, programs_per_block: int, device, min_block: int = 16) -> int:
    """Width BV of the value block one program of a sequential GDN kernel owns.

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


class TunedPicks:
    """The configurations an autotuner picked, by kernel and launch key.

    A launch that finds its (kernel, key) here (:meth:`get`) launches that
    configuration directly and skips the autotuner's dispatch; a launch that
    autotunes stores its pick (:meth:`put`). Both count as the kernel's latest
    pick (:meth:`last`), which a study clears before a case
    (:meth:`clear_last`) so that the case's row names its own picks alone.
    """

    def __init__(self):
        self._picks: dict = {}
        self._last: dict = {}

    def get(self, kernel, key):
        """The configuration kept for ``(kernel, key)``, or None; a hit is the kernel's latest pick."""
        config = self._picks.get((kernel, key))
        if config is not None:
            self._last[kernel] = config
        return config

    def put(self, kernel, key, config) -> None:
        """Keep ``config`` as the pick for ``(kernel, key)`` and as the kernel's latest pick."""
        self._picks[(kernel, key)] = self._last[kernel] = config

    def clear_last(self) -> None:
        """Forget the latest picks (the kept picks stay), so that :meth:`last` names only later launches."""
        self._last.clear()

    def last(self) -> dict:
        """``{kernel: configuration}`` of each kernel's latest pick since :meth:`clear_last`."""
        return dict(self._last)
