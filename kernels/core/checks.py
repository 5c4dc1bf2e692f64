"""Checks that stop a run before it can overwrite or corrupt the paper's data.

Each failure is one short message naming what to fix: a config key, a
file, a folder. Used by ``workflow/rules/common.smk`` before any job runs
(config sections, committed rows, the measuring host) and by the jobs
themselves (the measurement job's GPU, ``kernels.paper.collect``'s rows).
"""

from __future__ import annotations

import os
import subprocess
import urllib.parse
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import jsonschema
import referencing
import referencing.jsonschema
import yaml

from kernels.core.env import gpu_slug
from kernels.core.registry import registry

#: Longest text of a schema violation kept in a message (jsonschema quotes whole values).
MAX_MESSAGE = 160


#: The keyword of a schema definition whose ``enum`` is a study's registered implementations.
REGISTRY_KEY = "x-registry"


@lru_cache(maxsize=None)
def _read_schema(path: Path) -> dict:
    """The YAML schema at ``path``, each definition that names a study under :data:`REGISTRY_KEY`
    given the ``enum`` of that study's implementations (``kernels/<study>/impls.py``), so the
    names are written once, in the registry. Read once per process (the row schemas are looked
    up for every row, :func:`kernels.paper.rows.measured_fields`); callers do not change it."""
    schema = yaml.safe_load(path.read_text())
    for definition in schema.get("$defs", {}).values():
        if isinstance(definition, dict) and REGISTRY_KEY in definition:
            names = list(registry(definition[REGISTRY_KEY]))
            if not names:
                raise ValueError(f"{path}: {REGISTRY_KEY} {definition[REGISTRY_KEY]!r} names no study "
                                 "with a registry (kernels/<study>/impls.py)")
            definition["enum"] = names
    return schema


@lru_cache(maxsize=None)
def _load_schema(uri: str) -> referencing.Resource:
    """The YAML schema at a ``file://`` URI, for ``$ref`` between schema files."""
    path = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
    return referencing.Resource.from_contents(_read_schema(path),
                                              default_specification=referencing.jsonschema.DRAFT202012)


def _split(schema_path: str | Path) -> tuple[Path, str]:
    """``(file, JSON pointer)`` of ``schema_path``, a file optionally followed by ``#<pointer>``."""
    path, _, pointer = str(schema_path).partition("#")
    return Path(path).resolve(), pointer


def schema_at(schema_path: str | Path) -> dict:
    """The (sub)schema at ``schema_path`` (``file.yaml`` or ``file.yaml#/$defs/row``), as
    :func:`_read_schema` reads the file; KeyError naming the pointer if it has no such part."""
    path, pointer = _split(schema_path)
    node = _read_schema(path)
    for part in filter(None, pointer.split("/")):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"{path}: no {pointer} in the schema")
        node = node[part]
    return node


@lru_cache(maxsize=None)
def validator(schema_path: str | Path) -> jsonschema.protocols.Validator:
    """A validator of the YAML JSON schema at ``schema_path``, a file or a part of one
    (``<study>.schema.yaml#/$defs/row``, a study's row schema).

    ``$ref`` to another file is resolved relative to ``schema_path`` (a row
    schema refers to the common row schema and to its study's config schema,
    so that each enum is written once); a definition with :data:`REGISTRY_KEY` lists the
    study's registered implementations (:func:`_read_schema`).
    """
    path, pointer = _split(schema_path)
    if pointer:
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": f"{path.as_uri()}#{pointer}"}
    else:
        schema = {**_read_schema(path), "$id": path.as_uri()}
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=referencing.Registry(retrieve=_load_schema))


def key_path(parts: Iterable, root: str = "") -> str:
    """``['sweep', 'groups', 0, 'impls']`` -> ``'sweep.groups[0].impls'`` (after ``root``)."""
    out = root
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe(error: jsonschema.ValidationError, root: str = "") -> str:
    """A schema violation as ``'key: what is wrong'`` on one line.

    An unknown key is named with the keys allowed there, a missing one by its
    name, a ``oneOf``/``anyOf`` of alternative key sets by those sets; other
    messages are jsonschema's, cut to :data:`MAX_MESSAGE` characters.
    """
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(known))
        if unknown:
            return f"{key_path([*error.absolute_path, unknown[0]], root)}: unknown key (expected one of: {', '.join(known)})"
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [key for key in error.validator_value if key not in error.instance]
        if missing:
            return f"{key_path([*error.absolute_path, missing[0]], root)}: required, missing"
    forms = [" + ".join(b["required"]) for b in error.validator_value if "required" in b] \
        if error.validator in ("oneOf", "anyOf") else []
    if forms:
        return (f"{key_path(error.absolute_path, root) or '(top level)'}: give "
                f"{'exactly' if error.validator == 'oneOf' else 'at least'} one of: {'; '.join(forms)}")
    message = " ".join(error.message.split())
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE - 3] + "..."
    return f"{key_path(error.absolute_path, root) or '(top level)'}: {message}"


