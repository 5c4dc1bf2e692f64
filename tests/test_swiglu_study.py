"""The SwiGLU sweep: config against its schema, cases, and prepare() on the CPU."""

import json
from pathlib import Path

import jsonschema
import pytest
import torch
import yaml
from conftest import configured_timing

from kernels.core import checks, correctness, files, harness, jobs
from kernels.swiglu import study

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "config/studies/swiglu.yaml").read_text())["swiglu"]
SCHEMA = checks.validator(ROOT / "workflow/schemas/swiglu.schema.yaml")  # its impls from the registry


def test_config_matches_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA.schema)
    SCHEMA.validate(CONFIG)
    bad = json.loads(json.dumps(CONFIG))
    bad["smoke"]["groups"][0]["tokens"] = [1]
    bad["smoke"]["groups"][0]["numel_log2"] = [12]  # two shape specs in one group
    with pytest.raises(jsonschema.ValidationError):
        SCHEMA.validate(bad)
    assert set(SCHEMA.schema["$defs"]["impl"]["enum"]) == set(study.IMPLS)


@pytest.mark.parametrize("run", ["sweep", "smoke"])
def test_cases_cover_every_impl(run):
    sweep = CONFIG[run]
    total = 0
    for impl in sweep["impls"]:
        cases = study.cases(sweep, impl)
        assert cases, impl
        total += len(cases)
        for case in cases:
            assert set(study.SHAPE_FIELDS) <= set(case)
            assert case["numel"] == case["tokens"] * case["hidden"]
            assert all(isinstance(v, (int, str)) for k, v in case.items() if k != "roles")
            assert case["series"] == case["roles"][0]  # the first group's series, then any other's
            assert case["pass"] in study.REGISTRY[impl].passes
            if case["launch"] == "graph":
                assert impl in study.GRAPH_IMPLS
            assert (case["gemm_in"] > 0) <= (impl in study.GEMM_IMPLS)
            assert ("warmup_ms" in case) == (run == "sweep" and case["series"] == "gemm")
        keys = [tuple(sorted((k, v) for k, v in c.items() if k not in ("series", "roles"))) for c in cases]
        assert len(keys) == len(set(keys)), "duplicate cases"
    assert total < (400 if run == "sweep" else 80)


def test_flat_sizes_and_errors():
    sweep = {"groups": [{"series": "flat", "impls": ["triton"], "dtypes": ["bfloat16"], "passes": ["fwd"],
                         "numel_log2": [16, 30], "hidden": [8192]}]}
    cases = study.cases(sweep, "triton")
    assert [(c["tokens"], c["numel"]) for c in cases] == [(8, 2**16), (2**17, 2**30)]
    with pytest.raises(ValueError, match="unknown swiglu impl 'nope'"):
        study.cases(sweep, "nope")
    sweep["groups"][0]["hidden"] = [14336]
    with pytest.raises(ValueError, match="is not a whole number of rows of 14336"):
        study.cases(sweep, "triton")
    sweep["groups"][0].update(hidden=[8192], impls=["gemm_fused"])
    with pytest.raises(ValueError, match="impl 'gemm_fused' in series 'flat' needs gemm_in shapes"):
        study.cases(sweep, "gemm_fused")


@pytest.mark.parametrize("run", ["sweep", "quick", "smoke"])
def test_roles_select_the_quoted_cases(run):
    """The profiled and quoted cases are chosen by the config's roles: each role's rows match its
    selector, the profiled ones carry a breakdown, and a role that selects nothing is refused."""
    section = CONFIG[run]
    study.check_config(CONFIG)
    for role, selector in section["roles"].items():
        picked = [c for impl in section["impls"] for c in study.cases(section, impl) if role in c["roles"]]
        assert picked, role
        assert all(all(c[k] == v for k, v in selector.items()) for c in picked)
        assert all(study.PROFILE_ROLE in c["roles"] for c in picked) == (role == study.PROFILE_ROLE)
    bad = json.loads(json.dumps(CONFIG))
    bad[run]["roles"]["profile"]["tokens"] = 7777
    with pytest.raises(ValueError, match=rf"{run}.roles.profile: .* selects no case of the run"):
        study.check_config(bad)
    bad[run]["roles"] = {"decode": {"tokens": 1}}
    with pytest.raises(ValueError, match=rf"{run}.roles.decode: a role cannot be named like a series"):
        study.check_config(bad)


def _case(p="fwd", dtype="bfloat16", tokens=4, hidden=96, launch="stream", gemm_in=0):
    return {"series": "grid", "pass": p, "dtype": dtype, "launch": launch, "tokens": tokens, "hidden": hidden,
            "numel": tokens * hidden, "gemm_in": gemm_in}


@pytest.mark.parametrize("impl", ["eager", "triton", "liger"])
@pytest.mark.parametrize("p", ["fwd", "bwd", "fwdbwd"])
def test_prepare_elementwise(impl, p, device):
    if impl == "liger":
        pytest.importorskip("liger_kernel")
    prepared = study.prepare(impl, _case(p), device)
    assert prepared.bytes == study.TENSORS_PER_PASS[p] * 4 * 96 * 2
    assert prepared.flops == 0 and prepared.extra["rel_err"] < study.TOLERANCE["bfloat16"]
    prepared.fn()


