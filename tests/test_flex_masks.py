"""FlexAttention masks and score mods against float64 (CPU forward; GPU backward).

Compiled calls are expensive on the CPU (tens of seconds each on two
cores), so the CPU tests compile ONE kernel: batch element i of a shared
input runs family i (a mask_mod and score_mod of the generators, selected by
``b`` inside the compiled kernel), and each family's slice is checked
against float64 with that family's own mods. Changing every knob (window,
prefix, document layout) then reruns the same compiled block-mask builder
and kernel: no new graph may appear. The GPU test runs each family as its
own kernel, forward and backward.
"""

import pytest
import torch
from torch._dynamo.utils import counters

from kernels.core import correctness
from kernels.flex import masks, ops, reference, score_mods

H, HKV, D, N = 2, 1, 16, 200  # N = 200: not a multiple of the 128 tile
FAMILIES = [(m, "none") for m in masks.MASKS] + [("causal", s) for s in score_mods.SCORE_MODS if s != "none"] \
    + [("document_window", "alibi_softcap")]
KNOBS = [dict(window=37, lengths=[13, 60, 1, 90, 36], prefix=77),  # a one-token document included
         dict(window=150, lengths=[100, 1, 99], prefix=150)]


def _family_mods(knobs, device="cpu"):
    mods = []
    for mask, smod in FAMILIES:
        mods.append((masks.mask_mod_for(mask, N, device=device, **knobs), score_mods.score_mod_for(smod, H, device)))
    return mods


def _mask_by_batch(mask_mods):
    """One mask_mod applying ``mask_mods[b]`` to batch element b (torch.where over the candidates)."""
    def selected(b, h, q_idx, kv_idx):
        out = mask_mods[0](b, h, q_idx, kv_idx)
        for i, mod in enumerate(mask_mods[1:], 1):
            out = torch.where(b == i, mod(b, h, q_idx, kv_idx), out)
        return out
    return selected


def _score_by_batch(score_mods_):
    """One score_mod applying ``score_mods_[b]`` (None: identity) to batch element b."""
    def selected(score, b, h, q_idx, kv_idx):
        out = score
        for i, mod in enumerate(score_mods_):
            if mod is not None:
                out = torch.where(b == i, mod(score, b, h, q_idx, kv_idx), out)
        return out
    return selected


def _run_all(knobs):
    """Compiled flex on all families at once; returns {family: RMSE/RMS against float64}."""
    mods = _family_mods(knobs)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(len(FAMILIES), H, N, D, generator=g)
    k, v = (torch.randn(len(FAMILIES), HKV, N, D, generator=g) for _ in range(2))
    mask_all = _mask_by_batch([m for m, _ in mods])
    score_all = _score_by_batch([s for _, s in mods])
    bm = ops.build_block_mask(mask_all, N, "cpu", compiled=True, batch=len(FAMILIES))
    out = ops.attention(q, k, v, bm, score_all)
    errs = {}
    for i, (fam, (mask_mod, smod)) in enumerate(zip(FAMILIES, mods)):
        ref = reference.attention_reference(q[i:i + 1], k[i:i + 1], v[i:i + 1], mask_mod, smod, batch_offset=i)
        errs[fam] = correctness.relative_rmse(out[i:i + 1], ref)
    return errs


def test_mask_and_score_mod_names_agree_everywhere():
    """The names of the mask families, document distributions and score mods are the ones of
    kernels.flex.masks and score_mods in the study's schema, the study's knob masks and the
    report's labels (each list written in its own module, this test ties them)."""
    from pathlib import Path

    import yaml

    from kernels.flex import report, study
    defs = yaml.safe_load((Path(__file__).resolve().parent.parent / "workflow" / "schemas"
                           / "flex.schema.yaml").read_text())["$defs"]
    point = defs["mask_point"]
    assert set(point["properties"]["mask"]["enum"]) == set(masks.MASKS) == set(report.MASK_LABEL)
    assert defs["doc_dist"]["enum"] == list(masks.DOC_DISTS)
    assert defs["score_mod"]["enum"] == list(score_mods.SCORE_MODS)
    assert set(report.SCORE_MOD_LABEL) == set(score_mods.SCORE_MODS) - {"none"}
    conditions = {rule["then"]["required"][0]: rule["if"]["properties"]["mask"] for rule in point["allOf"]}
    assert conditions["window"]["enum"] == list(study._WINDOW_MASKS)
    assert conditions["documents"]["enum"] == list(study._DOCUMENT_MASKS)
    assert conditions["prefix"] == {"const": "prefix"}
    assert set(study._WINDOW_MASKS + study._DOCUMENT_MASKS + ("prefix",)) < set(masks.MASKS)


