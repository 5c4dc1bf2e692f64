"""The long-context study's tidy table: its derived metrics, the selections that the figures, tables
(:mod:`kernels.longctx.report`) and quoted numbers (:mod:`kernels.longctx.numbers`) start from, and
the slopes and crossovers that they read, built on :mod:`kernels.paper.report_kit`.

Derived metrics (per row of the tidy table): ``family`` (attention or gdn, from the registry's
tags), ``peak_mem_gib`` (the call's own peak, ``peak_mem_timed_bytes``, else the harness's
``peak_mem_bytes``), ``cache_mib`` (decode's KV cache or GDN state) and, on GDN rows,
``speedup_vs_attention``: the fastest attention's device time at the same phase, pass, length and
launch over this row's. Slopes and crossovers: :mod:`kernels.longctx.scaling`, from the config's
``fit_min_seqlen`` up; the paper's table and macros are at the config's ``table_seqlens``
(:func:`kernels.paper.report_kit.study_config`). The figures, tables and macros read the tidy table as
the collect step derived it (:func:`derive`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.longctx.impls import IMPLS
from kernels.longctx.scaling import crossover, fit_slope
from kernels.paper.rows import ROLES

STUDY = "longctx"
#: The implementations in the order of legends and tables (their registry's).
ORDER = tuple(IMPLS)
ATTENTION = tuple(i for i, e in IMPLS.items() if "attention" in e.tags)
GDN = tuple(i for i, e in IMPLS.items() if "gdn" in e.tags)
KEYS = ["gpu", "phase", "pass", "dtype", "seqlen", "launch"]
#: The tidy table's columns that the report reads (:func:`kernels.paper.report_kit.tidy_frame`).
COLUMNS = [*KEYS, "impl", "status", "batch", "heads", "kv_heads", "value_heads", "head_dim", "bytes", "device_ms",
           "q10_ms", "q90_ms", "latency_ms", "peak_mem_bytes", "peak_mem_timed_bytes", "cache_bytes", "rel_err",
           "check_seqlen", ROLES, kit.DEVICE_REPS, "family", "peak_mem_gib", "cache_mib", "speedup_vs_attention"]
#: The series whose slopes are fitted: (name in macros and tables, phase, pass, column).
SERIES = (("Fwd", "prefill", "fwd", "device_ms"), ("Fwdbwd", "prefill", "fwdbwd", "device_ms"),
          ("Decode", "decode", "fwd", "device_ms"), ("Mem", "prefill", "fwd", "peak_mem_gib"))


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    return kit.tidy_frame(df, COLUMNS)


def _fastest_attention(df: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, phase, pass, dtype, seqlen, launch): the fastest attention row's device time
    (columns ``device_ms``, ``impl``)."""
    d = df[df["impl"].isin(ATTENTION) & df["device_ms"].notna()]
    if d.empty:
        return d[[*KEYS, "impl", "device_ms"]]
    return d.loc[d.groupby(KEYS, dropna=False)["device_ms"].idxmin(), [*KEYS, "impl", "device_ms"]]


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``family``, ``peak_mem_gib``, ``cache_mib`` and ``speedup_vs_attention`` (module docstring)."""
    df = _tidy(df).copy()
    df["family"] = df["impl"].map(lambda i: "attention" if i in ATTENTION else "gdn")
    peak = pd.to_numeric(df["peak_mem_timed_bytes"], errors="coerce").fillna(
        pd.to_numeric(df["peak_mem_bytes"], errors="coerce"))
    df["peak_mem_gib"] = peak / 2**30
    df["cache_mib"] = pd.to_numeric(df["cache_bytes"], errors="coerce") / 2**20
    fastest = _fastest_attention(df)
    base = df[KEYS].merge(fastest[[*KEYS, "device_ms"]].rename(columns={"device_ms": "_attn"}), on=KEYS, how="left")
    df["speedup_vs_attention"] = np.where(df["family"] == "gdn", base["_attn"].to_numpy() / df["device_ms"], np.nan)
    return df


def _rows(df: pd.DataFrame, phase: str, pas: str = "fwd", launch: str = "stream") -> pd.DataFrame:
    d = _tidy(df)
    return d[(d["phase"] == phase) & (d["pass"] == pas) & (d["launch"] == launch)]


def _config() -> dict:
    return kit.study_config(STUDY)


def _impls(d: pd.DataFrame) -> list[str]:
    return kit.ordered(d["impl"].dropna(), ORDER)


def _label(impl: str) -> str:
    return style.label(STUDY, impl)


def _paired(df: pd.DataFrame, impl: str, pas: str) -> pd.DataFrame:
    """GDN ``impl``'s prefill (pass ``pas``) beside the fastest attention at each length at which
    both were timed: ``seqlen``, ``device_ms`` and the attention's, ``device_ms_attn``."""
    d = _rows(df, "prefill", pas)
    own = d[(d["impl"] == impl) & d["device_ms"].notna()][["seqlen", "device_ms"]]
    attn = _fastest_attention(d)[["seqlen", "device_ms"]]
    return own.merge(attn, on="seqlen", suffixes=("", "_attn")).sort_values("seqlen")


