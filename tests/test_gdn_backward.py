"""GDN backward: the Triton chunked backward against float64 autograd of the reference.

On the CPU the kernels run under TRITON_INTERPRET=1 at small shapes; the
``gpu`` tests repeat the checks at larger shapes on CUDA (Triton 3.6 on
Hopper miscompiles some transposes, so every gradient is checked there too).
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from test_gdn_kernels import DEV, edge_sequences, inputs, normal_on, packed_subset, random_cu_seqlens  # noqa: E402

from kernels.gdn.chunk import chunk_gated_delta_rule  # noqa: E402
from kernels.core.correctness import relative_rmse  # noqa: E402
from kernels.gdn.naive import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule, reference_grads  # noqa: E402
from kernels.gdn.study import GRAD_FLOOR, TOLERANCE  # noqa: E402


def triton_grads(q, k, v, g, beta, h0, do, dht, cu=None):
    xs = {n: x.detach().clone().requires_grad_() for n, x in
          (("dq", q), ("dk", k), ("dv", v), ("dg", g), ("dbeta", beta), ("dh0", h0)) if x is not None}
    o, ht = chunk_gated_delta_rule(xs["dq"], xs["dk"], xs["dv"], xs["dg"], xs["dbeta"], initial_state=xs.get("dh0"),
                                   output_final_state=dht is not None, cu_seqlens=cu)
    loss = (o.float() * do.float()).sum() + ((ht * dht).sum() if dht is not None else 0)
    return dict(zip(xs, torch.autograd.grad(loss, list(xs.values()))))


def cotangents(B, T, H, D, N=None, seed=7, dtype=torch.bfloat16, scale=1.0, final=True):
    """Seeded N(0, scale^2) gradients of o ``[B, T, H, D]`` and of the final state ``[N, H, D, D]``
    (None without ``final``; o's the same either way)."""
    gen = torch.Generator().manual_seed(seed)
    do = (torch.randn(B, T, H, D, generator=gen) * scale).to(dtype).to(DEV)
    return do, (torch.randn(N or B, H, D, D, generator=gen) * scale).to(DEV) if final else None


def check_grads(q, k, v, g, beta, h0, cu=None, dht=True, tol=None, ref=naive_chunk_gated_delta_rule, cot_scale=1.0,
                seqs=None):
    """The Triton gradients against float64 autograd of ``ref`` (relative RMSE per gradient), ``dht``
    the final state's cotangent: True (drawn with o's, :func:`cotangents`), False (none) or the
    tensor; with ``seqs``, only those packed sequences of ``cu``, the reference run on them alone
    (their gradients depend on their own inputs and cotangents only)."""
    B, T, HV, D = v.shape
    do, ht_grad = cotangents(B, T, HV, D, N=None if cu is None else cu.numel() - 1, dtype=q.dtype, scale=cot_scale,
                             final=dht is True)
    ht_grad = dht if isinstance(dht, torch.Tensor) else ht_grad
    got = triton_grads(q, k, v, g, beta, h0, do, ht_grad, cu)
    if seqs is not None:
        tokens, cu = packed_subset(cu, seqs)
        q, k, v, g, beta, do = (x[:, tokens] for x in (q, k, v, g, beta, do))
        h0, ht_grad = (x[seqs] if x is not None else None for x in (h0, ht_grad))
        got = {name: x[seqs] if name == "dh0" else x[:, tokens] for name, x in got.items()}
    want = reference_grads(q, k, v, g, beta, do, ht_grad, initial_state=h0, cu_seqlens=cu, fn=ref)
    assert set(got) == set(want)
    for name, x in got.items():
        assert x.shape == want[name].shape and torch.isfinite(x).all(), name
        err = relative_rmse(x, want[name], floor=GRAD_FLOOR)
        assert err <= (tol or TOLERANCE[name]), f"{name}: RMSE/RMS {err:.4g}"


@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_bwd_gate_regimes(regime):
    check_grads(*inputs(1, 75, 1, 32, regime, h0=True))


@pytest.mark.parametrize("T", [1, 63, 65])
def test_bwd_odd_lengths(T):
    check_grads(*inputs(2, T, 1, 32, "init", h0=True))


def test_bwd_cu_seqlens_initial_state():
    cu = torch.tensor([0, 1, 9, 40, 40, 105, 120, 150], dtype=torch.int32, device=DEV)
    check_grads(*inputs(1, 150, 1, 32, "mild", h0=True, N=7), cu=cu)


def test_bwd_check_of_some_packed_sequences():
    """The many-sequence GPU test's check of a subset of packed sequences (empty one included), its
    states drawn on the device, passes."""
    cu = torch.tensor([0, 1, 9, 40, 40, 105, 120, 150], dtype=torch.int32, device=DEV)
    q, k, v, g, beta, _ = inputs(1, 150, 1, 32, "mild")
    h0, dht = (normal_on((7, 1, 32, 32), seed=s) for s in (3, 4))
    check_grads(q, k, v, g, beta, h0, cu=cu, dht=dht, seqs=[0, 3, 4, 6])


@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_bwd_gva_gate_regimes(regime):
    """GVA (H = 2, HV = 4): dq and dk sum the shares of each key head's two value heads."""
    check_grads(*inputs(1, 75, 2, 32, regime, h0=True, HV=4))


def test_bwd_gva_odd_lengths_cu_seqlens_initial_state():
    cu = torch.tensor([0, 1, 66, 97], dtype=torch.int32, device=DEV)
    check_grads(*inputs(1, 97, 1, 32, "init", h0=True, N=3, HV=2), cu=cu)


def test_bwd_gva_float16_products_no_state():
    """GVA on the float16-product path (bfloat16 inputs, K = 128, no initial state)."""
    check_grads(*inputs(1, 65, 2, 128, "mild", HV=4), None)


def test_group_sum_matches_torch():
    """dq and dk of GVA: each key head's shares summed in float32, cast once; rows not a
    multiple of the kernel's row block."""
    from kernels.gdn.chunk_bwd import group_sum

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, 37, 8, 32, generator=gen).to(DEV)        # HV = 8 value heads
    want = x.double().view(1, 37, 2, 4, 32).sum(3)
    for dtype, rtol in ((torch.float32, 1e-6), (torch.bfloat16, 2 ** -7)):   # bf16: one unit in the last place
        y = group_sum(x, torch.empty(1, 37, 2, 32, dtype=dtype, device=DEV))   # H = 2 key heads
        assert y.dtype == dtype and torch.allclose(y.double(), want, rtol=rtol, atol=1e-6), dtype


