"""GDN study cases: passes per impl, the naive loop's limit, per-impl backward shapes; prepare's checks and timed calls."""

from pathlib import Path

import pytest
import yaml

from kernels.gdn.study import cases, check_config, make_inputs

SWEEP = {
    "impls": ["naive", "recurrent", "chunk", "flash_qla"],
    "passes": ["fwd", "bwd", "fwdbwd"],
    "dtype": "bfloat16", "head_dim": 64, "naive_max_seqlen": 100,
    "main_shapes": [{"batch": 2, "seqlen": 64, "heads": 2}],
    "seqlen_sweep": {"batch": 1, "heads": 2, "seqlens": [100, 200]},
    "varlen": [{"num_seqs": 3, "seqlen": 90, "heads": 2}],
    "backward": {
        "naive_max_seqlen": 64,
        "main_shapes": [{"batch": 2, "seqlen": 64, "heads": 2}, {"batch": 1, "seqlen": 128, "heads": 2}],
        "seqlen_sweep": {"batch": 1, "heads": 2, "seqlens": [32]},
        "impl_shapes": {"flash_qla": [{"batch": 1, "seqlen": 128, "heads": 2}]},
    },
}


def shapes(rows, pas):
    return [(c["batch"], c["seqlen"], c["heads"], c["varlen"]) for c in rows if c["pass"] == pas]


def gva_shapes(rows, pas):
    return [(c["batch"], c["seqlen"], c["heads"], c.get("value_heads")) for c in rows if c["pass"] == pas]


def test_passes_and_shapes_per_impl():
    chunk = cases(SWEEP, "chunk")
    assert shapes(chunk, "fwd") == [(2, 64, 2, False), (1, 100, 2, False), (1, 200, 2, False), (1, 90, 2, True)]
    assert shapes(chunk, "bwd") == shapes(chunk, "fwdbwd") == [(2, 64, 2, False), (1, 128, 2, False),
                                                               (1, 32, 2, False)]
    assert {c["pass"] for c in cases(SWEEP, "recurrent")} == {"fwd"}
    qla = cases(SWEEP, "flash_qla")
    assert shapes(qla, "bwd") == shapes(qla, "fwdbwd") == [(1, 128, 2, False)]
    assert len(shapes(qla, "fwd")) == 4
    only_fwd = {**SWEEP, "impl_shapes": {"flash_qla": [{"batch": 2, "seqlen": 64, "heads": 2}]}}
    assert shapes(cases(only_fwd, "flash_qla"), "fwd") == [(2, 64, 2, False)]
    assert shapes(cases(only_fwd, "flash_qla"), "bwd") == [(1, 128, 2, False)]
    assert shapes(cases(only_fwd, "chunk"), "fwd") == shapes(chunk, "fwd")


def test_naive_beyond_its_limit_is_unsupported_not_extrapolated():
    naive = cases(SWEEP, "naive")
    too_long = [c for c in naive if "unsupported_reason" in c]
    assert {(c["pass"], c["seqlen"]) for c in too_long} == {
        ("fwd", 200), ("bwd", 128), ("fwdbwd", 128)}
    assert all("naive_max_seqlen" in c["unsupported_reason"] for c in too_long)


def test_unknown_impl():
    with pytest.raises(ValueError, match="unknown gdn impl"):
        cases(SWEEP, "flash")


def test_published_shapes_for_their_impls_only():
    """``published`` adds its shapes (value_heads kept only where it differs from heads) to the
    listed impls, after their own shapes or impl_shapes, without repeating a case."""
    published = {"impls": ["chunk", "flash_qla"],
                 "shapes": [{"batch": 2, "seqlen": 64, "heads": 2, "value_heads": 2},
                            {"batch": 1, "seqlen": 64, "heads": 1, "value_heads": 4}]}
    sweep = {**SWEEP, "published": published, "backward": {**SWEEP["backward"], "published": published}}
    assert gva_shapes(cases(sweep, "chunk"), "fwd") == [(2, 64, 2, None), (1, 100, 2, None), (1, 200, 2, None),
                                                        (1, 90, 2, None), (1, 64, 1, 4)]
    assert gva_shapes(cases(sweep, "flash_qla"), "bwd") == [(1, 128, 2, None), (2, 64, 2, None), (1, 64, 1, 4)]
    assert gva_shapes(cases(sweep, "recurrent"), "fwd") == gva_shapes(cases(SWEEP, "recurrent"), "fwd")
    assert gva_shapes(cases(sweep, "naive"), "bwd") == gva_shapes(cases(SWEEP, "naive"), "bwd")


