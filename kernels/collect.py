"""Raw JSONL rows of one study -> one tidy table (CSV), validated on the way.

Every row is checked against ``workflow/schemas/row.schema.yaml``
(jsonschema); a row that fails stops the collect with the file, the line and
the reason. The tidy table has one row per raw row: every field but ``env``,
``timing`` and the repetition lists (a per-kernel breakdown ``kernels`` as
one JSON text cell), the environment as ``env_*`` columns and the timing
block as ``timing_*`` columns, plus ``gpu`` (the data folder),
``gpu_name``, ``n_reps``; from the device times (``device_times_ms``: the
GPU's work alone, :mod:`kernels.timing`) ``device_ms`` (median), ``q10_ms``,
``q90_ms`` and ``drift`` (the median of the last fifth of the repetitions
over that of the first fifth, five at least, minus one, with ten or more
repetitions: how much a call slowed while it was timed); from the latencies of calls launched from Python
(``times_ms``) ``latency_ms`` (median), ``latency_q10_ms``,
``latency_q90_ms``; ``host_overhead_ms`` (latency minus device time, medians);
``gbps`` (bytes / device time, 1e9 B/s) and ``tflops`` (flops / device time,
1e12 FLOP/s). Then the study's ``report.derive`` adds its own metrics, which
compare kernels by device time.
"""

from __future__ import annotations

import importlib
import json
import logging
from functools import lru_cache
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import yaml

from kernels.harness import write_atomic

log = logging.getLogger("kernels.collect")
SCHEMA = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "row.schema.yaml"


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    schema = yaml.safe_load(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def load_rows(paths: list[str], study: str) -> list[dict]:
    """Read and validate the rows of ``paths``; raise ValueError naming the bad line."""
    rows = []
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                errors = sorted(_validator().iter_errors(row), key=lambda e: e.path)
                if errors:
                    raise ValueError(f"{path}:{n}: {errors[0].message} (at {list(errors[0].path)})")
                if row["study"] != study:
                    raise ValueError(f"{path}:{n}: row of study {row['study']!r} in {study!r} data")
                rows.append(row)
    return rows


#: Raw list fields that the tidy table summarises instead of copying.
_LISTS = ("times_ms", "device_times_ms")


def _quantiles(times: np.ndarray, ok: bool) -> tuple[float, float, float]:
    """(median, q10, q90) of ``times`` in ms; NaN when the row is not ok or has none."""
    if not ok or times.size == 0:
        return np.nan, np.nan, np.nan
    return float(np.median(times)), float(np.quantile(times, 0.1)), float(np.quantile(times, 0.9))


def _drift(times: np.ndarray) -> float:
    """How much a call slowed while timed: the median of its last fifth of repetitions over that of
    its first fifth (five at least), minus one; NaN with fewer than ten repetitions."""
    if times.size < 10:
        return np.nan
    k = max(5, times.size // 5)
    return float(np.median(times[-k:]) / np.median(times[:k]) - 1)


def tidy(rows: list[dict], gpu: str) -> pd.DataFrame:
    """One tidy row per raw row, with the generic metrics (see module docstring)."""
    records = []
    for row in rows:
        ok = row["status"] == "ok"
        device = np.asarray(row.get("device_times_ms", []), dtype=float)
        latency = np.asarray(row["times_ms"], dtype=float)
        rec = {k: v for k, v in row.items() if k not in ("env", "kernels", "timing", *_LISTS)}
        if "kernels" in row:  # per-kernel breakdown, kept as one JSON text cell
            rec["kernels"] = json.dumps(row["kernels"])
        device_ms, q10, q90 = _quantiles(device, ok)
        latency_ms, lat_q10, lat_q90 = _quantiles(latency, ok)
        rec.update(
            gpu=gpu,
            gpu_name=row["env"].get("gpu_name"),
            **{f"env_{k}": (json.dumps(v, sort_keys=True) if isinstance(v, dict) else v)
               for k, v in row["env"].items()},
            **{f"timing_{k}": v for k, v in (row.get("timing") or {}).items()},
            n_reps=int(device.size),
            device_ms=device_ms, q10_ms=q10, q90_ms=q90,
            latency_ms=latency_ms, latency_q10_ms=lat_q10, latency_q90_ms=lat_q90,
            host_overhead_ms=latency_ms - device_ms,
            drift=_drift(device) if ok else np.nan,
        )
        rec.pop("median_ms", None)  # the latency's median is latency_ms
        records.append(rec)
    df = pd.DataFrame.from_records(records)
    if df.empty:
        return df
    seconds = df["device_ms"].astype(float) / 1e3
    df["gbps"] = df["bytes"].astype(float) / seconds / 1e9
    df["tflops"] = df["flops"].astype(float) / seconds / 1e12
    return df


def collect(study: str, paths: list[str], gpu: str, out: str) -> pd.DataFrame:
    """Validate the rows of ``paths``, build the study's tidy table and write it to ``out`` (CSV)."""
    rows = load_rows(paths, study)
    df = tidy(rows, gpu)
    if not df.empty:
        df = importlib.import_module(f"kernels.{study}.report").derive(df)
    log.info("%s: %d rows from %d files (%s)", study, len(df), len(paths),
             df["status"].value_counts().to_dict() if not df.empty else {})
    write_atomic(out, df.to_csv(index=False))
    return df
