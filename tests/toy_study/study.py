"""A toy study (``y = 2·x``) that tests copy into a workflow to show how an
experiment is added: this file, report.py, a config file and a schema."""

import torch

from kernels import correctness, harness

STUDY = "toy"
SHAPE_FIELDS = ("numel",)


def cases(sweep: dict, impl: str) -> list[dict]:
    return [{"pass": "fwd", "dtype": "float32", "numel": n} for n in sweep["numel"]]


def prepare(impl: str, case: dict, device) -> harness.Prepared:
    if impl != "scale":
        raise harness.Unsupported(f"unknown impl {impl!r}")
    x = torch.randn(case["numel"], device=device, generator=None)
    out = torch.empty_like(x)
    torch.mul(x, 2.0, out=out)
    err = correctness.check_close("y", out, x.double() * 2, 1e-6)
    return harness.Prepared(fn=lambda: torch.mul(x, 2.0, out=out), bytes=2 * 4 * x.numel(),
                            flops=x.numel(), extra={"rel_err": err})
