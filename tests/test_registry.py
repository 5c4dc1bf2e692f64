"""Each study's implementation registry (kernels/<study>/impls.py) is the one home of its
implementations' names, order, display names, colours and passes: the study, the report and
the figures take them from it, and the config and row schemas list the same names."""

import importlib
from pathlib import Path

import pytest
import yaml

from kernels import style

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ("swiglu", "flex", "gdn")


def _schema(study):
    return yaml.safe_load((ROOT / "workflow" / "schemas" / f"{study}.schema.yaml").read_text())


def _impl_enums(node, path=""):
    """Every enum of the config schema that lists implementations: (where, names)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "enum" and "impl" in path:
                yield path, value
            else:
                yield from _impl_enums(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _impl_enums(value, f"{path}[{i}]")


@pytest.mark.parametrize("study", STUDIES)
def test_the_schema_lists_the_registered_implementations(study):
    names = list(importlib.import_module(f"kernels.{study}.impls").IMPLS)
    enums = list(_impl_enums(_schema(study)))
    assert enums, "the schema lists no implementations"
    for where, enum in enums:
        if where == ".$defs.group_impl":  # flex: the impls a group lists (the dense baselines follow dense)
            expected = [n for n in names if n not in importlib.import_module("kernels.flex.study").DENSE_IMPLS]
        else:
            expected = names
        assert sorted(enum) == sorted(expected), f"workflow/schemas/{study}.schema.yaml{where}"


@pytest.mark.parametrize("study", STUDIES)
def test_study_report_and_style_take_the_registry(study):
    registry = importlib.import_module(f"kernels.{study}.impls").IMPLS
    mod = importlib.import_module(f"kernels.{study}.study")
    report = importlib.import_module(f"kernels.{study}.report")
    assert tuple(mod.IMPLS) == tuple(registry) == tuple(report.ORDER)
    colors = style.palette(study, list(registry))
    for name, impl in registry.items():
        assert style.label(study, name) == impl.label and colors[name] == impl.color
        assert set(impl.passes) <= set(style.PASS_LABELS) and impl.passes[0] == "fwd"
    assert style.label(study, "unregistered") == "unregistered"


def test_passes_decide_which_cases_a_study_makes():
    from kernels.gdn import study as gdn
    from kernels.swiglu import study as swiglu

    assert set(gdn.BWD_IMPLS) == {n for n, i in gdn.REGISTRY.items() if "bwd" in i.passes}
    assert swiglu.FWD_ONLY == {n for n, i in swiglu.REGISTRY.items() if i.passes == ("fwd",)}
    from kernels.flex import study as flex

    parts = flex.FLEX_IMPLS + flex.DENSE_IMPLS + flex.MATERIALISED_IMPLS
    assert sorted(parts) == sorted(flex.IMPLS) and len(set(parts)) == len(parts)