@pytest.fixture(scope="module")
def compiled_runs():
    first = _run_all(KNOBS[0])
    graphs = counters["stats"]["unique_graphs"]
    second = _run_all(KNOBS[1])
    return first, second, counters["stats"]["unique_graphs"] - graphs


@pytest.mark.parametrize("family", FAMILIES, ids=["-".join(f) for f in FAMILIES])
def test_family_matches_float64(compiled_runs, family):
    first, second, _ = compiled_runs
    assert first[family] < 1e-5 and second[family] < 1e-5, (first[family], second[family])


def test_new_knob_values_do_not_recompile(compiled_runs):
    """window, prefix and document layout are tensors: new values reuse the compiled builder and kernel."""
    assert compiled_runs[2] == 0


def test_geometric_alibi_slopes_are_per_head():
    s = score_mods.alibi_slopes(8)
    assert s[0].item() == pytest.approx(0.5) and s[-1].item() == pytest.approx(2.0**-8)
    bias = score_mods.alibi(s)(torch.zeros(()), 0, torch.arange(8)[:, None, None], torch.tensor(10), torch.tensor(4))
    assert torch.allclose(bias.flatten(), -6 * s)


def test_source_combination_formula():
    """alibi_softcap = 30 tanh((s - 0.125 (h+1) (q - kv)) / 30)."""
    s, h, q, kv = torch.tensor(3.0), torch.tensor(2), torch.tensor(9), torch.tensor(1)
    got = score_mods.score_mod_for("alibi_softcap", 4)(s, 0, h, q, kv)
    assert got.item() == pytest.approx(30 * torch.tanh(torch.tensor((3.0 - 0.125 * 3 * 8) / 30)).item(), rel=1e-6)


def test_sigmoid_soft_cap_equals_tanh_soft_cap():
    s = torch.linspace(-200, 200, 101, dtype=torch.float64)
    a, b = (score_mods.score_mod_for(n, 1)(s, 0, 0, 0, 0) for n in ("softcap", "softcap_sigmoid"))
    assert torch.allclose(a, b, atol=1e-12) and a.abs().max() < 30


def test_document_offsets_equal_lengths():
    offsets = [0, 13, 73, 74, 164, 200]
    assert torch.equal(masks.document_ids(200, lengths=KNOBS[0]["lengths"]), masks.document_ids(200, offsets=offsets))


def test_heavy_tailed_lengths_are_seeded_and_sum():
    a = masks.document_lengths(8191, 64, "heavy", seed=3)
    assert a == masks.document_lengths(8191, 64, "heavy", seed=3)
    assert sum(a) == 8191 and min(a) >= 1 and max(a) > 4 * 8191 // 64
    assert masks.document_lengths(10, 3) == [4, 3, 3]


