"""Each study's implementation registry (kernels/<study>/impls.py) is the one home of its
implementations' names, order, display names, colours and passes: the study, the report and
the figures take them from it, and the config and row schemas list the same names."""

import importlib
from pathlib import Path

import pytest
import yaml

from kernels.core import checks
from kernels.paper import style

ROOT = Path(__file__).resolve().parent.parent
STUDIES = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"]


def _impl_lists(node, path=""):
    """Every place of a schema that takes implementation names: (where, its subschema)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if "impl" in key.lower() and path.endswith("properties") or key == "propertyNames" and "impl" in path:
                yield f"{path}.{key}", value
            yield from _impl_lists(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _impl_lists(value, f"{path}[{i}]")


@pytest.mark.parametrize("study", STUDIES)
def test_the_schemas_take_the_implementations_from_the_registry(study):
    """No schema writes an implementation's name: each list of them refers to the one definition
    that :func:`kernels.core.checks.validator` fills from the registry."""
    names = list(importlib.import_module(f"kernels.{study}.impls").IMPLS)
    schemas = ROOT / "workflow" / "schemas"
    schema = yaml.safe_load((schemas / f"{study}.schema.yaml").read_text())
    assert schema["$defs"]["impl"] == {"description": schema["$defs"]["impl"]["description"],
                                       checks.REGISTRY_KEY: study}
    lists = list(_impl_lists(schema))
    assert lists, "the schema takes no implementations"
    for where, sub in lists:
        assert "#/$defs/impl" in str(sub), f"{study}.schema.yaml{where}: {sub}"
    impl = checks.validator(schemas / f"{study}.schema.yaml")
    for name in names:
        assert impl.evolve(schema={"$ref": f"{(schemas / f'{study}.schema.yaml').as_uri()}#/$defs/impl"}
                           ).is_valid(name), name
    assert not impl.evolve(schema={"$ref": f"{(schemas / f'{study}.schema.yaml').as_uri()}#/$defs/impl"}
                           ).is_valid("unregistered")


def test_a_schema_naming_no_registered_study_is_refused(tmp_path):
    path = tmp_path / "bad.schema.yaml"
    path.write_text("$defs:\n  impl: {x-registry: nostudy}\n")
    with pytest.raises(ValueError, match=r"bad\.schema\.yaml: x-registry 'nostudy' names no study with a registry"):
        checks.validator(path)


def test_a_flex_group_cannot_list_a_dense_baseline():
    section = yaml.safe_load((ROOT / "config" / "studies" / "flex.yaml").read_text())["flex"]
    section["quick"]["groups"][0]["impls"].append("sdpa_cudnn")
    with pytest.raises(ValueError, match=r"^quick\.groups\[0\]\.impls: sdpa_cudnn is a dense baseline"):
        importlib.import_module("kernels.flex.study").check_config(section)


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
    section = {"groups": [{"series": "spot", "impls": list(swiglu.REGISTRY), "dtypes": ["bfloat16"],
                           "passes": ["fwd", "bwd", "fwdbwd"], "hidden": [64], "tokens": [2]}]}
    for name, impl in swiglu.REGISTRY.items():
        if name not in swiglu.GEMM_ONLY:
            assert tuple(c["pass"] for c in swiglu.cases(section, name)) == impl.passes, name
    from kernels.flex import study as flex

    parts = ([n for n in flex.IMPLS if flex.takes_block_mask(n)] + [n for n in flex.IMPLS if flex.is_dense(n)]
             + [n for n, e in flex.REGISTRY.items() if "materialised" in e.tags])
    assert sorted(parts) == sorted(flex.IMPLS) and len(set(parts)) == len(parts)


@pytest.mark.parametrize("study", STUDIES)
def test_every_tag_is_one_its_registry_defines(study):
    """An entry's ``tags`` (the other ways its study runs it) are among its registry's ``TAGS``, so
    that a misspelt tag cannot silently leave an implementation out of its rows."""
    module = importlib.import_module(f"kernels.{study}.impls")
    known = set(getattr(module, "TAGS", {}))
    for name, impl in module.IMPLS.items():
        assert impl.tags <= known, f"{study}.{name}: unknown tags {sorted(impl.tags - known)}"
