"""Launch helpers shared by the Triton kernels of every study.

Under ``TRITON_INTERPRET=1`` (Triton's CPU interpreter, used by the tests
and the smoke run) ``@triton.autotune`` finds no driver, so kernels launch
with a fixed configuration there and are autotuned only on a GPU.
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