def test_published_passes_limit_the_published_shapes_to_those_passes():
    """``published.passes`` runs the published shapes in the passes listed only; a pass of
    another block is a config error naming the key."""
    published = {"impls": ["chunk"], "passes": ["bwd"], "shapes": [{"batch": 1, "seqlen": 64, "heads": 1,
                                                                    "value_heads": 4}]}
    sweep = {**SWEEP, "backward": {**SWEEP["backward"], "published": published}}
    assert (1, 64, 1, 4) in gva_shapes(cases(sweep, "chunk"), "bwd")
    assert (1, 64, 1, 4) not in gva_shapes(cases(sweep, "chunk"), "fwdbwd")
    section = yaml.safe_load((Path(__file__).parents[1] / "config/studies/gdn.yaml").read_text())["gdn"]
    section["sweep"]["backward"]["published"]["passes"] = ["fwd"]
    with pytest.raises(ValueError, match=r"sweep.backward.published.passes: 'fwd' is not a pass of this block"):
        check_config(section)


def test_make_inputs_gva():
    q, k, v, g, beta, cu = make_inputs({"dtype": "float32", "batch": 2, "seqlen": 5, "heads": 2, "value_heads": 6,
                                        "head_dim": 16, "varlen": False}, "cpu")
    assert q.shape == k.shape == (2, 5, 2, 16) and v.shape == (2, 5, 6, 16)
    assert g.shape == beta.shape == (2, 5, 6) and cu is None


def test_check_config_value_heads_multiple_of_heads():
    section = yaml.safe_load((Path(__file__).parents[1] / "config/studies/gdn.yaml").read_text())["gdn"]
    check_config(section)
    section["sweep"]["backward"]["published"]["shapes"][0]["value_heads"] = 24
    with pytest.raises(ValueError, match=r"sweep.backward.published.shapes\[0\].value_heads: 24 is not a multiple "
                                         r"of heads 16"):
        check_config(section)


def test_committed_sweep_runs_flash_qla_configurations():
    """FlashQLA's published configurations (forward: five h_qk/h_v at their token counts;
    backward: its four, 16/32 at 1 x 8192 and 16/32, 8/16, 2/4 at 1 x 32768, in the bwd pass
    only) run for chunk, fla_chunk and flash_qla, and FlashQLA's backward runs nowhere else but
    B4 T8192 H16."""
    with open(Path(__file__).parents[1] / "config/studies/gdn.yaml") as f:
        sweep = yaml.safe_load(f)["gdn"]["sweep"]
    fwd = {(4, 8192, 16, None), (1, 32768, 16, 32), (1, 32768, 32, None), (4, 8192, 16, 64), (1, 32768, 2, 8)}
    bwd = {(1, 8192, 16, 32), (1, 32768, 16, 32), (1, 32768, 8, 16), (1, 32768, 2, 4)}
    for impl in ("chunk", "fla_chunk", "flash_qla"):
        rows = cases(sweep, impl)
        assert fwd <= set(gva_shapes(rows, "fwd")) and bwd <= set(gva_shapes(rows, "bwd"))
        assert not bwd & set(gva_shapes(rows, "fwdbwd"))  # backward only, as FlashQLA publishes them
    qla = cases(sweep, "flash_qla")
    assert set(gva_shapes(qla, "bwd")) == {(4, 8192, 16, None)} | bwd
    assert len(shapes(cases(sweep, "fla_chunk"), "bwd")) == 4 + 4
    assert not any("value_heads" in c for c in cases(sweep, "naive") + cases(sweep, "recurrent"))


