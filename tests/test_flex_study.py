"""The FlexAttention sweep: case expansion, counting formulas, config schema, prepare()."""

from pathlib import Path

import jsonschema
import pytest
import torch
import yaml
from conftest import configured_timing

from kernels.core import checks, harness
from kernels.flex import density, ops, study

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "config/studies/flex.yaml").read_text())["flex"]
SCHEMA = checks.validator(ROOT / "workflow/schemas/flex.schema.yaml")  # its impls from the registry

SWEEP = {"impls": list(study.IMPLS), "seed": 0, "groups": [
    {"name": "a", "impls": ["flex", "naive"], "dtypes": ["bfloat16"], "shapes": [[2, 1024], [1, 2048]],
     "heads": [[8, 2]], "head_dims": [64], "passes": ["fwd", "fwdbwd"],
     "masks": [{"mask": "causal"}, {"mask": "window", "window": [128, 256]},
               {"mask": "document", "documents": 4, "doc_dist": ["uniform", "heavy"]},
               {"mask": "prefix", "prefix": 100, "score_mod": ["none", "softcap"]}]},
    {"name": "b", "impls": ["flex"], "dense": False, "dtypes": ["float16"], "shapes": [[1, 1000]],
     "heads": [[4, 4]], "head_dims": [64], "passes": ["fwd"], "masks": [{"mask": "causal"}]},
    {"name": "dup", "impls": ["flex"], "dtypes": ["bfloat16"], "shapes": [[2, 1024]], "heads": [[8, 2]],
     "head_dims": [64], "passes": ["fwd"], "masks": [{"mask": "causal"}]},
]}


@pytest.mark.parametrize("run", ["sweep", "smoke"])
def test_config_matches_schema(run):
    jsonschema.Draft202012Validator.check_schema(SCHEMA.schema)
    SCHEMA.validate(CONFIG)
    for impl in CONFIG[run]["impls"]:
        assert study.cases(CONFIG[run], impl), impl


def test_schema_rejects_unknown_keys_and_impls():
    bad = yaml.safe_load(yaml.safe_dump(CONFIG))
    bad["sweep"]["groups"][0]["masks"][0]["windw"] = 3
    with pytest.raises(jsonschema.ValidationError):
        SCHEMA.validate(bad)
    bad = yaml.safe_load(yaml.safe_dump(CONFIG))
    bad["sweep"]["impls"].append("flash3")
    with pytest.raises(jsonschema.ValidationError):
        SCHEMA.validate(bad)


def test_cases_expand_and_deduplicate():
    flex = study.cases(SWEEP, "flex")
    # group a: 2 shapes x 2 passes x (1 + 2 + 2 + 2) points; group b: 1; group dup: nothing new
    assert len(flex) == 2 * 2 * 7 + 1
    assert all(set(study.SHAPE_FIELDS) <= set(c) for c in flex)
    win = [c for c in flex if c["mask"] == "window"]
    assert {c["window"] for c in win} == {128, 256} and all(c["documents"] == 1 and c["prefix"] == 0 for c in win)
    c = next(c for c in flex if c["mask"] == "document" and c["seqlen"] == 2048 and c["doc_dist"] == "heavy")
    lengths = study._lengths(c, 2048, 0)
    assert c["density_elements"] == pytest.approx(density.element_count("document", 2048, 0, lengths) / 2048**2,
                                                  abs=1e-6)


def test_dense_baselines_run_each_shape_once_causal():
    dense = study.cases(SWEEP, "sdpa_flash")
    assert len(dense) == 2 * 2  # group a's two shapes x two passes; b has dense: false
    assert all(c["mask"] == "causal" and c["score_mod"] == "none" for c in dense)
    assert study.cases({**SWEEP, "impls": ["flex"]}, "sdpa_flash") == []
    with pytest.raises(ValueError, match="unknown impl"):
        study.cases(SWEEP, "flash3")


def test_flops_and_bytes():
    c = dict(batch=2, heads=8, kv_heads=2, seqlen=1024, head_dim=64, density_elements=0.5, density_blocks=0.75)
    assert study.flops({**c, "pass": "fwd"}) == 4 * 2 * 8 * 1024**2 * 64 * 0.5
    assert study.flops({**c, "pass": "bwd"}) == 2.5 * study.flops({**c, "pass": "fwd"})
    assert study.flops({**c, "pass": "fwdbwd"}, "density_blocks") == 3.5 * 4 * 2 * 8 * 1024**2 * 64 * 0.75
    assert study.min_bytes({**c, "pass": "fwd"}, 2) == (2 * 8 + 2 * 2) * 2 * 1024 * 64 * 2
    assert study.min_bytes({**c, "pass": "fwdbwd"}, 2) == (6 * 8 + 6 * 2) * 2 * 1024 * 64 * 2


