"""Raw JSONL rows of one study -> one tidy table (CSV), validated on the way.

Every row is checked against its study's row schema,
``$defs.row`` of ``workflow/schemas/<study>.schema.yaml`` (which includes the common
``workflow/schemas/row.schema.yaml``), with no NaN or Infinity anywhere and its
``device_ms`` and ``median_ms`` the medians of its repetitions (the reproduction check
reads them; the harness stores each repetition rounded to the nanosecond and the median of
the unrounded ones, so within 1 ns); each case (study, impl and every field but the measured ones the schemas list) has
one row, and each file at least one; and each row is of its folder's GPU model
(:func:`folder_model`: the rows of ``data/raw/h200/`` are of an H200, those of a folder not
named after a model, a second run's ``data/reproductions/<name>/``, of one model). The first
problem stops the collect with ``path:line: what is wrong`` (a :class:`RowError`), before anything is
written.

Each row's ``roles`` (the parts of the config its case comes from, set by the
study's ``cases``) are kept; a row measured before rows carried them gets those
of the same case in the config section the data were measured with
(:func:`with_roles`), none where the config no longer makes its case.

The tidy table has one row per raw row: every field but ``env`` and ``timing``
(the repetition lists ``device_times_ms`` and ``times_ms`` and a per-kernel breakdown ``kernels``
each as one JSON text cell, the repetitions for the intervals of
:func:`kernels.paper.report_kit.ratio`; ``roles`` as one text cell, space-separated), the environment as ``env_*`` columns and the timing block as
``timing_*`` columns, the compile-ahead answer (``compile_ahead``: the cold preparation in a child
process, :func:`kernels.core.ahead.compile_ahead`) as ``ahead_*`` columns, what the GPU did around the case
(``gpu_state``, :mod:`kernels.core.gpustate`) as ``gpu_state_*`` columns (:func:`_gpu_state_columns`), plus ``gpu`` (the data folder), ``gpu_name``,
``n_reps``; from the device times (``device_times_ms``: the GPU's work alone,
:mod:`kernels.core.timing`) ``device_ms`` (median), ``q10_ms``, ``q90_ms`` and
``drift`` (the median of the last fifth of the repetitions over that of the
first fifth, five at least, minus one, with ten or more repetitions: how much
a call slowed while it was timed); from the latencies of calls launched from
Python (``times_ms``) ``latency_ms`` (median), ``latency_q10_ms``,
``latency_q90_ms``; ``host_overhead_ms`` (latency minus device time, medians);
``gbps`` (bytes / device time, 1e9 B/s) and ``tflops`` (flops / device time,
1e12 FLOP/s). Then the study's ``report.derive`` adds its own metrics, which
compare kernels by device time.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd

from kernels.paper import rows as rows_mod
from kernels.core.checks import schema_error
from kernels.core.files import write_atomic

log = logging.getLogger("kernels.paper.collect")


class RowError(ValueError):
    """A bad row or row file, ``path:line: what is wrong`` (``path: ...`` for a file without rows):
    what stops a collect (:func:`read_rows`, :func:`load_rows`); the rule's script prints this one line
    (``workflow/scripts/collect.py``)."""


def _no_constant(name: str):
    raise ValueError(f"non-finite number {name} (not JSON; a missing value is null)")


def read_rows(path: str | Path) -> list[tuple[int, dict]]:
    """``(line number, row)`` of each non-blank line of a JSONL file.

    Raises :class:`RowError` ``'path:line: what is wrong'`` for a line that is not
    one JSON object in UTF-8 (a truncated or edited line) or holds NaN or Infinity,
    and ``'path: ...'`` for a file without rows.
    """
    rows = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise RowError(f"{path}:{n}: not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                               f"{exc.start + 1})") from None
            if not text:
                continue
            try:
                row = json.loads(text, parse_constant=_no_constant)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(text) or exc.msg.startswith("Unterminated string")
                what = (f"the line ends at column {len(text)} inside a row (cut short?)" if cut
                        else f"{exc.msg} (column {exc.pos + 1})")
                raise RowError(f"{path}:{n}: not valid JSON: {what}") from None
            except ValueError as exc:
                raise RowError(f"{path}:{n}: {exc}") from None
            if not isinstance(row, dict):
                raise RowError(f"{path}:{n}: a row is a JSON object, not {type(row).__name__}")
            rows.append((n, row))
    if not rows:
        raise RowError(f"{path}: no rows (an empty file); measure it again or delete it")
    return rows


def folder_model(path: str | Path) -> str | None:
    """The GPU model (:func:`kernels.paper.rows.row_model`) whose rows the run folder of the row file
    ``path`` (``<folder>/<study>/<impl>.jsonl``) holds: the folder's name where it is a model the
    project knows (:data:`kernels.paper.rows.MODELS`: ``data/raw/h200``, ``results/smoke/raw/cpu``);
    None for another folder (a second run's ``data/reproductions/<name>``, a test's), whose rows are
    of the model of the first of them (:func:`load_rows`)."""
    name = Path(path).parent.parent.name
    return name if name in rows_mod.MODELS else None


def _model_error(row: dict, folder: Path, model: str, first: tuple[str, str] | None) -> str | None:
    """What is wrong with ``row`` in the run folder ``folder`` of GPU model ``model`` (named after
    it, or, ``first``, of its first row: its position and GPU name), None when it is of that model."""
    if rows_mod.row_model(row) == model:
        return None
    found = f"row of GPU {row['env']['gpu_name']!r} ({rows_mod.row_model(row)}) in {model} data"
    if first is None:
        return f"{found} ({folder}/)"
    return (f"{found} ({folder}/, whose row {first[0]} is of {first[1]!r}: a folder holds the rows of "
            f"one GPU model)")


def load_rows(paths: list[str], study: str, configured: set[str] | None = None,
              only: set[str] | None = None) -> list[dict]:
    """Read and validate the rows of ``paths`` (see the module docstring); ``configured``: the case
    ids (:func:`kernels.paper.rows.configured_cases`) of the config the rows were measured with, of
    which each row's case must be one (None: any case); ``only``: the case ids to read, the other
    rows are skipped unread (None: every row).

    Raises :class:`RowError` ``'path:line: what is wrong'`` for the first bad row (a row whose
    ``device_ms`` or ``median_ms`` is not the median of its repetitions among them);
    a row of another study (its ``study`` field) names that study rather than what this study's
    schema finds wrong with it: ``'data/raw/h200/flex/flex.jsonl:4: row of study 'gdn' in 'flex' data'``;
    a second row of a case names both positions; a row of another GPU model than its folder's
    (:func:`folder_model`; a folder not named after a model: its first row's among ``paths``)
    names the GPU it was measured on and the folder's model:
    ``'data/raw/h200/gdn/chunk.jsonl:4: row of GPU 'NVIDIA H100 80GB HBM3' (h100-80gb-hbm3) in h200
    data (data/raw/h200/)'``.
    """
    schema = rows_mod.row_schema(study)
    rows, seen, models = [], {}, {}
    for path in paths:
        folder = Path(path).parent.parent
        for n, row in read_rows(path):
            if only is not None and rows_mod.case_id(row) not in only:
                continue
            if isinstance(row.get("study"), str) and row["study"] != study:  # named as such, not by its schema
                raise RowError(f"{path}:{n}: row of study {row['study']!r} in {study!r} data")
            error = schema_error(row, schema)
            if error:
                raise RowError(f"{path}:{n}: {error}")
            if folder not in models:  # named after its model, or of its first row's
                model = folder_model(path)
                models[folder] = ((model, None) if model is not None
                                  else (rows_mod.row_model(row), (f"{path}:{n}", row["env"]["gpu_name"])))
            error = _model_error(row, folder, *models[folder])
            if error:
                raise RowError(f"{path}:{n}: {error}")
            for key, values in (("device_ms", "device_times_ms"), ("median_ms", "times_ms")):
                median = statistics.median(row[values]) if row.get(values) else None
                if median is not None and row.get(key) is not None \
                        and not math.isclose(row[key], median, rel_tol=1e-6, abs_tol=1e-6):
                    raise RowError(f"{path}:{n}: {key} {row[key]:g} is not the median of {values} ({median:g})")
            if row["impl"] != Path(path).stem:
                raise RowError(f"{path}:{n}: row of impl {row['impl']!r} in the file of impl {Path(path).stem!r}")
            case = rows_mod.case_id(row)
            if configured is not None and case not in configured:
                raise RowError(f"{path}:{n}: {rows_mod.case_label(row)}: not a case of the config section it "
                               f"was measured with (config/studies/{study}.yaml), which makes every case "
                               f"of its rows")
            if case in seen:
                raise RowError(f"{path}:{n}: same case as {seen[case]} (a case, i.e. study, impl and "
                               f"every field but the measured ones, has one row)")
            seen[case] = f"{path}:{n}"
            rows.append(row)
    return rows


def with_roles(rows: list[dict], study: str, section: dict | None) -> list[dict]:
    """``rows`` (raw rows of ``study``), each with ``roles``: its own, or, for a row without
    them, those of its case (:func:`kernels.paper.rows.case_id`) among the cases ``section`` (the
    study's config section, e.g. ``config[study]["sweep"]``) makes for the row's impl with
    ``kernels.<study>.study.cases``; ``[]`` when the section does not make the case, is None,
    or the study's cases carry no roles.
    The rows given are not changed."""
    missing = {row["impl"] for row in rows if rows_mod.ROLES not in row}
    known = {}
    if missing and section is not None:
        cases = importlib.import_module(f"kernels.{study}.study").cases
        for impl in sorted(missing):
            for case in cases(section, impl):
                known[rows_mod.case_id({"study": study, "impl": impl, **case})] = case.get(rows_mod.ROLES, [])
    out = [row if rows_mod.ROLES in row else {**row, rows_mod.ROLES: known.get(rows_mod.case_id(row), [])}
           for row in rows]
    unmatched = sum(1 for row, new in zip(rows, out) if rows_mod.ROLES not in row and not new[rows_mod.ROLES])
    if unmatched:
        log.warning("%s: %d rows without roles whose case the config no longer makes", study, unmatched)
    return out


#: Raw list fields that the tidy table summarises, and keeps as JSON text cells.
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


#: A row's ``gpu_state`` when it has none (measured before :mod:`kernels.core.gpustate` existed).
NOT_RECORDED = "not recorded"


def _gpu_state_columns(state: dict | str | None) -> dict:
    """A row's ``gpu_state`` (:func:`kernels.core.gpustate.recorded`) as flat ``gpu_state_*`` columns
    (``gpu_state_after_sm_clock_mhz``, ``gpu_state_power_limit_w``, ...; the clock-event reasons
    joined by spaces), or one column ``gpu_state`` saying why there are none: :data:`NOT_RECORDED`,
    NVML's error, or ``cpu`` for a row measured without CUDA."""
    if not isinstance(state, dict) or "error" in state:
        return {"gpu_state": state["error"] if isinstance(state, dict) else state or "cpu"}
    flat = {"gpu_state": "recorded"}
    for key, value in state.items():
        for sub, v in (value.items() if isinstance(value, dict) else [(None, value)]):
            name = "_".join(p for p in ("gpu_state", key, sub) if p)
            flat[name] = " ".join(v) if isinstance(v, list) else v
    return flat


def tidy(rows: list[dict], gpu: str) -> pd.DataFrame:
    """One tidy row per raw row, with the generic metrics (see module docstring)."""
    records = []
    for row in rows:
        ok = row["status"] == "ok"
        device = np.asarray(row.get("device_times_ms", []), dtype=float)
        latency = np.asarray(row["times_ms"], dtype=float)
        rec = {k: v for k, v in row.items()
               if k not in ("env", "kernels", "timing", "compile_ahead", "gpu_state", rows_mod.ROLES, *_LISTS)}
        rec[rows_mod.ROLES] = " ".join(row.get(rows_mod.ROLES, []))
        if "kernels" in row:  # per-kernel breakdown, kept as one JSON text cell
            rec["kernels"] = json.dumps(row["kernels"])
        for name in _LISTS:  # the repetitions, kept as JSON text cells (ok rows only)
            rec[name] = json.dumps(row.get(name, []) if ok else [])
        device_ms, q10, q90 = _quantiles(device, ok)
        latency_ms, lat_q10, lat_q90 = _quantiles(latency, ok)
        rec.update(
            gpu=gpu,
            gpu_name=row["env"].get("gpu_name"),
            **{f"env_{k}": (json.dumps(v, sort_keys=True) if isinstance(v, dict) else v)
               for k, v in row["env"].items()},
            **{f"timing_{k}": v for k, v in (row.get("timing") or {}).items()},
            **{f"ahead_{k}": v for k, v in (row.get("compile_ahead") or {}).items()},
            **_gpu_state_columns(row.get("gpu_state", NOT_RECORDED)),
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


def collect(study: str, paths: list[str], gpu: str, out: str, section: dict | None = None,
            configured: bool = False) -> pd.DataFrame:
    """Validate the rows of ``paths``, give each its roles from ``section`` where it has none
    (:func:`with_roles`; ``section``: the study's config section the rows were measured with),
    build the study's tidy table and write it to ``out`` (CSV). ``configured``: the rows are of
    today's code and ``section`` (current, or measured by this run), so each must be one of the
    section's cases (:func:`load_rows`)."""
    cases = rows_mod.configured_cases({study: section}) if configured and section is not None else None
    rows = with_roles(load_rows(paths, study, cases), study, section)
    df = tidy(rows, gpu)
    if not df.empty:
        df = importlib.import_module(f"kernels.{study}.report").derive(df)
    log.info("%s: %d rows from %d files (%s)", study, len(df), len(paths),
             df["status"].value_counts().to_dict() if not df.empty else {})
    write_atomic(out, df.to_csv(index=False))
    return df