@pytest.mark.parametrize("pas", ["fwd", "bwd", "fwdbwd"])
def test_prepare_checks_and_times_each_pass_of_the_chunked_kernels(pas, device, monkeypatch):
    """``prepare`` of ``chunk`` (Triton; the interpreter on the CPU): the checked errors are
    in the row's fields, and the timed call runs the pass (bwd and fwdbwd return the five
    gradients); an error above its tolerance is a Mismatch naming the output."""
    from kernels.core import correctness
    from kernels.gdn import study

    case = {"pass": pas, "dtype": "float32", "head_dim": 16, "batch": 1, "seqlen": 40, "heads": 1, "num_seqs": 1,
            "varlen": False}
    prepared = study.prepare("chunk", case, device)
    names = ["o"] if pas == "fwd" else ["dq", "dk", "dv", "dg", "dbeta"]
    errs = [prepared.extra["rel_err" if pas == "fwd" else f"rel_err_{n}"] for n in names]
    assert prepared.extra["rel_err"] == max(errs) and all(0 < e <= study.TOLERANCE[n] for n, e in zip(names, errs))
    out = prepared.fn()
    if pas == "fwd":
        assert 0 < prepared.extra["rel_err_state"] <= study.TOLERANCE["final_state"]
        assert out[0].shape == (1, 40, 1, 16) and out[1].shape == (1, 1, 16, 16)
    else:
        assert len(out) == 5 and prepared.extra["deterministic"] and prepared.extra["final_state_grad"]
    monkeypatch.setitem(study.TOLERANCE, names[-1], 0.0)
    with pytest.raises(correctness.Mismatch, match=f"^chunk {names[-1]}: RMSE/RMS .* above tolerance 0$"):
        study.prepare("chunk", case, device)


def test_a_new_implementation_is_its_module_a_registry_entry_and_the_config(monkeypatch, device):
    """docs/extending.md: study.py calls each implementation through its registry entry's ``op``
    (FLA's arguments), so a new one with that signature edits no study code; an implementation
    the registry gives no op is refused by name."""
    from kernels.gdn import study
    from kernels.core.registry import Impl

    monkeypatch.setitem(study.REGISTRY, "mine", Impl("mine", "#000000", ("fwd",),
                                                     op="kernels.gdn.chunk:chunk_gated_delta_rule"))
    assert [c["pass"] for c in study.cases({**SWEEP, "impls": ["mine"]}, "mine")] == ["fwd"] * 4
    case = {"pass": "fwd", "dtype": "float32", "head_dim": 16, "batch": 1, "seqlen": 40, "heads": 1, "num_seqs": 1,
            "varlen": False}
    prepared = study.prepare("mine", case, device)
    assert 0 < prepared.extra["rel_err"] <= study.TOLERANCE["o"] and "anchor_module" not in prepared.extra
    monkeypatch.setitem(study.REGISTRY, "opless", Impl("opless", "#000000"))
    with pytest.raises(ValueError, match="'opless': kernels/gdn/impls.py names no op"):
        study.prepare("opless", case, device)


def test_every_registered_op_resolves_or_is_an_anchor_refused_without_cuda():
    """Each registry op is ``module:function``; those of this project resolve to a function with
    FLA's arguments, an anchor's (outside ``kernels``) is refused without CUDA."""
    import inspect

    import torch

    from kernels.core import harness
    from kernels.gdn import study

    for name, impl in study.REGISTRY.items():
        module, _, function = impl.op.partition(":")
        assert module and function, name
        if module.startswith("kernels."):
            fn, extra = study.load_op(name)
            assert list(inspect.signature(fn).parameters)[:5] == ["q", "k", "v", "g", "beta"], name
            assert extra == {}
        elif not torch.cuda.is_available():
            with pytest.raises(harness.Unsupported, match=f"{name} needs a CUDA GPU"):
                study.load_op(name)
