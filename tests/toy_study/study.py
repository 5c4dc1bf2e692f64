"""A toy study (``y = 2·x``) that tests copy into a workflow to show how an
experiment is added: this file, impls.py and report.py in its package, a config
file and a schema."""

import torch

from kernels.core import correctness, harness
from kernels.toy.impls import IMPLS

STUDY = "toy"
SHAPE_FIELDS = ("numel",)


def cases(sweep: dict, impl: str) -> list[dict]:
    """One forward case of float32 ``[numel]`` per size of ``sweep["numel"]``; ValueError for an
    impl not in the registry."""
    if impl not in IMPLS:
        raise ValueError(f"unknown toy impl {impl!r}; known: {tuple(IMPLS)}")
    return [{"pass": "fwd", "dtype": "float32", "numel": n} for n in sweep["numel"]]


def prepare(impl: str, case: dict, device) -> harness.Prepared:
    """``y = 2·x`` on ``[numel]`` float32 inputs, checked against float64 before it is timed."""
    x = torch.randn(case["numel"], device=device, generator=None)
    out = torch.empty_like(x)
    torch.mul(x, 2.0, out=out)
    err = correctness.check_close("y", out, x.double() * 2, 1e-6)
    return harness.Prepared(fn=lambda: torch.mul(x, 2.0, out=out), bytes=2 * 4 * x.numel(),
                            flops=x.numel(), extra={"rel_err": err})
