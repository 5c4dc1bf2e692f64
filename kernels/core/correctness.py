"""Correctness of an implementation's output against a reference on the same inputs.

Every study checks each implementation this way before timing it
(:func:`check_close`, :func:`check_all` for several outputs, against the
study's ``TOLERANCE``); a failed check becomes a row of status ``wrong``
(:class:`Mismatch`, :mod:`kernels.core.harness`).
"""

from __future__ import annotations

import math


class Mismatch(Exception):
    """The implementation's output differs from the reference beyond tolerance."""


def relative_rmse(out, ref, floor: float = 0.0) -> float:
    """RMSE(out, ref) / max(RMS(ref), floor), computed in float64.

    The ratio FLA's tests use; 0 for identical tensors and for empty ones,
    ``inf`` for NaN/Inf in ``out``, the RMSE itself where the denominator is 0
    (``ref`` all zeros, no ``floor``). ``floor`` is the RMS below which the
    reference counts as zero, so that a reference of rounding noise (a
    gradient of ~1e-16) is not divided by. Both tensors of the same shape.

    Raises:
        Mismatch: the shapes differ.
    """
    import torch

    o = out.detach().to(torch.float64)
    r = ref.detach().to(device=o.device, dtype=torch.float64)
    if o.shape != r.shape:
        raise Mismatch(f"shape {tuple(o.shape)} differs from the reference's {tuple(r.shape)}")
    if not torch.isfinite(o).all():
        return math.inf
    if r.numel() == 0:
        return 0.0
    err = (o - r).pow(2).mean().sqrt().item()
    denominator = max(r.pow(2).mean().sqrt().item(), floor)
    if denominator == 0.0:
        return err
    return err / denominator


def check_close(what: str, out, ref, tol: float) -> float:
    """Compare ``out`` with ``ref`` by :func:`relative_rmse`.

    Returns the error; raises :class:`Mismatch` naming ``what`` when it is
    above ``tol`` or when ``out`` holds NaN or Inf.
    """
    return check_all([(what, out, ref, tol)])[0]


def check_all(checks, floor: float = 0.0) -> list[float]:
    """Compare every ``(what, out, ref, tol)`` of ``checks`` by :func:`relative_rmse` (with ``floor``).

    Returns the errors in the order of ``checks``; raises :class:`Mismatch`
    naming every check whose error is above its ``tol`` (or NaN/Inf), e.g.
    ``'chunk dq: RMSE/RMS 0.0123 above tolerance 0.008'``, several joined by ``'; '``.
    """
    errors, bad = [], []
    for what, out, ref, tol in checks:
        err = relative_rmse(out, ref, floor)
        errors.append(err)
        if not err <= tol:
            bad.append(f"{what}: RMSE/RMS {err:.3g} above tolerance {tol:g}")
    if bad:
        raise Mismatch("; ".join(bad))
    return errors
