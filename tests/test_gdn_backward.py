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

from test_gdn_kernels import DEV, inputs  # noqa: E402

from kernels.gdn.chunk import chunk_gated_delta_rule  # noqa: E402
from kernels.gdn.naive import (GRAD_TOL, grad_error, naive_chunk_gated_delta_rule,  # noqa: E402
                               naive_recurrent_gated_delta_rule, reference_grads)


def triton_grads(q, k, v, g, beta, h0, do, dht, cu=None):
    xs = {n: x.detach().clone().requires_grad_() for n, x in
          (("dq", q), ("dk", k), ("dv", v), ("dg", g), ("dbeta", beta), ("dh0", h0)) if x is not None}
    o, ht = chunk_gated_delta_rule(xs["dq"], xs["dk"], xs["dv"], xs["dg"], xs["dbeta"], initial_state=xs.get("dh0"),
                                   output_final_state=dht is not None, cu_seqlens=cu)
    loss = (o.float() * do.float()).sum() + ((ht * dht).sum() if dht is not None else 0)
    return dict(zip(xs, torch.autograd.grad(loss, list(xs.values()))))


def cotangents(B, T, H, D, N=None, seed=7, dtype=torch.bfloat16):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T, H, D, generator=gen).to(dtype).to(DEV),
            torch.randn(N or B, H, D, D, generator=gen).to(DEV))


def check_grads(q, k, v, g, beta, h0, cu=None, dht=True, tol=None, ref=naive_chunk_gated_delta_rule):
    B, T, H, D = q.shape
    do, ht_grad = cotangents(B, T, H, D, N=None if cu is None else cu.numel() - 1, dtype=q.dtype)
    ht_grad = ht_grad if dht else None
    got = triton_grads(q, k, v, g, beta, h0, do, ht_grad, cu)
    want = reference_grads(q, k, v, g, beta, do, ht_grad, initial_state=h0, cu_seqlens=cu, fn=ref)
    assert set(got) == set(want)
    for name, x in got.items():
        assert x.shape == want[name].shape and torch.isfinite(x).all(), name
        err = grad_error(x, want[name])
        assert err <= (tol or GRAD_TOL[name]), f"{name}: RMSE/RMS {err:.4g}"


@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_bwd_gate_regimes(regime):
    check_grads(*inputs(1, 75, 1, 32, regime, h0=True))


@pytest.mark.parametrize("T", [1, 63, 65])
def test_bwd_odd_lengths(T):
    check_grads(*inputs(2, T, 1, 32, "init", h0=True))


def test_bwd_cu_seqlens_initial_state():
    cu = torch.tensor([0, 1, 9, 40, 40, 105, 120, 150], dtype=torch.int32, device=DEV)
    check_grads(*inputs(1, 150, 1, 32, "mild", h0=True, N=7), cu=cu)


def test_bwd_no_state_no_final_grad_head_dim_64():
    q, k, v, g, beta, _ = inputs(1, 70, 1, 64, "mild")
    check_grads(q, k, v, g, beta, None, dht=False)


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
def test_gpu_bwd_regimes_lengths(regime, T):
    check_grads(*inputs(2, T, 4, 128, regime, h0=True))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_bwd_varlen(D):
    gen = torch.Generator().manual_seed(1)
    lens = torch.randint(1, 300, (40,), generator=gen)
    cu = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32).to(DEV)
    check_grads(*inputs(1, int(cu[-1]), 4, D, "init", h0=True, N=40), cu=cu)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("B,T,H", [(4, 8192, 16), (1, 8192, 32), (1, 4096, 16)])
def test_gpu_bwd_study_shapes_deterministic(B, T, H):
    q, k, v, g, beta, h0 = inputs(B, T, H, 128, "mild", h0=True)
    check_grads(q, k, v, g, beta, h0)
    do, dht = cotangents(B, T, H, 128)
    a = triton_grads(q, k, v, g, beta, h0, do, dht)
    b = triton_grads(q, k, v, g, beta, h0, do, dht)
    assert all(torch.equal(a[n], b[n]) for n in a)