def test_bwd_large_initial_state_float16():
    """float16, K = 128, initial state N(0, 1e5^2): every gradient finite and within tolerance.
    The cotangents are N(0, 0.01^2) so that dq and dk (float16, like q and k) stay within
    float16's range: with N(0, 1) the reference's dq reaches 3e5, which float16 cannot hold."""
    check_grads(*inputs(1, 70, 1, 128, "mild", torch.float16, h0=True, h0_scale=1e5), cot_scale=0.01)


def test_bwd_no_state_no_final_grad_head_dim_64():
    q, k, v, g, beta, _ = inputs(1, 70, 1, 64, "mild")
    check_grads(q, k, v, g, beta, None, dht=False)


def test_bwd_value_blocks_summed(monkeypatch):
    """Steps 3 and 4 sum over the value axis in blocks of ``PARALLEL_BV`` columns: forced to 16,
    four blocks at V = 64 (the study's V = 128 takes two), the gradients still match."""
    from kernels.gdn import chunk_bwd

    monkeypatch.setattr(chunk_bwd, "PARALLEL_BV", 16)
    check_grads(*inputs(1, 70, 2, 64, "init", dtype=torch.float32, h0=True), tol=2e-5)


def test_bwd_float32_matches_the_math():
    """In float32 (exact dots in the interpreter) the backward equals the float64 gradient to rounding."""
    check_grads(*inputs(1, 130, 2, 16, "init", dtype=torch.float32, h0=True), tol=2e-5)


