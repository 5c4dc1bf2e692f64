"""How time and memory scale with the sequence length: log-log slopes and the crossover length.

A cost that grows as T^p has slope p on log-log axes. :func:`fit_slope` fits
``log2 y = p · log2 T + c`` by least squares over the lengths of a series and gives p with its
95 % confidence interval, ``p ± t(0.975, n − 2) · se(p)`` (se from the residuals: a series that is
not one power law over the fitted lengths gets a wide interval). The t quantile is the
Cornish–Fisher expansion of the normal one (Abramowitz and Stegun 1964, 26.7.5), within 0.1 % of
the exact value from 3 degrees of freedom (0.03 % from 4) and 1 % at 2.

:func:`crossover` finds the length at which one series (Gated DeltaNet) becomes faster than
another (the fastest attention at each length): the first sign change, from slower to faster,
of the log ratio of their times, interpolated linearly in log T. Its interval, the measured lengths
between which it lies given the speedups' bootstrap intervals, is the report's
(:func:`kernels.longctx.tidy.crossover_bounds`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

#: The two-sided confidence of the slopes' intervals.
CONFIDENCE = 0.95


def t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom (module docstring).

    Raises:
        ValueError: ``dof`` < 2 or ``p`` outside (0.5, 1).
    """
    from statistics import NormalDist

    if dof < 2:
        raise ValueError(f"a t quantile needs at least 2 degrees of freedom, got {dof}")
    if not 0.5 < p < 1:
        raise ValueError(f"p must be in (0.5, 1), got {p}")
    z = NormalDist().inv_cdf(p)
    n = float(dof)
    return (z + (z**3 + z) / (4 * n) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * n**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * n**4))


class Slope(NamedTuple):
    """A fitted log-log slope: the exponent ``p``, its interval ``[low, high]`` and the number of
    lengths ``n`` it was fitted from."""

    p: float
    low: float
    high: float
    n: int


NO_SLOPE = Slope(math.nan, math.nan, math.nan, 0)


def fit_slope(seqlens, values, min_seqlen: int = 1) -> Slope:
    """The slope of ``log2 values`` against ``log2 seqlens`` over the lengths >= ``min_seqlen``
    with positive finite values (module docstring); :data:`NO_SLOPE` with fewer than 4 of them
    (2 degrees of freedom at least)."""
    t = np.asarray(seqlens, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = (t >= min_seqlen) & np.isfinite(y) & (y > 0)
    t, y = np.log2(t[keep]), np.log2(y[keep])
    n = len(t)
    if n < 4 or np.ptp(t) == 0:
        return NO_SLOPE
    p, c = np.polyfit(t, y, 1)
    resid = y - (p * t + c)
    se = math.sqrt(float(resid @ resid) / (n - 2) / float(((t - t.mean()) ** 2).sum()))
    half = t_quantile(0.5 + CONFIDENCE / 2, n - 2) * se
    return Slope(float(p), float(p - half), float(p + half), n)


class Crossover(NamedTuple):
    """Where ``fast`` overtakes ``slow``: the length ``seqlen`` (tokens; NaN where there is none);
    ``where``: ``"inside"`` (a sign change between two measured lengths), ``"below"`` (faster already
    at the shortest common length), ``"above"`` (slower at every one) or ``"none"`` (no common
    length)."""

    seqlen: float
    where: str


def _first_change(t: np.ndarray, ratio: np.ndarray) -> tuple[float, str]:
    """The length where ``ratio`` (log of the slow time over the fast time) first turns positive,
    interpolated in log2 T; (nan, ``below``) when it is positive from the first length, (nan,
    ``above``) when it never is."""
    if ratio[0] > 0:
        return math.nan, "below"
    for i in range(1, len(t)):
        if ratio[i] > 0 >= ratio[i - 1]:
            a, b = math.log2(t[i - 1]), math.log2(t[i])
            x = a + (b - a) * (-ratio[i - 1]) / (ratio[i] - ratio[i - 1])
            return 2.0**x, "inside"
    return math.nan, "above"


def crossover(seqlens, fast, slow) -> Crossover:
    """The length at which ``fast`` (times at ``seqlens``) becomes faster than ``slow`` (module
    docstring). Lengths where either time is missing are skipped."""
    t = np.asarray(seqlens, dtype=float)
    f, s = np.asarray(fast, dtype=float), np.asarray(slow, dtype=float)
    keep = np.isfinite(f) & np.isfinite(s) & (f > 0) & (s > 0)
    if not keep.any():
        return Crossover(math.nan, "none")
    order = np.argsort(t[keep])
    t, f, s = t[keep][order], f[keep][order], s[keep][order]
    return Crossover(*_first_change(t, np.log(s) - np.log(f)))
