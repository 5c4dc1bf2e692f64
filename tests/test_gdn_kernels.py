"""GDN forward: references against each other, Triton kernels against the float64 reference.

On the CPU the kernels run under TRITON_INTERPRET=1 at small shapes; the
``gpu`` tests repeat the checks at the study's shapes on CUDA.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch.nn.functional as F  # noqa: E402

from kernels.gdn.chunk import chunk_gated_delta_rule, chunk_gated_delta_rule_fwd  # noqa: E402
from kernels.gdn.naive import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule  # noqa: E402
from kernels.gdn.recurrent import fused_recurrent_gated_delta_rule  # noqa: E402
from kernels.gdn.validate import cached_per_tensor  # noqa: E402
from kernels.correctness import relative_rmse  # noqa: E402

TOL = 0.005
KERNELS = {"chunk": chunk_gated_delta_rule, "recurrent": fused_recurrent_gated_delta_rule}
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def gate(regime, shape, gen):
    """The four gate regimes of the issue."""
    if regime == "zero":
        return torch.zeros(shape)
    if regime == "mild":
        return F.logsigmoid(torch.randn(shape, generator=gen)) / 16
    if regime == "init":
        return -torch.rand(shape, generator=gen) * 16 * F.softplus(0.5 * torch.randn(shape, generator=gen) + 1)
    if regime == "strong":
        return F.logsigmoid(torch.rand(shape, generator=gen)) / 0.01
    raise ValueError(regime)


def inputs(B, T, H, D, regime="mild", dtype=torch.bfloat16, seed=0, h0=False, N=None, device=DEV):
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, T, H, D, generator=gen), dim=-1).to(dtype)
    k = F.normalize(torch.randn(B, T, H, D, generator=gen), dim=-1).to(dtype)
    v = torch.randn(B, T, H, D, generator=gen).to(dtype)
    g = gate(regime, (B, T, H), gen)
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    s = torch.randn(N or B, H, D, D, generator=gen) if h0 else None
    out = [x.to(device) for x in (q, k, v, g, beta)]
    return (*out, s.to(device) if s is not None else None)


def check(fn, q, k, v, g, beta, h0, cu=None, ref=naive_recurrent_gated_delta_rule):
    o, ht = fn(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    ro, rh = ref(q.float(), k.float(), v.float(), g, beta, initial_state=h0, output_final_state=True,
                 cu_seqlens=cu)
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert o.dtype == v.dtype and o.shape == v.shape and ht.dtype == torch.float32
    eo, eh = relative_rmse(o, ro), relative_rmse(ht, rh)
    assert eo <= TOL, f"o RMSE/RMS {eo:.4g}"
    assert eh <= TOL, f"final state RMSE/RMS {eh:.4g}"


@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_references_agree(regime):
    q, k, v, g, beta, h0 = inputs(2, 130, 2, 16, regime, torch.float32, h0=True, device="cpu")
    a = naive_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    b = naive_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert relative_rmse(a[0], b[0]) < 1e-6 and relative_rmse(a[1], b[1]) < 1e-6


@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_gate_regimes(impl, regime):
    check(KERNELS[impl], *inputs(1, 75, 1, 32, regime, h0=True))


@pytest.mark.parametrize("T", [1, 63, 64, 65])
def test_chunk_odd_lengths(T):
    check(chunk_gated_delta_rule, *inputs(2, T, 1, 32, "init", h0=T != 64))


@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_chunk_float16_products_packed(regime):
    """K = 128 with bfloat16 inputs takes the float16-product path (W, U, the chunk states
    and V_new stored in float16): every gate regime, packed sequences with an initial state."""
    cu = torch.tensor([0, 1, 9, 70, 150], dtype=torch.int32, device=DEV)
    check(chunk_gated_delta_rule, *inputs(1, 150, 1, 128, regime, h0=True, N=4), cu)


def test_head_dim_64_both_kernels():
    for fn in KERNELS.values():
        check(fn, *inputs(1, 70, 1, 64, "mild", h0=True))


@pytest.mark.parametrize("impl", sorted(KERNELS))
def test_cu_seqlens_many_short(impl):
    cu = torch.tensor([0, 1, 9, 40, 40, 105, 120, 150], dtype=torch.int64, device=DEV)
    q, k, v, g, beta, h0 = inputs(1, 150, 1, 32, "mild", h0=True, N=7)
    check(KERNELS[impl], q, k, v, g, beta, h0, cu.to(torch.int32) if impl == "chunk" else cu)
    # each packed sequence equals its own call
    o, _ = KERNELS[impl](q, k, v, g, beta, initial_state=h0, cu_seqlens=cu)
    s, e = 40, 105
    o1, _ = KERNELS[impl](q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e], beta[:, s:e], initial_state=h0[4:5])
    assert torch.equal(o[:, s:e], o1)


@pytest.mark.parametrize("D", [32, 128])
def test_chunk_states_for_backward(D):
    """The stored per-chunk states are the state entering each chunk, kept in the products'
    operand dtype: float16 for 16-bit inputs with K = 128, float32 otherwise."""
    q, k, v, g, beta, h0 = inputs(1, 150, 1, D, "mild", h0=True)
    o, ht, inter = chunk_gated_delta_rule_fwd(q, k, v, g.float().contiguous(), beta, D ** -0.5, h0, True,
                                              store_chunk_states=True)
    assert inter.h.shape == (3, 1, D, D) and inter.v_new.shape == (150, 1, D)
    kept = torch.float16 if D == 128 else torch.float32
    assert inter.h.dtype == inter.v_new.dtype == kept
    assert torch.equal(inter.h[0], h0[0].to(kept))
    _, s128 = naive_recurrent_gated_delta_rule(q[:, :128].float(), k[:, :128].float(), v[:, :128].float(),
                                               g[:, :128], beta[:, :128], initial_state=h0,
                                               output_final_state=True)
    assert relative_rmse(inter.h[2], s128[0]) <= TOL


def test_product_dtype():
    import triton.language as tl

    from kernels.gdn.chunk import product_dtype

    assert product_dtype(torch.bfloat16, 128) == product_dtype(torch.float16, 128) == tl.float16
    assert product_dtype(torch.bfloat16, 64) == product_dtype(torch.float32, 128) == tl.float32


def test_l2norm_in_kernel():
    q, k, v, g, beta, _ = inputs(1, 40, 1, 32, "mild")
    a, _ = chunk_gated_delta_rule(q * 3, k * 0.5, v, g, beta, use_qk_l2norm_in_kernel=True)
    r, _ = naive_recurrent_gated_delta_rule(q.float(), k.float(), v.float(), g, beta)
    assert relative_rmse(a, r) <= TOL


def test_value_block_fills_sms_and_respects_floor(monkeypatch):
    from kernels.gdn import _launch

    monkeypatch.setattr(_launch, "interpreting", lambda: False)
    cpu = torch.device("cpu")  # 132 SMs assumed, as on an H200
    assert _launch.value_block(128, 64, cpu) == 64      # 64 * 128 / 64 = 128 programs >= 132 / 2
    assert _launch.value_block(128, 32, cpu) == 32      # 128 programs
    assert _launch.value_block(128, 8, cpu) == 16       # narrowest block for few (sequence, head) pairs
    assert _launch.value_block(128, 8, cpu, min_block=32) == 32
    assert _launch.value_block(128, 512, cpu) == 64
    assert _launch.value_block(16, 8, cpu, min_block=32) == 16


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
def test_gpu_gate_error_and_no_wait_for_kernels(fn):
    """On the GPU g > 0 raises when checked, and a call returns before its kernels have finished."""
    q, k, v, g, beta, _ = inputs(1, 300, 4, 128, "mild")
    with pytest.raises(ValueError, match="g is a log decay and must be <= 0; max is 0.5"):
        fn(q, k, v, torch.where(torch.arange(300, device=g.device)[None, :, None] == 3, 0.5, g), beta,
           check_gate=True)
    q, k, v, g, beta, _ = inputs(4, 8192, 16, 128, "mild")   # kernels of a millisecond or more
    fn(q, k, v, g, beta)   # compiled and tuned
    torch.cuda.synchronize()
    fn(q, k, v, g, beta)
    assert not torch.cuda.current_stream().query()


@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
def test_gate_checked_only_when_asked(fn):
    """Like FLA's ops, ours do not read g unless ``check_gate``: a positive g then runs."""
    q, k, v, g, beta, _ = inputs(1, 8, 1, 32, "mild", device="cpu")
    g = torch.where(torch.arange(8)[None, :, None] == 3, 0.5, g)
    with pytest.raises(ValueError, match="g is a log decay and must be <= 0; max is 0.5"):
        fn(q, k, v, g, beta, check_gate=True)
    o, _ = fn(q, k, v, g, beta)
    assert o.shape == v.shape


