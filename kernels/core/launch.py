"""Launch helpers shared by the Triton kernels of every study.

Under ``TRITON_INTERPRET=1`` (Triton's CPU interpreter, used by the tests
and the smoke run) ``@triton.autotune`` finds no driver, so kernels launch
with a fixed configuration there and are autotuned only on a GPU
(:func:`interpreting`, :func:`maybe_autotune`). Grids sized to the GPU read
its SM count (:func:`sm_count`; :func:`value_block`, the value-axis split of
the sequential GDN kernels). :class:`TunedPicks` keeps an autotuner's picks
per launch key, and the latest pick of each kernel, which a row reports.
:class:`DirectLaunch` launches a compiled kernel again without Triton's
per-call argument binding, for calls whose host time is the latency.
"""

from __future__ import annotations

import os

import triton
from triton import knobs
from triton.runtime.driver import driver


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


def _specialization(arg):
    """What Triton compiles one argument for: a tensor's dtype and whether its address is
    16-byte aligned; an int's width class (i32, i64, u64), whether it is 1 and whether it is
    a multiple of 16 (``triton.runtime.jit``'s specialisation; a finer key is still correct);
    any other value as itself."""
    if isinstance(arg, int) and not isinstance(arg, bool):
        width = 0 if -2**31 <= arg < 2**31 else 1 if arg < 2**63 else 2
        return width, arg == 1, arg % 16 == 0
    data_ptr = getattr(arg, "data_ptr", None)
    if data_ptr is not None:
        return arg.dtype, data_ptr() % 16 == 0
    return arg


class DirectLaunch:
    """Launch a ``@triton.jit`` kernel again from the binary Triton compiled for it, without
    ``JITFunction.run``'s argument binding and cache lookup on every call.

    The first launch of each specialisation goes through Triton (compiling or loading the
    binary, the ``CompiledKernel`` it returns is kept); later launches with the same
    specialisation of every argument (:func:`_specialization`), the same constexprs,
    options and device go straight to the binary's launcher, on the stream in use on
    that device. On an H200 with Triton 3.6 this took about 10 µs against about
    55 µs through ``kernel[grid](...)``. Launch hooks (``triton.knobs.runtime``) are called
    as Triton calls them; under ``TRITON_INTERPRET=1`` every launch goes through Triton.

    Method: the launcher call ``CompiledKernel.run(grid_x, grid_y, grid_z, stream, function,
    packed_metadata, launch_metadata, enter_hook, exit_hook, *arguments)`` is the one
    ``JITFunction.run`` makes (Triton 3.6 to 3.9), with every kernel parameter in order,
    constexprs included.
    """

    def __init__(self, kernel):
        """``kernel``: a ``@triton.jit`` function whose constexpr parameters come after all the others.

        Raises:
            ValueError: a constexpr parameter precedes a runtime one.
        """
        self.kernel = kernel
        params = getattr(kernel, "params", ())  # the interpreter's kernels have none (launched through Triton)
        is_constexpr = [p.is_constexpr for p in params]
        if is_constexpr != sorted(is_constexpr):
            raise ValueError(f"{kernel.__name__}: DirectLaunch needs the constexpr parameters last")
        self.constexprs = [kernel.arg_names[p.num] for p in params if p.is_constexpr]
        self._compiled: dict = {}

    @staticmethod
    def key(device: int, args: tuple, num_warps: int, constexprs: dict) -> tuple:
        """The launches that share one binary: device index, options, constexprs, and each
        argument's :func:`_specialization`."""
        return (device, num_warps, *constexprs.items(), *map(_specialization, args))

    def compiled(self, *args, num_warps: int, **constexprs):
        """The ``CompiledKernel`` kept for a launch with these arguments on the current device, or None."""
        return self._compiled.get(self.key(driver.active.get_current_device(), args, num_warps, constexprs))

    def __call__(self, grid: int, *args, num_warps: int, **constexprs) -> None:
        """Launch ``grid`` programs (a 1-D grid) with the kernel's runtime ``args`` in order,
        its constexpr parameters by name and ``num_warps``. A call that Triton would refuse
        (a constexpr missing, say) goes through Triton, which raises its error."""
        if interpreting():
            self.kernel[(grid,)](*args, num_warps=num_warps, **constexprs)
            return
        device = driver.active.get_current_device()
        key = self.key(device, args, num_warps, constexprs)
        compiled = self._compiled.get(key)
        if compiled is None:
            self._compiled[key] = self.kernel[(grid,)](*args, num_warps=num_warps, **constexprs)
            return
        stream = driver.active.get_current_stream(device)
        arguments = (*args, *(constexprs[name] for name in self.constexprs))
        enter_hook = knobs.runtime.launch_enter_hook
        metadata = None if enter_hook is None else compiled.launch_metadata((grid, 1, 1), stream, *arguments)
        compiled.run(grid, 1, 1, stream, compiled.function, compiled.packed_metadata, metadata, enter_hook,
                     knobs.runtime.launch_exit_hook, *arguments)