@pytest.mark.parametrize("call,error,match", [
    (lambda: masks.sliding_window_mask(0), ValueError, "window must be >= 1"),
    (lambda: masks.sliding_window_mask(2.5), TypeError, "window must be an integer"),
    (lambda: masks.prefix_lm_mask(-1), ValueError, "prefix must be >= 0"),
    (lambda: masks.document_mask(200, lengths=[100, 99]), ValueError, "sum to 199, not seqlen=200"),
    (lambda: masks.document_mask(200, lengths=[201, -1]), ValueError, "must be >= 1"),
    (lambda: masks.document_mask(200, offsets=[0, 50, 40, 200]), ValueError, "strictly increasing"),
    (lambda: masks.document_mask(200, offsets=[0, 50, 199]), ValueError, "end at seqlen=200"),
    (lambda: masks.document_mask(200), ValueError, "exactly one of lengths or offsets"),
    (lambda: masks.document_lengths(5, 6), ValueError, "documents must be in"),
    (lambda: masks.mask_mod_for("diagonal", 8), ValueError, "mask must be one of"),
    (lambda: masks.mask_mod_for("prefix", 8, prefix=9), ValueError, "longer than seqlen"),
    (lambda: score_mods.soft_cap(0.0), ValueError, "cap must be a positive"),
    (lambda: score_mods.alibi(torch.ones(2, 2)), TypeError, "slopes must be a 1-D"),
    (lambda: score_mods.score_mod_for("rope", 2), ValueError, "score_mod must be one of"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_mismatched_lengths_are_rejected():
    q, k, v = torch.randn(1, H, N, D), torch.randn(1, HKV, N, D), torch.randn(1, HKV, N, D)
    bm = ops.build_block_mask(masks.causal, 128, "cpu", compiled=False)
    with pytest.raises(ValueError, match="block_mask was built for lengths"):
        ops.check_inputs(q, k, v, bm)
    with pytest.raises(ValueError, match="shapes differ"):
        ops.check_inputs(q, k, v[:, :, :100])
    with pytest.raises(ValueError, match="not a multiple of KV heads"):
        ops.check_inputs(torch.randn(1, 3, N, D), torch.randn(1, 2, N, D), torch.randn(1, 2, N, D))
    with pytest.raises(TypeError, match="dtypes differ"):
        ops.check_inputs(q.double(), k, v)
    with pytest.raises(ValueError, match="does not match the output shape"):
        reference.attention_reference_grads(q, k, v, q[:, :, :10], masks.causal)


@pytest.mark.gpu
@pytest.mark.parametrize("mask,score_mod", FAMILIES)
def test_backward_matches_float64_gpu(mask, score_mod):
    """Output and dq, dk, dv of compiled flex (bf16, GQA 4/2, N=1000) against float64 on the GPU."""
    n, dev = 1000, "cuda"
    g = torch.Generator(device=dev).manual_seed(1)
    q = torch.randn(2, 4, n, 64, generator=g, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, 2, n, 64, generator=g, device=dev, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    dout = torch.randn(2, 4, n, 64, generator=g, device=dev, dtype=torch.bfloat16)
    mask_mod = masks.mask_mod_for(mask, n, window=300, lengths=masks.document_lengths(n, 7, "heavy"), prefix=333,
                                  device=dev)
    smod = score_mods.score_mod_for(score_mod, 4, dev)
    out = ops.attention(q, k, v, ops.build_block_mask(mask_mod, n, dev), smod)
    got = (out, *torch.autograd.grad(out, (q, k, v), dout))
    want = reference.attention_reference_grads(q, k, v, dout, mask_mod, smod)
    for name, x, y in zip(("out", "dq", "dk", "dv"), got, want):
        correctness.check_close(name, x, y, 0.02 if name == "out" else 0.04)


@pytest.mark.parametrize("knobs", KNOBS)
def test_inline_knobs_give_the_same_mods_as_captured_tensors(knobs):
    """``inline`` (FlexAttention's FLASH backend) bakes the scalar knobs in as Python numbers; the
    masks and score mods it gives are the tensor-captured ones, on every (q, kv) of a dense grid."""
    q_idx, kv_idx = torch.arange(N).view(-1, 1), torch.arange(N).view(1, -1)
    b, h = torch.tensor(0), torch.arange(H).view(-1, 1, 1)
    score = torch.randn(H, N, N, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for mask, smod in FAMILIES:
        tensor_mask = masks.mask_mod_for(mask, N, **knobs)
        inline_mask = masks.mask_mod_for(mask, N, inline=True, **knobs)
        assert torch.equal(tensor_mask(b, h, q_idx, kv_idx), inline_mask(b, h, q_idx, kv_idx)), mask
        tensor_score, inline_score = (score_mods.score_mod_for(smod, H, inline=i) for i in (False, True))
        if smod != "none":
            assert torch.allclose(tensor_score(score, b, h, q_idx, kv_idx), inline_score(score, b, h, q_idx, kv_idx),
                                  rtol=1e-6), smod
    assert type(masks._knob("window", knobs["window"], None, 1, inline=True)) is int
    assert type(score_mods._cap_tensor(score_mods.SOURCE_CAP, None, inline=True)) is float