SMALL = dict(dtype="float32", batch=1, heads=2, kv_heads=1, seqlen=200, head_dim=16, mask="document", window=0,
             documents=5, doc_dist="heavy", prefix=0, score_mod="none", density_blocks=1.0, density_elements=0.2,
             seed=0)


@pytest.mark.parametrize("impl,pas,score_mod", [("naive", "fwd", "alibi_softcap"), ("naive", "fwdbwd", "softcap"),
                                                ("sdpa_masked", "fwd", "none"), ("sdpa_masked", "bwd", "none"),
                                                ("flex", "fwd", "none")])
def test_prepare_checks_and_times_on_cpu(impl, pas, score_mod):
    row = harness.measure_case(study, impl, {**SMALL, "pass": pas, "score_mod": score_mod}, torch.device("cpu"),
                               configured_timing(warmup_ms=1, rep_ms=1, min_reps=1, max_reps=5, cpu_reps=1))
    assert row["status"] == "ok", row["error"]
    assert row["rel_err"] < 1e-5 and row["mask_build_ms"] >= 0 and row["flops_blocks"] > row["flops"]


@pytest.mark.parametrize("impl,pas", [("flex", "fwdbwd"), ("sdpa_flash", "fwd"), ("sdpa_masked", "fwd")])
def test_unsupported_on_cpu(impl, pas):
    case = {**SMALL, "pass": pas, "mask": "causal", "documents": 1, "doc_dist": "none",
            "score_mod": "softcap" if impl == "sdpa_masked" else "none"}
    row = harness.measure_case(study, impl, case, torch.device("cpu"), configured_timing(warmup_ms=1, rep_ms=1, min_reps=1, max_reps=5, cpu_reps=1))
    assert row["status"] == "unsupported", row


def test_flex_flash_runs_the_cases_of_flex():
    """The FLASH backend is measured on exactly the cases of the default backend, in the sweep and the smoke run."""
    assert ops.BACKENDS["flex_flash"] == "FLASH" and ops.BACKENDS["flex"] is None
    for run in ("sweep", "smoke"):
        assert "flex_flash" in CONFIG[run]["impls"]
        assert study.cases(CONFIG[run], "flex_flash") == study.cases(CONFIG[run], "flex"), run


@pytest.mark.skipif(ops.flash_backend_missing() is None, reason="the FLASH backend's packages are installed")
@pytest.mark.parametrize("pas", ["fwd", "fwdbwd"])
def test_flex_flash_without_its_packages_is_unsupported_naming_them(pas):
    case = {**SMALL, "pass": pas, "mask": "causal", "documents": 1, "doc_dist": "none"}
    with pytest.raises(harness.Unsupported, match=r"flex_flash: .*(flash-attn-4|nvidia-cutlass-dsl)"):
        study.prepare("flex_flash", case, torch.device("cpu"))
    row = harness.measure_case(study, "flex_flash", case, torch.device("cpu"),
                               configured_timing(warmup_ms=1, rep_ms=1, min_reps=1, max_reps=5, cpu_reps=1))
    assert row["status"] == "unsupported" and "flash_attn.cute" in row["error"], row
    assert row["times_ms"] == [] and row["device_ms"] is None


def test_flash_backend_missing_names_module_and_distribution(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "flash_attn.cute"
                        else None if name == "cutlass" else real(name, *a))
    assert "module cutlass (distribution nvidia-cutlass-dsl" in ops.flash_backend_missing()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert ops.flash_backend_missing() is None


def test_backend_message_unwraps_the_compiler():
    """The row gets the refusal itself, not Inductor's wrapper around the lowering error."""
    from torch._inductor.exc import InductorError, LoweringException

    refusal = RuntimeError("BACKEND='FLASH' but flash attention cannot be used: Input buffers require gradients "
                           "(not supported by flash attention)")
    wrapped = InductorError(LoweringException(refusal, "flex_attention", [], {}), None)
    assert study.backend_message(wrapped) == ("LoweringException: RuntimeError: BACKEND='FLASH' but flash attention "
                                              "cannot be used: Input buffers require gradients (not supported by "
                                              "flash attention)")
    try:
        raise ValueError("tile_m must divide the sparse block size\nmore") from AssertionError("inner")
    except ValueError as exc:
        assert study.backend_message(exc) == "AssertionError: inner"