@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule,
                                naive_recurrent_gated_delta_rule])
def test_errors(fn):
    q, k, v, g, beta, _ = inputs(2, 8, 1, 32, "mild", device="cpu")
    with pytest.raises(ValueError, match="q must be"):
        fn(q[0], k, v, g, beta)
    with pytest.raises(ValueError, match="v must be"):
        fn(q, k, v[:, :4], g, beta)
    with pytest.raises(ValueError, match="g must be"):
        fn(q, k, v, g[..., None], beta)
    if fn is naive_recurrent_gated_delta_rule:   # the reference always checks g
        with pytest.raises(ValueError, match="g is a log decay and must be <= 0; max is 0.5"):
            fn(q, k, v, torch.where(torch.arange(8)[None, :, None] == 3, 0.5, g), beta)
    with pytest.raises(TypeError, match="share a dtype"):
        fn(q, k.float(), v, g, beta)
    with pytest.raises(TypeError, match="float16/bfloat16/float32"):
        fn(q, k, v, g.to(torch.int32), beta)
    with pytest.raises(ValueError, match="<= 0"):
        fn(q, k, v, g.abs() + 0.1, beta, **({} if fn is naive_recurrent_gated_delta_rule else {"check_gate": True}))
    with pytest.raises(ValueError, match="head dims"):
        fn(q[..., :24], k[..., :24], v, g, beta)
    with pytest.raises(ValueError, match="batch must be 1"):
        fn(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 8], dtype=torch.int32))
    q1, k1, v1, g1, b1 = (x[:1] for x in (q, k, v, g, beta))
    with pytest.raises(ValueError, match="end at T"):
        fn(q1, k1, v1, g1, b1, cu_seqlens=torch.tensor([0, 3, 7], dtype=torch.int32))
    with pytest.raises(TypeError, match="cu_seqlens"):
        fn(q1, k1, v1, g1, b1, cu_seqlens=torch.tensor([0.0, 8.0]))
    with pytest.raises(ValueError, match="initial_state must be"):
        fn(q, k, v, g, beta, initial_state=torch.zeros(1, 1, 32, 32))
    with pytest.raises(TypeError, match="initial_state"):
        fn(q, k, v, g, beta, initial_state=torch.zeros(2, 1, 32, 32, dtype=torch.float64))


