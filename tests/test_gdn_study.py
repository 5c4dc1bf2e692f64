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
    the first two main shapes, B4 T8192 H16 and B1 T32768 H32 (both passes)."""
    with open(Path(__file__).parents[1] / "config/studies/gdn.yaml") as f:
        sweep = yaml.safe_load(f)["gdn"]["sweep"]
    fwd = {(4, 8192, 16, None), (1, 32768, 16, 32), (1, 32768, 32, None), (4, 8192, 16, 64), (1, 32768, 2, 8)}
    bwd = {(1, 8192, 16, 32), (1, 32768, 16, 32), (1, 32768, 8, 16), (1, 32768, 2, 4)}
    for impl in ("chunk", "fla_chunk", "flash_qla"):
        rows = cases(sweep, impl)
        assert fwd <= set(gva_shapes(rows, "fwd")) and bwd <= set(gva_shapes(rows, "bwd"))
        assert not bwd & set(gva_shapes(rows, "fwdbwd"))  # backward only, as FlashQLA publishes them
    qla = cases(sweep, "flash_qla")
    main = {(4, 8192, 16, None), (1, 32768, 32, None)}
    assert set(gva_shapes(qla, "bwd")) == main | bwd and set(gva_shapes(qla, "fwdbwd")) == main
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
    FLA's arguments, an anchor's (outside ``kernels``, or a ``kernels`` adapter that pins one:
    ``REQUIREMENT``) is refused without CUDA."""
    import importlib
    import inspect

    import torch

    from kernels.core import harness
    from kernels.gdn import study

    adapters = 0
    for name, impl in study.REGISTRY.items():
        module, _, function = impl.op.partition(":")
        assert module and function, name
        adapter = module.startswith("kernels.") and hasattr(importlib.import_module(module), "REQUIREMENT")
        adapters += adapter
        if module.startswith("kernels.") and not adapter:
            fn, extra = study.load_op(name)
            assert list(inspect.signature(fn).parameters)[:5] == ["q", "k", "v", "g", "beta"], name
            assert extra == {}
        elif not torch.cuda.is_available():
            with pytest.raises(harness.Unsupported, match=f"{name} needs a CUDA GPU"):
                study.load_op(name)
    assert adapters == 1  # flashinfer


def _fake_flashinfer(monkeypatch, version="0.7.2.post1"):
    """A ``flashinfer`` module whose ``chunk_gated_delta_rule`` follows FlashInfer's documented
    conventions (packed tokens, ``cu_seqlens`` required, the decay as the factor alpha, states
    [N, HV, V, K]) on the float64 chunked reference; it records its keyword arguments."""
    import sys
    import types
    from importlib import metadata

    import torch

    from kernels.gdn.naive import naive_chunk_gated_delta_rule

    calls = []

    def chunk_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None,
                               output_final_state=False, cu_seqlens=None, max_seqlen=None):
        assert q.dim() == 3 and cu_seqlens is not None and g.dtype == beta.dtype == torch.float32
        calls.append(dict(cu_seqlens=cu_seqlens.tolist(), max_seqlen=max_seqlen, alpha=g))
        h0 = None if initial_state is None else initial_state.transpose(-1, -2)
        o, ht = naive_chunk_gated_delta_rule(q[None].float(), k[None].float(), v[None].float(), g.log()[None],
                                             beta[None], scale=scale, initial_state=h0, output_final_state=True,
                                             cu_seqlens=cu_seqlens.long())
        o = o[0].to(v.dtype)
        return (o, ht.float().transpose(-1, -2).contiguous()) if output_final_state else o

    module = types.ModuleType("flashinfer")
    module.__version__ = version
    module.chunk_gated_delta_rule = chunk_gated_delta_rule
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda dist: version if dist == "flashinfer-python" else real(dist))
    return calls


@pytest.mark.parametrize("varlen", [False, True])
def test_flashinfer_adapter_takes_fla_arguments(monkeypatch, varlen):
    """kernels.gdn.flashinfer turns FLA's call into FlashInfer's (packed tokens, offsets of B
    fixed-length sequences or the packed ones, alpha = exp(g), max_seqlen the longest sequence,
    states transposed both ways) and gives FLA's results: the same o and final state as the float64
    reference called with FLA's arguments, with GVA and an initial state."""
    import torch

    from kernels.gdn import flashinfer
    from kernels.gdn.naive import naive_chunk_gated_delta_rule

    calls = _fake_flashinfer(monkeypatch)
    case = {"dtype": "float32", "head_dim": 16, "batch": 1 if varlen else 3, "seqlen": 70, "heads": 2,
            "value_heads": 4, "num_seqs": 3 if varlen else 1, "varlen": varlen}
    from kernels.gdn.study import make_inputs

    q, k, v, g, beta, cu = make_inputs(case, "cpu")
    n = 3
    h0 = torch.randn(n, 4, 16, 16, generator=torch.Generator().manual_seed(3))
    o, ht = flashinfer.chunk_gated_delta_rule(q, k, v, g, beta, scale=0.25, initial_state=h0,
                                              output_final_state=True, cu_seqlens=cu)
    ref_o, ref_h = naive_chunk_gated_delta_rule(q, k, v, g, beta, scale=0.25, initial_state=h0,
                                                output_final_state=True, cu_seqlens=cu)
    assert o.shape == v.shape and ht.shape == (n, 4, 16, 16)
    torch.testing.assert_close(o, ref_o.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ht, ref_h.float(), rtol=1e-5, atol=1e-5)
    (call,) = calls
    torch.testing.assert_close(call["alpha"], g.reshape(-1, 4).exp())
    if varlen:
        lengths = [b - a for a, b in zip(cu.tolist(), cu.tolist()[1:])]
        assert call["cu_seqlens"] == cu.tolist() and call["max_seqlen"] == max(lengths)
        with pytest.raises(ValueError, match="cu_seqlens must start at 0"):
            flashinfer.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu.flip(0))
    else:
        assert call["cu_seqlens"] == [0, 70, 140, 210] and call["max_seqlen"] == 70
    o2, none = flashinfer.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu)
    assert none is None and o2.shape == v.shape


def test_flashinfer_rows_of_another_version_are_unsupported(monkeypatch):
    """The adapter pins its FlashInfer release (``REQUIREMENT``): with CUDA and another version
    installed, load_op refuses it naming both; with the pinned one, the row names the module and
    version it ran."""
    import torch

    from kernels.core import harness
    from kernels.gdn import flashinfer, study

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    _fake_flashinfer(monkeypatch, version="0.7.3")
    with pytest.raises(harness.Unsupported, match=r"flashinfer-python 0\.7\.3 is installed; "
                                                  r"kernels\.gdn\.flashinfer pins flashinfer-python==0\.7\.2\.post1"):
        study.load_op("flashinfer")
    _fake_flashinfer(monkeypatch)
    fn, extra = study.load_op("flashinfer")
    assert fn is flashinfer.chunk_gated_delta_rule
    assert extra == {"anchor_module": "flashinfer", "anchor_version": "0.7.2.post1",
                     "anchor_requirement": "flashinfer-python==0.7.2.post1"}
    assert flashinfer.REQUIREMENT == "flashinfer-python==0.7.2.post1"


