"""Every module of ``kernels`` imports, none is part of an import cycle, the package's
layers' docstrings name each of their modules, the measurement core imports neither a study nor the
paper layer, and the modules whose docstrings say they import no torch do not."""

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                 for p in (ROOT / "kernels").rglob("*.py"))


def _imports(module: str) -> set[str]:
    """The ``kernels`` modules that ``module`` imports anywhere in its source (function bodies too)."""
    path = ROOT / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}   # `from kernels import harness`
    return {m for m in found if m in MODULES and m != module}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_kernels_modules():
    graph = {m: _imports(m) for m in MODULES}
    assert graph["kernels.gdn.chunk"] >= {"kernels.gdn.chunk_fwd", "kernels.gdn.chunk_bwd"}   # edges are found
    assert _cycles(graph) == []


@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports(module):
    importlib.import_module(module)


@pytest.mark.parametrize("layer", ["core", "paper"])
def test_each_layer_docstring_names_each_of_its_modules_and_no_other(layer):
    """The docstring of kernels.core and of kernels.paper names every module of that layer and
    nothing else, and kernels' own docstring names the layers, no study package (a new study needs
    no edit there)."""
    import kernels

    package = importlib.import_module(f"kernels.{layer}")
    named = set(re.findall(r"``(\w+)``", package.__doc__))
    modules = {p.stem for p in (ROOT / "kernels" / layer).glob("*.py")} - {"__init__"}
    assert named == modules, (f"named but absent: {sorted(named - modules)}; "
                              f"absent from the docstring: {sorted(modules - named)}")
    assert set(re.findall(r"``(\w+)``", kernels.__doc__)) == {"core", "paper"}


def test_the_core_never_imports_the_paper_layer_or_a_study():
    """The measurement core is below the studies and the paper layer: none of its modules imports
    either (so a study's fingerprint, kernels.core.fingerprint, holds no rendering code)."""
    for module in (m for m in MODULES if m.startswith("kernels.core.")):
        above = sorted(m for m in _imports(module) if not m.startswith("kernels.core"))
        assert not above, f"{module} imports {above}"


@pytest.mark.parametrize("module", ["kernels", "kernels.flex", "kernels.flex.density", "kernels.gdn",
                                    "kernels.gdn.constants", "kernels.gdn.flops"])
def test_modules_said_to_import_no_torch_do_not(module):
    code = f"import sys, {module}; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0, f"{module} imports torch"
