"""What identifies a row's case, apart from what its measurement produced.

A row (one JSON line of ``data/raw/<gpu>/<study>/<impl>.jsonl``) is its
*case* — ``study``, ``impl`` and every field that says what was run (pass,
dtype, the study's shape fields, mask, launch, ...) — plus the fields its
measurement wrote: times, status, errors, one-off costs, the environment.
Two rows of two runs are the same case when their case fields are equal
(:func:`case_id`); the reproduction check (:mod:`kernels.reproduce`) pairs
rows that way. :data:`MEASURED_FIELDS` and :data:`MEASURED_PREFIXES` are the
one list of the fields that are *not* part of a case: a field a study adds
is a case field unless it is named here.
"""

from __future__ import annotations

import json

#: Fields written by a measurement, not part of the case (see :data:`MEASURED_PREFIXES` too).
MEASURED_FIELDS = frozenset({
    # the timings and how they were taken
    "times_ms", "median_ms", "timing", "warmup_ms",
    # what happened: status, errors, outcomes of the call
    "status", "error", "unsupported_reason", "out_dtype", "tuned", "recompiles", "dispatch",
    "deterministic", "final_state_grad", "kernels", "kernels_error",
    # one-off costs of preparing the call
    "setup_s", "first_call_s", "compile_s", "mask_compile_s", "mask_build_ms",
    # the environment: GPU, versions, the anchor's module and version
    "env", "anchor_module", "anchor_version",
    # the torch.compile mode the study picks for the device (max-autotune on a GPU)
    "compile_mode",
    # counts the study's code computes from the case (a change of formula is not a new case)
    "bytes", "flops", "flops_blocks", "density_blocks", "density_elements",
    # the label of the config group a case came from (the studies' cases() drop duplicates without it)
    "series",
})
#: Prefixes of measured fields: device times (``device_ms``, ``device_times_ms``), peak memory
#: (``peak_mem_bytes``, ``peak_mem_timed_bytes``), errors against the reference (``rel_err_*``).
MEASURED_PREFIXES = ("device_", "peak_mem", "rel_err")


def is_measured(field: str) -> bool:
    """True when ``field`` is written by a measurement rather than part of the case."""
    return field in MEASURED_FIELDS or field.startswith(MEASURED_PREFIXES)


def case_fields(row: dict) -> dict:
    """The case of ``row`` (a raw row, or a study's case dict with ``study`` and ``impl``):
    every field that is not measured, sorted by name."""
    return {k: row[k] for k in sorted(row) if not is_measured(k)}


def case_id(row: dict) -> str:
    """A text key of the case of ``row``, equal for two rows of the same case (JSON, sorted keys)."""
    return json.dumps(case_fields(row), sort_keys=True)


def case_label(row: dict, skip: tuple[str, ...] = ("study", "impl")) -> str:
    """The case of ``row`` for a reader: pass and dtype first, then ``field=value`` by name;
    fields in ``skip`` and fields without a value are left out."""
    case = {k: v for k, v in case_fields(row).items() if k not in skip and v is not None}
    head = [str(case.pop(k)) for k in ("pass", "dtype") if k in case]
    return " ".join(head + [f"{k}={v}" for k, v in case.items()])
