"""The SwiGLU study's tidy table: its derived metrics and the selections that the figures, tables
(:mod:`kernels.swiglu.report`) and quoted numbers (:mod:`kernels.swiglu.numbers`) start from, and the
sweep's models and quoted shapes that they name, built on kernels.paper.report_kit.

Derived metrics (:func:`derive`), per row:

``us``, ``q10_us``, ``q90_us``   device time: median and quantiles in microseconds;
``latency_us``     median latency of a call launched from Python, microseconds;
``pct_copy``       ``gbps`` as a percentage of the same run's ``copy`` bandwidth
                   at the same gpu, dtype, pass and numel (elementwise rows);
``pct_peak``       ``gbps`` as a percentage of the GPU's datasheet HBM
                   bandwidth (:data:`PEAK_GBPS`; NaN for other GPUs);
``speedup_eager``  eager's median device time over this row's, same gpu, dtype, pass,
                   shape and launch mode.

``gbps`` is computed by the collect step on the *minimum* bytes of the
operation (study.py), so an implementation that moves more bytes shows a
lower figure than its real traffic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper.rows import PEAK_GBPS

#: The sweep's config section, whose models and GEMM groups the text names.
SWEEP = kit.study_config("swiglu")
#: The models of the sweep's config (``models``): FFN hidden size -> model name, and (model
#: width, hidden size), a GEMM's shape, -> model name.
MODELS = {m["hidden"]: m["name"] for m in SWEEP.get("models", [])}
GEMM_MODELS = {(m["gemm_in"], m["hidden"]): m["name"] for m in SWEEP.get("models", [])}
#: The role of the decode size that the text quotes (config ``roles``; the prefill shape's is
#: :data:`~kernels.swiglu.study.PROFILE_ROLE`).
DECODE_ROLE = "quoted_decode"
DEFAULTS = {"series": "grid", "launch": "stream", "gemm_in": 0}
SHAPE = ["tokens", "hidden", "gemm_in"]
#: The tidy table's columns that the report reads: :func:`_prepared` gives a table without them
#: (a study without rows) these columns, all NaN (:func:`kernels.paper.report_kit.tidy_frame`).
COLUMNS = ["gpu", "impl", "status", "dtype", "pass", "numel", *SHAPE, "series", "launch", "device_ms", "q10_ms",
           "q90_ms", "latency_ms", "host_overhead_ms", "bytes", "gbps", "tflops", "compile_s", "warmup_ms", "out_dtype",
           "rel_err", kit.DEVICE_REPS, kit.LATENCY_REPS]


def _prepared(df: pd.DataFrame) -> pd.DataFrame:
    df = kit.tidy_frame(df, COLUMNS).copy()
    for col, value in DEFAULTS.items():
        df[col] = df[col].fillna(value)
    return df


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``us``, ``q10_us``, ``q90_us`` (device time), ``latency_us``, ``pct_copy``, ``pct_peak`` and
    ``speedup_eager`` (by device time)."""
    df = _prepared(df)
    for ms, us in (("device_ms", "us"), ("q10_ms", "q10_us"), ("q90_ms", "q90_us"),
                   ("latency_ms", "latency_us")):
        df[us] = df[ms].astype(float) * 1e3
    ok = df["status"].eq("ok")
    copy = (df[ok & df["impl"].eq("copy")].groupby(["gpu", "dtype", "pass", "numel"])["gbps"]
            .median().rename("copy_gbps").reset_index())
    df = df.merge(copy, on=["gpu", "dtype", "pass", "numel"], how="left")
    df["pct_copy"] = np.where(df["gemm_in"].astype(float) > 0, np.nan, 100.0 * df["gbps"] / df["copy_gbps"])
    df["pct_peak"] = 100.0 * df["gbps"] / df["gpu"].map(PEAK_GBPS).astype(float)
    keys = ["gpu", "dtype", "pass", "launch", *SHAPE]
    ok = df["status"].eq("ok")  # on the merged frame's index
    eager = (df[ok & df["impl"].eq("eager")].groupby(keys)["device_ms"].median()
             .rename("eager_ms").reset_index())
    df = df.merge(eager, on=keys, how="left")
    df["speedup_eager"] = df["eager_ms"] / df["device_ms"]
    return df.drop(columns=["copy_gbps", "eager_ms"])


# ----------------------------------------------------------------------------
# selections


def _quoted(role: str) -> dict:
    """The selector of ``role`` in the sweep's ``roles`` (the shape the text quotes).
    ValueError naming the config key when the sweep has none."""
    if role not in SWEEP.get("roles", {}):
        raise ValueError(f"config swiglu.sweep.roles: no {role!r} (the shape the text quotes)")
    return SWEEP["roles"][role]


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    """The ok rows, derived (the tidy CSV already is; a raw tidy table is derived here)."""
    df = _prepared(df) if "speedup_eager" in df else derive(df)
    return df[df["status"].eq("ok") & df["device_ms"].notna()]


def _elementwise(df: pd.DataFrame, dtype="bfloat16") -> pd.DataFrame:
    d = _ok(df)
    return d[d["dtype"].eq(dtype) & d["gemm_in"].astype(float).eq(0) & d["launch"].eq("stream")]


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    """The bfloat16 elementwise rows launched per call (:func:`_elementwise`) of the flat series (one
    hidden size, more rows for more elements), or all of them where the flat series has none."""
    data = _elementwise(df)
    flat = data[data["series"].eq("flat")]
    return flat if not flat.empty else data