#: jsonschema's relevance of an error, with an unknown key first among errors at one place
#: (a misspelt key also makes the key it should have been a missing one).
_RELEVANCE = jsonschema.exceptions.by_relevance(strong=frozenset({"additionalProperties"}))


def schema_error(data, schema_path: str | Path, root: str = "") -> str | None:
    """The most relevant violation of the schema at ``schema_path`` (:func:`validator`) by ``data``
    (:func:`describe`), or None. A field that no schema names (``unevaluatedProperties``) counts only
    where nothing else is wrong: a subschema that fails evaluates none of its fields."""
    errors = list(validator(schema_path).iter_errors(data))
    errors = [e for e in errors if e.validator != "unevaluatedProperties"] or errors
    error = jsonschema.exceptions.best_match(errors, key=_RELEVANCE)
    return None if error is None else describe(error, root)


def committed_rows(folder: str | Path) -> list[str]:
    """The ``*.jsonl`` files under ``folder`` that git tracks, sorted.

    Outside a git work tree (a copy of the artifact without its history)
    every ``*.jsonl`` file under ``folder`` counts as committed.
    """
    try:
        proc = subprocess.run(["git", "ls-files", "-z", "--", str(folder)], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        proc = None
    if proc is None or proc.returncode != 0:
        return sorted(str(p) for p in Path(folder).rglob("*.jsonl"))
    return sorted(p for p in proc.stdout.split("\0") if p.endswith(".jsonl"))


#: What a job of a Snakemake run of this workflow runs: a ``script:`` rule's script, and the child
#: process in which a measurement job prepares or times a case (:mod:`kernels.core.children`).
JOB_COMMANDS = (".snakemake/scripts/", "kernels.core.children")


def leftover_jobs(folder: str | Path, proc: str | Path = "/proc") -> list[tuple[int, str]]:
    """``(PID, command line)`` of each running job of a Snakemake run of ``folder`` (a process whose
    command line holds one of :data:`JOB_COMMANDS`, with ``folder`` its working directory) and of
    every process descended from one, by PID; read from Linux's ``proc`` file system (none where
    there is none). What a killed run leaves running."""
    table = {}
    for entry in Path(proc).glob("[0-9]*"):
        try:
            cmd = " ".join(p.decode(errors="replace") for p in (entry / "cmdline").read_bytes().split(b"\0") if p)
            ppid = next(int(line.split()[1]) for line in (entry / "status").read_text().splitlines()
                        if line.startswith("PPid:"))
            cwd = Path(os.readlink(entry / "cwd"))
        except (OSError, StopIteration, ValueError, IndexError):  # ended, another user's, or not a process
            continue
        table[int(entry.name)] = (ppid, cwd, cmd)
    folder = Path(folder).resolve()
    found = {pid for pid, (_, cwd, cmd) in table.items() if cwd == folder and any(c in cmd for c in JOB_COMMANDS)}
    while True:
        more = {pid for pid, (ppid, _, _) in table.items() if ppid in found} - found
        if not more:
            return sorted((pid, table[pid][2]) for pid in found)
        found |= more


def require_no_cuda_yet(module) -> None:
    """Raise RuntimeError if CUDA is initialised in this process already (importing ``module``, a
    study, did it): a measurement job imports its study before its GPU lease, which picks the
    GPU by setting ``CUDA_VISIBLE_DEVICES``, and that only works before CUDA starts."""
    import torch

    if torch.cuda.is_initialized():
        raise RuntimeError(f"importing {module.__name__} initialised CUDA before the job's GPU lease "
                           "(kernels/core/gpulease.py) chose the GPU: move that CUDA call into a function")


def require_gpu(folder: str | Path) -> None:
    """Raise RuntimeError unless this process sees the GPU that ``folder`` is named after.

    ``folder`` is ``data/raw/<gpu>``; the GPU is CUDA device 0 (the job's
    lease, :mod:`kernels.core.gpulease`), and its name must give ``<gpu>`` by
    :func:`kernels.core.env.gpu_slug` ('NVIDIA H200' -> 'h200'); a process
    without CUDA measures on the CPU, whose folder is ``cpu``. Called by a
    measurement job before it measures or writes anything.
    """
    import torch

    slug = Path(folder).name
    if not torch.cuda.is_available():
        if slug == "cpu":
            return
        raise RuntimeError(f"measuring into {folder}/ needs a CUDA GPU ({slug}) and this process sees "
                           "none (torch.cuda.is_available() is False); nothing was written")
    name = torch.cuda.get_device_name(0)
    if gpu_slug(name) != slug:
        raise RuntimeError(f"measuring into {folder}/ needs a {slug} GPU but this one is {name!r} "
                           f"(folder {gpu_slug(name)}); set --config gpu={gpu_slug(name)}; nothing was written")
