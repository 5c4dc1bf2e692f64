"""FLA's display name by the kernels its Gated DeltaNet backward ran (Triton's or TileLang's), from the rows.

FLA (flash-linear-attention 0.6.0) refuses its own Triton kernel for the gated backward
(``chunk_bwd_dqkwg``, ``fla/ops/common/chunk_o.py``; FLA issue 640) on Hopper with Triton 3.4.0 to 3.7.0
and runs TileLang's through its backend dispatch instead. The Gated DeltaNet study's rows record what
each call loaded (``dispatch``); the long-context study's do not, and its rows' Triton and compute
capability then say it. Used by the reports and the two-model comparison; nothing here reads a config
(:mod:`kernels.paper.bounds` imports it in any tree).
"""

from __future__ import annotations

import pandas as pd
from packaging.version import Version

#: The Triton releases (from, up to but not including) with which FLA's gated backward on Hopper
#: (``chunk_bwd_dqkwg``, capability 9.x) raises unless TileLang's kernels run it (FLA 0.6.0,
#: ``fla/ops/common/chunk_o.py``; FLA issue 640): a timed row of that backward ran TileLang.
FLA_TRITON_REFUSED = ("3.4.0", "3.7.1")


def _refused(triton, capability) -> bool:
    """Whether FLA's gated backward refuses Triton ``triton`` on a GPU of compute ``capability``
    (``"9.0"``, or 9.0 as a CSV file reads it back): :data:`FLA_TRITON_REFUSED` on Hopper; False where
    either is unknown."""
    if not isinstance(triton, str) or not str(capability).startswith("9."):
        return False
    low, high = (Version(v) for v in FLA_TRITON_REFUSED)
    return low <= Version(triton.split("+")[0]) < high


def ran_tilelang(rows: pd.DataFrame) -> bool:
    """Whether ``rows`` (a tidy table's rows of FLA's backward) has timed rows and every one ran TileLang:
    records it among the modules its call loaded (its ``dispatch``, module names joined by "+"), or,
    for rows that record none (the long-context study's), was timed where FLA's Triton backward refuses
    to run (:data:`FLA_TRITON_REFUSED`, from the row's ``env_triton`` and ``env_capability``)."""
    d = rows[rows["device_ms"].notna()]
    if not len(d):
        return False
    if "dispatch" in d and d["dispatch"].notna().any():
        return bool(d["dispatch"].map(lambda cell: isinstance(cell, str) and "tilelang" in cell.split("+")).all())
    return all(_refused(t, c) for t, c in zip(d.get("env_triton", [None] * len(d)),
                                               d.get("env_capability", [None] * len(d))))


def fla_label(base: str, rows: pd.DataFrame) -> str:
    """FLA's display name ``base`` (``"FLA"``, ``"GDN FLA"``) for rows of FLA (``rows``, a tidy table's,
    any passes): ``base`` unless its backward rows (passes ``bwd``, ``fwdbwd``) ran TileLang
    (:func:`ran_tilelang`); then ``"<base> (TileLang)"``, or ``"<base>, backward in TileLang"`` where
    ``rows`` holds timed forward rows too (its forward runs FLA's Triton kernels)."""
    if not ran_tilelang(rows[rows["pass"] != "fwd"]):
        return base
    forward = rows[(rows["pass"] == "fwd") & rows["device_ms"].notna()]
    return f"{base}, backward in TileLang" if len(forward) else f"{base} (TileLang)"


def impl_labels(d: pd.DataFrame, impls, label) -> dict[str, str]:
    """The display name of each of ``impls`` (``label(impl)``), FLA's (``fla_chunk``) by :func:`fla_label` of
    its rows in ``d`` (a tidy table's)."""
    out = {i: label(i) for i in impls}
    if "fla_chunk" in out:
        out["fla_chunk"] = fla_label(out["fla_chunk"], d[d["impl"] == "fla_chunk"])
    return out