def test_bwd_head_dim_128_two_key_blocks():
    """K = 128: dq and dk come from two key-block programs, dbeta and dg sum their parts."""
    check_grads(*inputs(1, 70, 1, 128, "init", dtype=torch.float32, h0=True), tol=2e-5)


def test_bwd_deterministic_and_no_grad_path():
    q, k, v, g, beta, h0 = inputs(1, 65, 1, 32, "mild", h0=True)
    do, dht = cotangents(1, 65, 1, 32)
    a = triton_grads(q, k, v, g, beta, h0, do, dht)
    b = triton_grads(q, k, v, g, beta, h0, do, dht)
    assert all(torch.equal(a[n], b[n]) for n in a)
    with torch.no_grad():
        o0, h_0 = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o1, h_1 = chunk_gated_delta_rule(q, k, v, g.requires_grad_(), beta, initial_state=h0, output_final_state=True)
    assert o1.requires_grad and torch.equal(o0, o1.detach()) and torch.equal(h_0, h_1.detach())


def test_bwd_directional_derivative():
    """The Triton gradient against central differences of the Triton forward (float32)."""
    q, k, v, g, beta, h0 = inputs(1, 40, 1, 16, "mild", dtype=torch.float32, h0=True, seed=3)
    do, dht = cotangents(1, 40, 1, 16, dtype=torch.float32)
    grads = triton_grads(q, k, v, g, beta, h0, do, dht)
    gen = torch.Generator().manual_seed(11)
    xs = dict(dq=q, dk=k, dv=v, dg=g, dbeta=beta, dh0=h0)
    dirs = {n: torch.randn(x.shape, generator=gen).to(DEV) * (0.1 if n in ("dg", "dbeta") else 1.0)
            for n, x in xs.items()}
    eps = 1e-3

    def loss(sign):
        y = {n: x + sign * eps * dirs[n] for n, x in xs.items()}
        o, ht = chunk_gated_delta_rule(y["dq"], y["dk"], y["dv"], y["dg"].clamp(max=0), y["dbeta"],
                                       initial_state=y["dh0"], output_final_state=True)
        return ((o * do).sum() + (ht * dht).sum()).double()

    numeric = (loss(1) - loss(-1)) / (2 * eps)
    analytic = sum((grads[n].double() * dirs[n].double()).sum() for n in xs)
    assert abs(numeric - analytic) <= 2e-3 * abs(analytic), (numeric.item(), analytic.item())


@pytest.mark.parametrize("fn", [naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule])
def test_reference_gradcheck(fn):
    """gradcheck in float64 of the references whose autograd is the gradient oracle.

    The Triton kernels run only 16/32-bit inputs with float32 intermediates, so
    they cannot be gradchecked in float64; they are compared with these.
    """
    q, k, v, g, beta, h0 = inputs(1, 9, 1, 16, "mild", dtype=torch.float64, h0=True, N=2, device="cpu")
    cu = torch.tensor([0, 4, 9])
    kw = dict(chunk_size=4) if fn is naive_chunk_gated_delta_rule else {}

    def f(q, k, v, g, beta, h0):
        return fn(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu, **kw)

    args = [x.detach().double().requires_grad_() for x in (q, k, v, g, beta, h0)]
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6, fast_mode=True)


# ---------------------------------------------------------------------------- GPU, study-like shapes

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
@pytest.mark.parametrize("T", [1, 63, 65, 300, 1000])
@pytest.mark.parametrize("h0", [False, True])
def test_gpu_bwd_regimes_lengths(regime, T, h0):
    """K = 128: float16 products without an initial state, float32 with one."""
    q, k, v, g, beta, s = inputs(2, T, 4, 128, regime, h0=h0)
    check_grads(q, k, v, g, beta, s)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_bwd_varlen(D):
    cu = random_cu_seqlens(40, 300, seed=1)
    check_grads(*inputs(1, int(cu[-1]), 4, D, "init", h0=True, N=40), cu=cu)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
