"""Raw JSONL rows of one study -> one tidy table (CSV), validated on the way.

Every row is checked against ``workflow/schemas/row.schema.yaml``
(jsonschema); a row that fails stops the collect with the file, the line and
the reason. The tidy table has one row per raw row: every field but ``env``
and ``times_ms`` (a per-kernel breakdown ``kernels`` as one JSON text cell),
the environment as ``env_*`` columns, plus ``gpu`` (the
data folder), ``gpu_name``, ``q10_ms``,
``q90_ms``, ``n_reps``, ``drift`` (the mean of the last five repetitions over
that of the first five, minus one, with at least ten: how much a call slowed
while it was timed), ``gbps`` (bytes / median time, 1e9 B/s) and
``tflops`` (flops / median time, 1e12 FLOP/s); then the study's
``report.derive`` adds its own metrics.
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


def tidy(rows: list[dict], gpu: str) -> pd.DataFrame:
    """One tidy row per raw row, with the generic metrics (see module docstring)."""
    records = []
    for row in rows:
        times = np.asarray(row["times_ms"], dtype=float)
        rec = {k: v for k, v in row.items() if k not in ("env", "times_ms", "kernels")}
        if "kernels" in row:  # per-kernel breakdown, kept as one JSON text cell
            rec["kernels"] = json.dumps(row["kernels"])
        ok = row["status"] == "ok" and times.size > 0
        rec.update(
            gpu=gpu,
            gpu_name=row["env"].get("gpu_name"),
            **{f"env_{k}": v for k, v in row["env"].items()},
            n_reps=int(times.size),
            q10_ms=float(np.quantile(times, 0.1)) if ok else np.nan,
            q90_ms=float(np.quantile(times, 0.9)) if ok else np.nan,
            drift=float(times[-5:].mean() / times[:5].mean() - 1) if ok and times.size >= 10 else np.nan,
        )
        if not ok:
            rec["median_ms"] = np.nan
        records.append(rec)
    df = pd.DataFrame.from_records(records)
    if df.empty:
        return df
    seconds = df["median_ms"].astype(float) / 1e3
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