def test_cached_per_tensor_identity_version_and_args():
    calls = []

    @cached_per_tensor
    def total(t, n):
        calls.append(n)
        return int(t.sum()) + n

    t = torch.tensor([0, 3, 8])
    assert total(t, 1) == total(t, 1) == 12 and len(calls) == 1
    assert total(t, 2) == 13 and len(calls) == 2                  # other arguments
    t.add_(1)                                                     # an in-place write
    assert total(t, 1) == 15 and len(calls) == 3
    assert total(t.clone(), 1) == 15 and len(calls) == 4          # equal values, another tensor
    with torch.inference_mode():
        u = torch.tensor([1])
    assert total(u, 0) == total(u, 0) == 1 and len(calls) == 6    # no version: not cached


@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
def test_cu_seqlens_changed_in_place_is_checked_again(fn):
    q, k, v, g, beta, _ = inputs(1, 8, 1, 32, "mild", device="cpu")
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    fn(q, k, v, g, beta, cu_seqlens=cu)
    cu[2] = 7
    with pytest.raises(ValueError, match="end at T=8"):
        fn(q, k, v, g, beta, cu_seqlens=cu)


# ---------------------------------------------------------------------------- GPU, study-like shapes

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
@pytest.mark.parametrize("packed", [False, True])
def test_gpu_repeated_call_never_synchronises(fn, packed):
    """A second call with the same inputs (and the same cu_seqlens tensor) does no
    synchronising operation: the host never waits for the GPU before enqueuing its kernels."""
    q, k, v, g, beta, _ = inputs(1, 1000, 4, 128, "mild")
    cu = torch.tensor([0, 10, 300, 301, 1000], dtype=torch.int32, device=q.device) if packed else None
    fn(q, k, v, g, beta, cu_seqlens=cu)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn(q, k, v, g, beta, cu_seqlens=cu)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
@pytest.mark.parametrize("T", [1, 63, 64, 65, 75, 300, 1000])
def test_gpu_regimes_lengths(impl, regime, T):
    check(KERNELS[impl], *inputs(2, T, 4, 128, regime, h0=True), ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_varlen(impl, D):
    gen = torch.Generator().manual_seed(1)
    lens = torch.randint(1, 300, (40,), generator=gen)
    cu = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32).to(DEV)
    T = int(cu[-1])
    check(KERNELS[impl], *inputs(1, T, 4, D, "init", h0=True, N=40), cu, ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("B,T,H", [(4, 8192, 16), (1, 32768, 32)])
def test_gpu_chunk_study_shapes(B, T, H):
    for regime in ("mild", "strong"):
        check(chunk_gated_delta_rule, *inputs(B, T, H, 128, regime), ref=naive_chunk_gated_delta_rule)
