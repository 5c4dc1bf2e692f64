"""A study's fingerprint: a digest of everything that can change its numbers, computed from the
source tree alone (no GPU, no git, no import of the measured code).

The parts (:func:`fingerprint`):

- every project module the study's measurement imports (:func:`measured_modules`: the closure of
  ``kernels/<study>/study.py`` and the job runner ``kernels/core/jobs.py`` over their ``import``
  statements, wherever they stand, and the ``"kernels.x.y:function"`` strings of the
  registries), each as a digest of its syntax tree without docstrings (:func:`source_digest`), so
  that a comment, a docstring or a line break changes nothing and any change of code does;
- ``config``: the study's config section that the run measures (``sweep``, ``quick`` or ``smoke``);
- ``timing``: the config's ``timing`` settings;
- ``anchors``: the pinned versions of the external implementations, the ``anchors`` extra of
  ``pyproject.toml`` (what a GPU host installs; the versions found are in each row's
  ``env.anchors``).

Every row records its study's digest and parts (``env.fingerprint``, ``env.fingerprint_parts``,
:mod:`kernels.core.jobs`); committed rows whose digest differs from the code's are *stale*
(:mod:`kernels.paper.provenance`). The digest is the same on Python 3.11 and 3.12 (:func:`_canonical`
skips the empty fields that a newer syntax tree adds).

Recording is not measuring: the modules of :data:`RECORD_ONLY` only write down what ran and where
(the environment block, this digest, what the GPU did around a case: :mod:`kernels.core.gpustate`)
and change no number, so they are no part of a fingerprint (:func:`measuring_digest` leaves them
out of the parts of rows measured before this rule too), and in the modules that use them, the
wrapper ``recorded(f, *args)`` around a measurement and its import digest as if absent
(``f(*args)``; :func:`_without_recording`). What is recorded can then grow without making committed
rows stale (``docs/measuring.md`` says why).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import tomllib
from pathlib import Path

#: The repository's root (the folder holding ``kernels/``).
ROOT = Path(__file__).resolve().parents[2]
#: The measurement's entry modules besides the study's own ``study.py``.
RUNNER = ("kernels/core/jobs.py",)
#: Modules that only record and never change a number (module docstring): no part of a fingerprint.
RECORD_ONLY = ("kernels/core/env.py", "kernels/core/fingerprint.py", "kernels/core/gpustate.py")
#: The function of a :data:`RECORD_ONLY` module that wraps a measurement: ``recorded(f, *args)``.
RECORDER = "recorded"
#: A string that names a project module, with an optional ``:attribute`` (a registry's ``op``).
_MODULE_STRING = re.compile(r"^(kernels(?:\.[A-Za-z_]\w*)+)(?::[\w.]+)?$")


def _canonical(node) -> object:
    """A syntax tree as nested lists, without positions and without fields that are None or empty
    (Python 3.12 adds ``type_params=[]`` to every function and class)."""
    if isinstance(node, ast.AST):
        out = [type(node).__name__]
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or value == []:
                continue
            out.append([name, _canonical(value)])
        return out
    if isinstance(node, list):
        return [_canonical(item) for item in node]
    if node is None or isinstance(node, (str, int, float)):
        return node
    return repr(node)  # bytes, complex, Ellipsis


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without the docstring of its module, classes and functions (changed in place)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _record_only_module(name: str) -> bool:
    """Whether dotted module ``name`` is one of :data:`RECORD_ONLY`."""
    return f"{name.replace('.', '/')}.py" in RECORD_ONLY


class _Unrecord(ast.NodeTransformer):
    """Drops :data:`RECORDER` from ``from <record-only module> import ...`` (the statement when it
    imports nothing else) and turns ``recorded(f, *args, **kwargs)`` into ``f(*args, **kwargs)``."""

    def __init__(self):
        self.recorders: set[str] = set()

    def visit_ImportFrom(self, node):
        if node.module and node.level == 0 and _record_only_module(node.module):
            self.recorders.update(a.asname or a.name for a in node.names if a.name == RECORDER)
            node.names = [a for a in node.names if a.name != RECORDER]
            return node if node.names else None
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.recorders and node.args \
                and not isinstance(node.args[0], ast.Starred):
            return ast.Call(func=node.args[0], args=node.args[1:], keywords=node.keywords)
        return node


def _without_recording(tree: ast.Module) -> ast.Module:
    """``tree`` as if it recorded nothing (:class:`_Unrecord`; the imports come before the calls
    in the order the tree is walked)."""
    return _Unrecord().visit(tree)


def source_digest(path: str | Path) -> str:
    """SHA-256 (16 hex digits) of a Python file's syntax tree without docstrings, comments and
    layout, and without what only records (:func:`_without_recording`). Raises SyntaxError naming
    the file for code that does not parse."""
    path = Path(path)
    tree = _without_recording(_strip_docstrings(ast.parse(path.read_text(), filename=str(path))))
    blob = json.dumps(_canonical(tree), separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _module_file(name: str, root: Path) -> Path | None:
    """The file of project module ``name`` (``kernels.gdn.chunk``) under ``root``, or None."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path, root: Path) -> set[str]:
    """Dotted names of the project modules that the file at ``path`` imports or names: its
    ``import`` and ``from`` statements anywhere in the file (``from kernels.gdn import study``
    names ``kernels.gdn.study`` where that is a module) and its module strings
    (:data:`_MODULE_STRING`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _MODULE_STRING.match(node.value)
            if match:
                names.add(match.group(1))
    return {n for n in names if n.split(".")[0] == "kernels"}


def measured_modules(study: str, root: str | Path = ROOT) -> list[str]:
    """The project modules (paths relative to ``root``, sorted) that a measurement of ``study``
    imports: the closure of ``kernels/<study>/study.py`` and :data:`RUNNER` over
    :func:`_imported`, with the package ``__init__.py`` of each, but :data:`RECORD_ONLY`.
    ValueError when the study has no ``study.py``."""
    root = Path(root)
    start = root / "kernels" / study / "study.py"
    if not start.is_file():
        raise ValueError(f"study {study!r} has no kernels/{study}/study.py")
    todo, seen = [start, *(root / r for r in RUNNER)], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imported(path, root):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # a module's packages run their __init__.py first
                found = _module_file(".".join(parts[:i]), root)
                if found is not None and found not in seen \
                        and str(found.relative_to(root)) not in RECORD_ONLY:
                    todo.append(found)
    return sorted(str(p.relative_to(root)) for p in seen)


def anchor_pins(root: str | Path = ROOT) -> list[str]:
    """The ``anchors`` extra of ``pyproject.toml`` (requirement strings, sorted)."""
    with open(Path(root) / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return sorted(project.get("optional-dependencies", {}).get("anchors", []))


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def measuring_digest(parts: dict[str, str]) -> str:
    """The digest of a fingerprint's ``parts`` without those of :data:`RECORD_ONLY` modules: the
    ``digest`` of :func:`fingerprint`, and what a committed row's ``env.fingerprint_parts`` is
    compared by (rows measured before a module was declared record-only carry its part)."""
    return _digest({k: v for k, v in parts.items() if k not in RECORD_ONLY})


def fingerprint(study: str, section: dict, timing: dict, root: str | Path = ROOT) -> dict:
    """The fingerprint of ``study`` measured with config ``section`` (the study's active config
    section) and ``timing`` (the config's ``timing``): ``{"digest": 16 hex digits, "parts":
    {module path | "config" | "timing" | "anchors": 16 hex digits}}`` (see the module docstring).
    ValueError when the study has no ``study.py``; SyntaxError naming a module that does not parse."""
    parts = {path: source_digest(Path(root) / path) for path in measured_modules(study, root)}
    parts.update(config=_digest(section), timing=_digest(timing), anchors=_digest(anchor_pins(root)))
    return {"digest": measuring_digest(parts), "parts": parts}


def differences(old: dict, new: dict) -> list[str]:
    """The parts in which fingerprint ``old`` differs from ``new`` (``parts`` dicts of
    :func:`fingerprint`; :data:`RECORD_ONLY` modules left out): changed ones by name, ``+name`` for a
    part only ``new`` has, ``-name`` for one only ``old`` has."""
    names = sorted((set(old) | set(new)) - set(RECORD_ONLY))
    return [name if name in old and name in new else (f"+{name}" if name in new else f"-{name}")
            for name in names if old.get(name) != new.get(name)]