def test_a_new_implementation_is_its_module_a_registry_entry_and_the_config(monkeypatch, device):
    """docs/extending.md: prepare calls an elementwise implementation through its registry entry's
    ``op`` (``op(gate, up) -> out``, autograd's backward), so a new one edits no study code; its
    passes come from the entry; an entry without an op is refused by name."""
    from kernels.core.registry import Impl

    monkeypatch.setitem(study.REGISTRY, "mine", Impl("mine", "#000000", op="kernels.swiglu.reference:swiglu_eager"))
    group = {"series": "grid", "impls": ["mine"], "dtypes": ["bfloat16"], "passes": ["fwd", "fwdbwd"],
             "hidden": [96], "tokens": [4]}
    assert [c["pass"] for c in study.cases({"groups": [group]}, "mine")] == ["fwd", "fwdbwd"]
    for p in ("fwd", "fwdbwd"):
        assert study.prepare("mine", _case(p), device).extra["rel_err"] < study.TOLERANCE["bfloat16"]
    monkeypatch.setitem(study.REGISTRY, "mine", Impl("mine", "#000000", ("fwd",), op="kernels.swiglu.reference:swiglu_eager"))
    assert [c["pass"] for c in study.cases({"groups": [group]}, "mine")] == ["fwd"]
    with pytest.raises(harness.Unsupported, match="'mine' has no backward"):
        study.prepare("mine", _case("fwdbwd"), device)
    monkeypatch.setitem(study.REGISTRY, "opless", Impl("opless", "#000000"))
    with pytest.raises(harness.Unsupported, match="'opless' has no elementwise forward .*names no op"):
        study.prepare("opless", _case(), device)


def test_every_registered_op_resolves_or_is_an_anchor():
    """Each elementwise entry's op resolves to a callable where it is this project's, or where its
    anchor is installed; a missing anchor raises ImportError (an ``unsupported`` row)."""
    import importlib.util

    for name, impl in study.REGISTRY.items():
        if impl.op is None:
            continue
        package = impl.op.partition(":")[0].split(".")[0]
        if package == "kernels" or importlib.util.find_spec(package) is not None:
            assert callable(impl.load()), name
        else:
            with pytest.raises(ImportError):
                impl.load()


def test_prepare_copy_moves_the_same_bytes(device):
    for p in ("fwd", "bwd", "fwdbwd"):
        prepared = study.prepare("copy", _case(p, tokens=5, hidden=97), device)
        assert abs(prepared.bytes - study.TENSORS_PER_PASS[p] * 5 * 97 * 2) <= 2
        assert prepared.extra["rel_err"] == 0.0


def test_prepare_seed_float32_is_wrong_and_bf16_is_checked_upcast(device):
    with pytest.raises(correctness.Mismatch, match=r"seed out \(torch.float16\)"):
        study.prepare("seed", _case(dtype="float32"), device)
    assert study.prepare("seed", _case(), device).extra["out_dtype"] == "float16"


@pytest.mark.parametrize("impl", ["gemm_fused", "matmul", "eager"])
def test_prepare_gemm(impl, device):
    prepared = study.prepare(impl, _case(tokens=40, hidden=48, gemm_in=64), device)
    assert prepared.flops == 2 * 40 * 64 * 2 * 48
    assert prepared.bytes == (40 * 64 + 64 * 96 + 40 * 48) * 2
    assert prepared.extra["rel_err"] < 1e-2


def test_prepare_refuses_what_cannot_run(device):
    if device.type == "cpu":
        with pytest.raises(harness.Unsupported, match="CUDA-graph replay needs a CUDA device"):
            study.prepare("decode", _case(launch="graph"), device)
    with pytest.raises(harness.Unsupported, match="has no backward"):
        study.prepare("seed", _case("bwd"), device)


def test_compile_records_compile_time_and_recompiles(device):
    prepared = study.prepare("compile_no_cudagraphs", _case(), device)
    assert prepared.extra["compile_s"] > 0 and prepared.extra["recompiles"] == 0
    assert prepared.extra["compile_mode"] == ("default" if device.type == "cpu" else "max-autotune-no-cudagraphs")


def test_run_job_writes_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTIFACT_TMPDIR", str(tmp_path / "tmp"))
    sweep = {"groups": [{"series": "decode", "impls": ["decode", "triton"], "dtypes": ["float16"],
                         "passes": ["fwd", "bwd"], "tokens": [2], "hidden": [64], "launch": ["stream", "graph"]}]}
    rows = jobs.run_job("swiglu", "decode", sweep, tmp_path / "decode.jsonl",
                           configured_timing(warmup_ms=1, rep_ms=5, min_reps=3, max_reps=20, cpu_reps=2))
    assert [r["launch"] for r in rows] == ["stream", "graph"]
    assert rows[0]["status"] == "ok" and rows[0]["bytes"] == 3 * 2 * 64 * 2
    expected = "ok" if torch.cuda.is_available() else "unsupported"
    assert rows[1]["status"] == expected
    assert len(files.read_jsonl(tmp_path / "decode.jsonl")) == 2
