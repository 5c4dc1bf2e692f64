"""Correctness of an implementation's output against a reference on the same inputs.

Every study checks each implementation this way before timing it
(:func:`check_close`); a failed check becomes a row of status ``wrong``
(:class:`Mismatch`, :mod:`kernels.harness`).
"""

from __future__ import annotations

import math


class Mismatch(Exception):
    """The implementation's output differs from the reference beyond tolerance."""


def relative_rmse(out, ref) -> float:
    """RMSE(out, ref) / RMS(ref), computed in float64.

    The ratio FLA's tests use; 0 for identical tensors, ``inf`` for NaN/Inf
    in ``out``. Both arguments are tensors of the same shape.
    """
    import torch

    o = out.detach().to(torch.float64)
    r = ref.detach().to(device=o.device, dtype=torch.float64)
    if o.shape != r.shape:
        raise Mismatch(f"shape {tuple(o.shape)} differs from the reference's {tuple(r.shape)}")
    if not torch.isfinite(o).all():
        return math.inf
    rms = r.pow(2).mean().sqrt().item()
    err = (o - r).pow(2).mean().sqrt().item()
    if rms == 0.0:
        return err
    return err / rms


def check_close(what: str, out, ref, tol: float) -> float:
    """Compare ``out`` with ``ref`` by :func:`relative_rmse`.

    Returns the error; raises :class:`Mismatch` naming ``what`` when it is
    above ``tol`` or when ``out`` holds NaN or Inf.
    """
    err = relative_rmse(out, ref)
    if not err <= tol:
        raise Mismatch(f"{what}: RMSE/RMS {err:.3g} above tolerance {tol:g}")
    return err