def crossover_of(df: pd.DataFrame, impl: str, pas: str = "fwd"):
    """:func:`kernels.longctx.scaling.crossover` of GDN ``impl``'s prefill (pass ``pas``) against the
    fastest attention at each length (:func:`_paired`)."""
    m = _paired(df, impl, pas)
    return crossover(m["seqlen"], m["device_ms"], m["device_ms_attn"])


def slopes(df: pd.DataFrame) -> dict[tuple[str, str], object]:
    """``{(series, impl): Slope}`` of every series of :data:`SERIES` and implementation measured at
    enough lengths (:func:`kernels.longctx.scaling.fit_slope` from ``fit_min_seqlen`` up)."""
    start = _config()["fit_min_seqlen"]
    out = {}
    for name, phase, pas, col in SERIES:
        d = _rows(df, phase, pas)
        d = d[d["status"] == "ok"]
        for impl in _impls(d):
            s = d[d["impl"] == impl]
            out[(name, impl)] = fit_slope(s["seqlen"], s[col], start)
    return out


def _at(df, impl, phase, pas, seqlen, col="device_ms", launch="stream"):
    d = _rows(df, phase, pas, launch)
    return kit.first(d[(d["impl"] == impl) & (d["seqlen"] == seqlen)], col)


def _vs_attention(df: pd.DataFrame, impl: str, pas: str, seqlen) -> kit.Ratio:
    """``impl``'s prefill speedup over the fastest attention at ``seqlen``, with its interval
    (:func:`kernels.paper.report_kit.ratio` of the two rows' device times)."""
    d = _rows(df, "prefill", pas)
    d = d[(d["seqlen"] == seqlen) & d["device_ms"].notna()]
    attn = d[d["impl"].isin(ATTENTION)].sort_values("device_ms")
    return kit.ratio(kit.first(attn, kit.DEVICE_REPS), kit.first(d[d["impl"] == impl], kit.DEVICE_REPS))


def crossover_bounds(df: pd.DataFrame, impl: str, pas: str = "fwd") -> tuple[float, float] | None:
    """The measured lengths between which GDN ``impl``'s prefill (pass ``pas``) overtakes the fastest
    attention, given the speedups' intervals, as ``(L, H)`` (tokens; NaN where a bound is not within
    the lengths measured). At each length at which both were timed (:func:`_paired`), the speedup over the fastest attention
    there has its :data:`~kernels.paper.report_kit.LEVEL` interval (:func:`_vs_attention`); H is the
    shortest length from which every interval lies wholly above 1 (``impl`` faster at H and at every
    longer length), NaN where the longest's does not; L is the longest length shorter than H whose
    interval lies wholly below 1 (``impl`` slower), NaN where none does. Between L and H the
    intervals hold 1 or do not stay above it, so the length from which ``impl`` is the faster lies
    between them, wherever :func:`crossover_of` interpolates it. None without a length with a
    finite interval."""
    lengths = list(_paired(df, impl, pas)["seqlen"])
    speedups = [_vs_attention(df, impl, pas, t) for t in lengths]
    if not any(np.isfinite(r.low) and np.isfinite(r.high) for r in speedups):
        return None
    first = len(lengths)  # the index of H: from it on, every interval above 1
    while first and speedups[first - 1].low > 1.0:
        first -= 1
    slower = [t for t, r in zip(lengths[:first], speedups[:first]) if r.high < 1.0]
    return (float(slower[-1]) if slower else np.nan), (float(lengths[first]) if first < len(lengths) else np.nan)
