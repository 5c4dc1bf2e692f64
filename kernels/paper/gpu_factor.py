"""How fast one GPU is against another of its model: a second run's *GPU factor*.

GPUs of one model differ by several per cent (Sinha et al., "Not All GPUs Are Created Equal", SC22:
about 8 % on average, up to 22 %), so a second run on another GPU may be slower or faster in every
row by the same factor while every ratio the claims rest on holds. The reproduction check
(:mod:`kernels.paper.reproduce`) therefore reports, per study, besides each row within the tolerance:

``factor``, ``low``, ``high``
    the median of second / first device time over the study's rows timed in both of at least
    :data:`SHORT_MS` on the first GPU (all of them where none is that long), with its 95 % bootstrap
    interval over those rows (:func:`kernels.paper.report_kit.median_interval`);
``within_after``
    how many of those rows lie within the tolerance once the factor is divided out (the rows the
    factor does not explain: a change of one kernel, not of the GPU);
``rows_short``, ``within_short``
    the rows under :data:`SHORT_MS` and how many of them are within the tolerance as measured: calls
    that short are bound by their launch and the host, and are counted apart.

Beside it, what each GPU recorded while it measured (:func:`gpu_settings`: power limit, median SM
clock at the end of the timed repetitions; rows measured before the GPU state was recorded read "not
recorded"). :mod:`kernels.paper.runs` gives the factor of every second and third run in ``data/``
against its model's committed rows: the same-model spread behind every headline number.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit

#: Rows whose device time on the first GPU is shorter than this (ms, 10 µs) are counted apart.
SHORT_MS = 0.01
#: What a GPU's settings read where its rows recorded none.
NOT_RECORDED = "not recorded"
COLUMNS = ["study", "rows", "within", "factor", "low", "high", "rows_long", "within_after", "rows_short",
           "within_short"]


def study_factor(table: pd.DataFrame, tolerance: float) -> dict:
    """The GPU factor of one study's comparison ``table`` (rows of :func:`kernels.paper.reproduce.compare`):
    the :data:`COLUMNS` but ``study`` (module docstring; ``rows``: those timed in both, which have a
    ratio, ``within``: how many of them the check's verdict calls reproduced); NaN factor without a
    row timed in both."""
    timed = table[table["ratio"].notna()]
    ratio = timed["ratio"].astype(float)
    within = timed["verdict"] == "reproduced"
    long = timed["ms_reference"].astype(float) >= SHORT_MS
    basis = ratio[long] if long.any() else ratio
    if basis.empty:
        factor = low = high = float("nan")
    else:
        factor, low, high = kit.median_interval(basis.to_numpy())
    after = (basis / factor - 1.0).abs() <= tolerance + 1e-12 if not basis.empty else basis
    return {"rows": len(timed), "within": int(within.sum()), "factor": factor, "low": low, "high": high,
            "rows_long": len(basis), "within_after": int(after.sum()), "rows_short": int((~long).sum()),
            "within_short": int(within[~long].sum())}


def factor_table(table: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """:func:`study_factor` of each study of ``table``, in its order: :data:`COLUMNS`."""
    records = [{"study": study, **study_factor(g, tolerance)} for study, g in table.groupby("study", sort=False)]
    return pd.DataFrame(records, columns=COLUMNS)


def gpu_settings(run: list[dict], study: str) -> str:
    """What the GPU of ``run``'s rows of ``study`` recorded while it measured (``gpu_state``,
    :mod:`kernels.core.gpustate`): ``"700 W limit, SM 1755 MHz"`` (the power limit, and the median
    SM clock read at the end of each case's timed repetitions); :data:`NOT_RECORDED` without."""
    states = [r["gpu_state"] for r in run if r["study"] == study and isinstance(r.get("gpu_state"), dict)
              and "error" not in r["gpu_state"]]
    limits = sorted({s["power_limit_w"] for s in states if s.get("power_limit_w")})
    clocks = [s["after"]["sm_clock_mhz"] for s in states if (s.get("after") or {}).get("sm_clock_mhz")]
    if not limits and not clocks:
        return NOT_RECORDED
    parts = []
    if limits:
        parts.append("/".join(f"{w:.0f}" for w in limits) + " W limit")
    if clocks:
        parts.append(f"SM {np.median(clocks):.0f} MHz")
    return ", ".join(parts)


def run_gpu(run: list[dict], study: str) -> str:
    """The GPU (``env.gpu_uuid``, its first 12 characters) of ``run``'s rows of ``study``; the GPUs
    joined by "/" where several measured them."""
    uuids = sorted({str(r["env"].get("gpu_uuid") or "n/a")[:12] for r in run if r["study"] == study})
    return "/".join(uuids) or "n/a"