# gpu_memory(gib=X): as in test_gdn_kernels.py, X GiB reserved at the peak (15.0 and 14.5 GiB here)
@pytest.mark.parametrize("B,T,H", [pytest.param(4, 8192, 16, marks=pytest.mark.gpu_memory(gib=16)), (1, 8192, 32),
                                   (1, 4096, 16)])
@pytest.mark.parametrize("with_h0", [False, True])
def test_gpu_bwd_study_shapes_deterministic(B, T, H, with_h0):
    """At the study's shapes, without an initial state (the study's float16-product path) and with one."""
    q, k, v, g, beta, h0 = inputs(B, T, H, 128, "mild", h0=with_h0)
    check_grads(q, k, v, g, beta, h0)
    do, dht = cotangents(B, T, H, 128)
    a = triton_grads(q, k, v, g, beta, h0, do, dht)
    b = triton_grads(q, k, v, g, beta, h0, do, dht)
    assert all(torch.equal(a[n], b[n]) for n in a)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
@pytest.mark.parametrize("T", [1, 65, 1000])
@pytest.mark.parametrize("h0", [False, True])
def test_gpu_bwd_gva_regimes_lengths(regime, T, h0):
    q, k, v, g, beta, s = inputs(2, T, 4, 128, regime, h0=h0, HV=8)
    check_grads(q, k, v, g, beta, s)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_bwd_gva_varlen(D):
    cu = random_cu_seqlens(40, 300, seed=1)
    check_grads(*inputs(1, int(cu[-1]), 4, D, "init", h0=True, N=40, HV=16), cu=cu)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_bwd_large_initial_state(dtype, D):
    """Initial state N(0, 1e5^2), cotangents N(0, 0.01^2) (dq, dk in float16 range)."""
    check_grads(*inputs(2, 1000, 4, D, "mild", dtype, h0=True, h0_scale=1e5), cot_scale=0.01)


@pytest.mark.gpu
@pytest.mark.gpu_memory(gib=59)  # 4 GiB states: initial, its copy and gradient, final, its cotangent: 54.5, 58.1 GiB
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("N,H,HV", [(2048, 32, 32), (4096, 8, 16)])
def test_gpu_bwd_many_sequences_grid(N, H, HV):
    """N * HV >= 65536 packed sequences x value heads, the sequences of ``edge_sequences`` compared
    (the float64 reference's autograd graph of every sequence ran out of memory at N 4096, holding 133 GiB)."""
    cu = random_cu_seqlens(N, 100, seed=2)
    q, k, v, g, beta, _ = inputs(1, int(cu[-1]), H, 128, "mild", HV=HV)
    h0, dht = (normal_on((N, HV, 128, 128), seed=s) for s in (3, 4))
    check_grads(q, k, v, g, beta, h0, cu=cu, dht=dht, seqs=edge_sequences(N))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("B,T,H,HV", [(1, 8192, 16, 32),
                                       pytest.param(1, 32768, 8, 16, marks=pytest.mark.gpu_memory(gib=16)),  # 15.8 GiB
                                       (1, 32768, 2, 4)])
def test_gpu_bwd_flash_qla_shapes_deterministic(B, T, H, HV):
    """FlashQLA's published backward shapes (h_qk / h_v), bitwise reproducible."""
    q, k, v, g, beta, _ = inputs(B, T, H, 128, "mild", HV=HV)
    check_grads(q, k, v, g, beta, None)
    do, dht = cotangents(B, T, HV, 128)
    a = triton_grads(q, k, v, g, beta, None, do, dht)
    b = triton_grads(q, k, v, g, beta, None, do, dht)
    assert all(torch.equal(a[n], b[n]) for n in a)
