"""What identifies a row's case, apart from what its measurement produced.

A row (one JSON line of ``data/raw/<gpu>/<study>/<impl>.jsonl``) is its
*case* — ``study``, ``impl`` and every field that says what was run (pass,
dtype, the study's shape fields, mask, launch, ...) — plus the fields its
measurement wrote: times, status, errors, one-off costs, the environment.
Two rows of two runs are the same case when their case fields are equal
(:func:`case_id`); the reproduction check (:mod:`kernels.paper.reproduce`) pairs
rows that way, and the collect step allows one row per case
(:mod:`kernels.paper.collect`). The fields that are *not* part of a case are listed
once, as ``measured`` in the row schemas (:func:`measured_fields`): a field a
study adds is a case field unless its row schema names it there. One field is
neither: ``roles`` (:data:`ROLES`), the parts of the config a case comes from,
which say how the reports use the row, not what was run; a case keeps its
identity (and pairs with the rows measured before roles existed) when the
config gives it another role.

A row's GPU *model* is the folder its GPU's name gives (:func:`row_model`: ``env.gpu_name``
by :func:`kernels.core.env.gpu_slug`, 'NVIDIA H200' -> ``h200``, ``cpu`` for rows measured on
the CPU); the rows of a folder are of one model (:mod:`kernels.paper.collect`), and the models the
project knows by name are :data:`MODELS`.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from kernels.core.checks import schema_at
from kernels.core.env import gpu_slug

SCHEMAS = Path(__file__).resolve().parents[2] / "workflow" / "schemas"


#: The GPU models the project knows, by folder (``data/raw/<model>``, :func:`row_model`), each with
#: the name a reader is given: the GPU's name without the vendor's, and for the H100 (which names itself
#: "NVIDIA H100 80GB HBM3") its form factor, SXM, the one whose datasheet column gives 132 SMs, 80 GB
#: of HBM3 and a 700 W limit, as those GPUs report: a folder named after one of them
#: holds rows of that model only (:func:`kernels.paper.collect.load_rows`); ``cpu``: rows measured on
#: the CPU (the smoke run's, a measuring run with ``gpu=cpu``).
MODELS = {"h200": "H200", "h100-80gb-hbm3": "H100 SXM", "cpu": "CPU"}
#: Each model's datasheet peak HBM bandwidth, GB/s (NVIDIA H200 Tensor Core GPU datasheet, H200 SXM:
#: 4.8 TB/s HBM3e; NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 3.35 TB/s HBM3), and its
#: dense bfloat16 tensor-core peak, TFLOP/s (989 on both, the sparse 1979 halved: the same SM90
#: compute, 132 SMs at the same clocks). A bandwidth-bound kernel's time scales with the inverse of
#: the first, a compute-bound one's with that of the second (:mod:`kernels.paper.bounds`).
PEAK_GBPS = {"h200": 4800.0, "h100-80gb-hbm3": 3350.0}
PEAK_BF16_TFLOPS = {"h200": 989.0, "h100-80gb-hbm3": 989.0}
#: Each model's memory, GB (the same datasheets: 141 GB of HBM3e, 80 GB of HBM3).
MEMORY_GB = {"h200": 141, "h100-80gb-hbm3": 80}


def row_model(row: dict) -> str:
    """The GPU model of a raw row: :func:`kernels.core.env.gpu_slug` of its ``env.gpu_name``
    ('NVIDIA H100 80GB HBM3' -> ``h100-80gb-hbm3``, 'cpu' -> ``cpu``)."""
    return gpu_slug(row["env"]["gpu_name"])


def model_label(model: str) -> str:
    """The name of the GPU model ``model`` (a folder, :data:`MODELS`) for a reader: ``h100-80gb-hbm3``
    -> 'H100 SXM'; a model not in :data:`MODELS` in capitals, a space for each hyphen."""
    return MODELS.get(model, model.replace("-", " ").upper())


def model_short(model: str) -> str:
    """The GPU model ``model``'s name where the text is tight (a table cell, a count): the first word of
    :func:`model_label`, ``h100-80gb-hbm3`` -> 'H100'."""
    return model_label(model).split()[0]


#: Where a study's row schema sits in its schema file (beside the schema of its config section).
ROW_POINTER = "/$defs/row"


def row_schema(study: str) -> str:
    """The row schema of ``study``: ``workflow/schemas/<study>.schema.yaml#/$defs/row``, for
    :func:`kernels.core.checks.validator`; ValueError if the file or its ``$defs.row`` is missing."""
    path = SCHEMAS / f"{study}.schema.yaml"
    where = f"{path.relative_to(SCHEMAS.parent.parent)}#{ROW_POINTER}"
    try:
        schema_at(f"{path}#{ROW_POINTER}")
    except (FileNotFoundError, KeyError):
        raise ValueError(f"study {study!r} has no row schema {where}") from None
    return f"{path}#{ROW_POINTER}"


#: The row field that lists a case's roles (set by the study's ``cases``; :func:`kernels.paper.collect.with_roles`).
ROLES = "roles"


def measured_fields(study: str) -> frozenset[str]:
    """Fields a measurement of ``study`` writes: the ``measured`` lists of the common row schema
    (``workflow/schemas/row.schema.yaml``) and of the study's (:func:`row_schema`), the one place
    they are written. ValueError when the study has no row schema."""
    schemas = [schema_at(SCHEMAS / "row.schema.yaml"), schema_at(row_schema(study))]
    return frozenset(field for schema in schemas for field in schema.get("measured", ()))


def case_fields(row: dict) -> dict:
    """The case of ``row`` (a raw row, or a study's case dict with ``study`` and ``impl``):
    every field that is not measured (:func:`measured_fields`) and not :data:`ROLES`, sorted by name."""
    measured = measured_fields(row["study"]) | {ROLES}
    return {k: row[k] for k in sorted(row) if k not in measured}


def case_id(row: dict) -> str:
    """A text key of the case of ``row``, equal for two rows of the same case (JSON, sorted keys)."""
    return json.dumps(case_fields(row), sort_keys=True)


def case_label(row: dict, skip: tuple[str, ...] = ("study", "impl")) -> str:
    """The case of ``row`` for a reader: pass and dtype first, then ``field=value`` by name;
    fields in ``skip`` and fields without a value are left out."""
    case = {k: v for k, v in case_fields(row).items() if k not in skip and v is not None}
    head = [str(case.pop(k)) for k in ("pass", "dtype") if k in case]
    return " ".join(head + [f"{k}={v}" for k, v in case.items()])


def configured_cases(sections: dict[str, dict]) -> set[str]:
    """Case ids (:func:`case_id`) of every case a run of the config ``sections`` ({study: its
    section, e.g. ``config[study]["quick"]``}) measures: ``kernels.<study>.study.cases`` of each
    implementation the section lists."""
    out = set()
    for study, section in sections.items():
        mod = importlib.import_module(f"kernels.{study}.study")
        for impl in section["impls"]:
            out.update(case_id({"study": study, "impl": impl, **case}) for case in mod.cases(section, impl))
    return out