def math_causal(q, k, v):
    """A dense causal baseline for the test below: SDPA's math backend (runs on the CPU)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                enable_gqa=q.shape[1] != k.shape[1])


def test_a_new_dense_baseline_is_its_module_a_registry_entry_and_the_config(monkeypatch):
    """docs/extending.md: an entry with an ``op(q, k, v) -> o`` is a dense causal baseline, run once
    per shape with the causal mask and checked against float64 like every other, with no study edit."""
    from kernels.core.registry import Impl

    monkeypatch.setitem(study.REGISTRY, "mine", Impl("mine", "#000000", op="test_flex_study:math_causal"))
    dense = study.cases({**SWEEP, "impls": [*SWEEP["impls"], "mine"]}, "mine")
    assert len(dense) == 4 and all(c["mask"] == "causal" for c in dense)
    case = {**SMALL, "mask": "causal", "documents": 1, "doc_dist": "none"}
    for pas in ("fwd", "fwdbwd"):
        row = harness.measure_case(study, "mine", {**case, "pass": pas}, torch.device("cpu"),
                                   configured_timing(warmup_ms=1, rep_ms=1, min_reps=1, max_reps=5, cpu_reps=1))
        assert row["status"] == "ok" and row["rel_err"] < 1e-5, row["error"]
    with pytest.raises(ValueError, match="mine is a dense causal baseline"):
        study.prepare("mine", {**SMALL, "pass": "fwd"}, torch.device("cpu"))


def test_a_new_flex_variant_is_its_ops_entry_a_registry_entry_and_the_config(monkeypatch):
    """docs/extending.md: a FlexAttention variant is its mode and backend in kernels.flex.ops and a
    registry entry tagged ``block_mask``: it runs every mask of its groups, with its block mask,
    checked against float64, with no study edit."""
    from kernels.flex import ops
    from kernels.core.registry import Impl

    monkeypatch.setitem(study.REGISTRY, "mine", Impl("mine", "#000000", tags=frozenset({"block_mask"})))
    monkeypatch.setitem(ops.MODES, "mine", None)
    monkeypatch.setitem(ops.BACKENDS, "mine", None)
    sweep = {**SWEEP, "impls": [*SWEEP["impls"], "mine"],
             "groups": [{**SWEEP["groups"][0], "impls": ["flex", "mine"]}]}
    assert study.cases(sweep, "mine") == study.cases(sweep, "flex")
    row = harness.measure_case(study, "mine", {**SMALL, "pass": "fwd"}, torch.device("cpu"),
                               configured_timing(warmup_ms=1, rep_ms=1, min_reps=1, max_reps=5, cpu_reps=1))
    assert row["status"] == "ok" and row["rel_err"] < 1e-5, row["error"]
    assert "mask_compile_s" in row and "compile_s" in row  # built a block mask and compiled flex_attention


def test_dense_baseline_rejects_other_masks():
    with pytest.raises(ValueError, match="dense causal baseline"):
        study.prepare("sdpa_efficient", {**SMALL, "pass": "fwd"}, torch.device("cpu"))


GPU_CASE = dict(SMALL, dtype="bfloat16", batch=2, heads=4, kv_heads=2, seqlen=1000, head_dim=64)


@pytest.mark.gpu
@pytest.mark.parametrize("pas", ["fwd", "bwd", "fwdbwd"])
@pytest.mark.parametrize("impl", study.IMPLS)
def test_every_impl_runs_on_gpu(impl, pas):
    case = {**GPU_CASE, "pass": pas}
    if study.is_dense(impl):
        case.update(mask="causal", documents=1, doc_dist="none")
    row = harness.measure_case(study, impl, case, torch.device("cuda"), configured_timing(warmup_ms=5, warmup_max_ms=200, rep_ms=20, min_reps=3, max_reps=20, cpu_reps=1))
    # the FLASH backend's refusals are rows too (test_flex_flash_matches_float64_on_gpu requires its main masks)
    may_refuse = study.is_dense(impl) or impl == "flex_flash"
    assert row["status"] in (("ok", "unsupported") if may_refuse else ("ok",)), row["error"]
    if row["status"] == "ok":
        assert row["peak_mem_bytes"] > 0 and row["rel_err"] < 0.04


@pytest.mark.gpu
@pytest.mark.parametrize("pas", ["fwd", "bwd"])
@pytest.mark.parametrize("mask,window", [("causal", 0), ("window", 256)])
def test_flex_flash_matches_float64_on_gpu(mask, window, pas):
    """FlexAttention's FLASH backend (flash-attn-4 installed) passes the study's float64 gate, forward and backward."""
    if (missing := ops.flash_backend_missing()) is not None:
        pytest.skip(missing)  # an anchor, installed on GPU hosts only
    case = {**GPU_CASE, "pass": pas, "seqlen": 1024, "head_dim": 128, "mask": mask, "window": window,
            "documents": 1, "doc_dist": "none"}
    row = harness.measure_case(study, "flex_flash", case, torch.device("cuda"),
                               configured_timing(warmup_ms=5, warmup_max_ms=200, rep_ms=20, min_reps=3, max_reps=20,
                                                 cpu_reps=1))
    assert row["status"] == "ok", row["error"]
    assert row["rel_err"] < (0.02 if pas == "fwd" else 0.04) and row["compile_s"] > 0 and row["recompiles"] >= 1
