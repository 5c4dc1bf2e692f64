"""SwiGLU kernels against the reference: dtypes, odd and strided shapes, backward,
decode launch, the source kernel, the GEMM epilogue and every error message.

On CPU the Triton kernels run under TRITON_INTERPRET=1 (set by conftest.py);
the `gpu` tests need CUDA (the H200)."""

import pytest
import torch

from kernels.swiglu.elementwise import (as_rows, check_operands, swiglu, swiglu_backward, swiglu_decode,
                                        swiglu_forward)
from kernels.swiglu.gemm import GateUpWeight, pack_gate_up, swiglu_gemm, swiglu_matmul
from kernels.swiglu.reference import swiglu_backward_reference, swiglu_eager, swiglu_reference
from kernels.swiglu.seed import seed_swiglu

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-5}


def rel(out, ref):
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm()).item()


def randn(*shape, dtype=torch.bfloat16, device="cpu", seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(*shape, generator=g, device=device).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forward_preserves_dtype_odd_shape(dtype, device):
    gate, up = randn(42, 431, dtype=dtype, device=device), randn(42, 431, dtype=dtype, device=device, seed=1)
    out = swiglu_forward(gate, up)
    assert out.dtype == dtype and out.shape == (42, 431) and out.is_contiguous()
    assert rel(out, swiglu_reference(gate, up)) < TOL[dtype]


def test_forward_leading_shape_and_empty(device):
    gate, up = randn(2, 3, 50, device=device), randn(2, 3, 50, device=device, seed=1)
    out = swiglu_forward(gate, up)
    assert out.shape == (2, 3, 50)
    assert rel(out, swiglu_reference(gate, up)) < 1e-2
    assert swiglu_forward(gate[:, :0], up[:, :0]).shape == (2, 0, 50)


@pytest.mark.parametrize("shape", [(7, 2 * 431), (2, 5, 2 * 64)], ids=["2d", "3d"])
def test_forward_strided_halves_without_copy(shape, device, monkeypatch):
    fused = randn(*shape, device=device)
    gate, up = fused.chunk(2, dim=-1)
    assert not gate.is_contiguous()
    ref = swiglu_reference(gate, up)
    # The rows view shares the storage, and no .contiguous() copy happens.
    assert as_rows("gate", gate).data_ptr() == gate.data_ptr()

    def no_copy(*args, **kwargs):
        raise AssertionError(".contiguous() called on an input")

    monkeypatch.setattr(torch.Tensor, "contiguous", no_copy)
    out = swiglu_forward(gate, up)
    d_gate, d_up = swiglu_backward(torch.ones_like(out), gate, up)
    monkeypatch.undo()
    assert rel(out, ref) < 1e-2
    ref_dg, ref_du = swiglu_backward_reference(torch.ones_like(out), gate, up)
    assert rel(d_gate, ref_dg) < 1e-2 and rel(d_up, ref_du) < 1e-2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_matches_autograd_of_eager_formula(dtype, device):
    gate, up = randn(42, 431, dtype=dtype, device=device), randn(42, 431, dtype=dtype, device=device, seed=1)
    d_out = randn(42, 431, dtype=dtype, device=device, seed=2)
    g = gate.clone().requires_grad_(True)
    u = up.clone().requires_grad_(True)
    out = swiglu(g, u)
    d_gate, d_up = torch.autograd.grad(out, (g, u), d_out)
    g64 = gate.double().requires_grad_(True)
    u64 = up.double().requires_grad_(True)
    ref_dg, ref_du = torch.autograd.grad(swiglu_eager(g64, u64), (g64, u64), d_out.double())
    assert d_gate.dtype == dtype and d_up.dtype == dtype
    assert rel(d_gate, ref_dg) < TOL[dtype] and rel(d_up, ref_du) < TOL[dtype]
    assert rel(out, swiglu_reference(gate, up)) < TOL[dtype]


def test_autograd_accepts_expanded_gradient(device):
    g = randn(4, 64, dtype=torch.float32, device=device).requires_grad_(True)
    u = randn(4, 64, dtype=torch.float32, device=device, seed=1).requires_grad_(True)
    swiglu(g, u).sum().backward()  # d_out is an expanded scalar (stride 0)
    _, ref_du = swiglu_backward_reference(torch.ones(4, 64, device=device), g.detach(), u.detach())
    assert rel(u.grad, ref_du) < 1e-5


def test_decode_launch_equals_forward(device):
    gate, up = randn(16, 96, device=device), randn(16, 96, device=device, seed=1)
    torch.testing.assert_close(swiglu_decode(gate, up), swiglu_forward(gate, up), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_seed_stores_float16(dtype, device):
    gate, up = randn(4, 100, dtype=dtype, device=device), randn(4, 100, dtype=dtype, device=device, seed=1)
    out = seed_swiglu(gate, up)
    assert out.dtype == torch.float16  # the source's defect, reproduced
    assert rel(out, swiglu_reference(gate, up)) < 2e-3


@pytest.mark.parametrize("weights", ["halves", "linear"])
def test_gemm_fused_matches_reference(weights, device):
    x = randn(2, 19, 80, device=device)  # leading shape [2, 19] tokens, K = 80
    w = randn(80, 2 * 50, device=device, seed=1) / 9
    if weights == "halves":
        w_gate, w_up = w.chunk(2, dim=-1)
    else:  # nn.Linear layout [N, K], passed transposed
        w_gate, w_up = w[:, :50].t().contiguous().t(), w[:, 50:].t().contiguous().t()
    ref = swiglu_reference(*(x.float() @ w.float()).chunk(2, dim=-1))
    out = swiglu_gemm(x, pack_gate_up(w_gate, w_up))  # N = 50: part of one packed block, rows padded to 16 bytes
    assert out.shape == (2, 19, 50) and out.dtype == torch.bfloat16
    assert rel(out, ref) < 1e-2
    assert rel(swiglu_matmul(x, w), ref) < 1e-2


def test_pack_gate_up_layout(device):
    w_gate, w_up = randn(3, 200, device=device), randn(3, 200, device=device, seed=1)
    packed = pack_gate_up(w_gate, w_up)
    assert packed.hidden == 200 and packed.weight.shape == (3, 512) and packed.weight.is_contiguous()
    blocks = packed.weight.view(3, 2, 2, 128)  # [K, block, gate|up, column]
    torch.testing.assert_close(blocks[:, :, 0].reshape(3, 256)[:, :200], w_gate, rtol=0, atol=0)
    torch.testing.assert_close(blocks[:, :, 1].reshape(3, 256)[:, :200], w_up, rtol=0, atol=0)
    assert not blocks[:, 1, :, 72:].any()  # padding past N is zero


def test_gemm_fused_many_tiles(device):
    # more row tiles than persistent programs under the interpreter, a K tail, two column blocks
    x = randn(100, 72, device=device)
    w = randn(72, 2 * 256, device=device, seed=1) / 8
    ref = swiglu_reference(*(x.float() @ w.float()).chunk(2, dim=-1))
    assert rel(swiglu_gemm(x, pack_gate_up(*w.chunk(2, dim=-1))), ref) < 1e-2


DEV = "cuda:0" if torch.cuda.is_available() else "cpu"  # where the error-message operands live


def _t(*shape, dtype=torch.float32, device=DEV):
    return torch.zeros(*shape, dtype=dtype, device=device)


def _gate_up(k, n=6):
    return GateUpWeight(_t(k, 2 * 128, dtype=torch.bfloat16), n)


@pytest.mark.parametrize("call, exc, message", [
    (lambda: swiglu_forward([1.0], _t(3)), TypeError, "gate must be a torch.Tensor, got list"),
    (lambda: swiglu_forward(_t(3, dtype=torch.int32), _t(3)), TypeError,
     "gate has dtype torch.int32; supported: bfloat16, float16, float32"),
    (lambda: swiglu_forward(_t(3, dtype=torch.float64), _t(3, dtype=torch.float64)), TypeError,
     "gate has dtype torch.float64; supported"),
    (lambda: swiglu_forward(_t(3), _t(3, dtype=torch.bfloat16)), TypeError,
     "up has dtype torch.bfloat16 but gate has dtype torch.float32"),
    (lambda: swiglu_forward(_t(3, 4), _t(3, 5)), ValueError, "up has shape (3, 5) but gate has shape (3, 4)"),
    (lambda: swiglu_forward(_t(3), _t(3, device="meta")), ValueError, f"up is on device meta but gate is on {DEV}"),
    (lambda: swiglu_forward(_t(()), _t(())), ValueError, "gate is 0-d; expected shape [..., hidden]"),
    (lambda: swiglu_forward(_t(4, 6).t(), _t(6, 4)), ValueError,
     "gate has strides (1, 6): the last dimension must have stride 1"),
    (lambda: swiglu_forward(_t(4, 6, 8)[:, :3], _t(4, 3, 8)), ValueError,
     "gate with shape (4, 3, 8) and strides (48, 8, 1) cannot be seen as rows of 8 elements without a copy"),
    (lambda: swiglu_backward(_t(3, 4), _t(3, 4), _t(3, 5)), ValueError, "up has shape (3, 5) but d_out has shape"),
    (lambda: seed_swiglu(_t(4, 6).t(), _t(4, 6).t()), ValueError, "seed_swiglu needs contiguous gate and up"),
    (lambda: pack_gate_up(_t(8, 6), _t(8, 6)), TypeError, "w_gate has dtype torch.float32; supported: bfloat16, float16"),
    (lambda: pack_gate_up(_t(8, 6, dtype=torch.bfloat16), _t(8, 6, dtype=torch.float16)), TypeError,
     "w_up has dtype torch.float16 but w_gate has dtype torch.bfloat16"),
    (lambda: pack_gate_up(_t(8, 6, dtype=torch.bfloat16), _t(8, 5, dtype=torch.bfloat16)), ValueError,
     "w_up has shape (8, 5) but w_gate has shape (8, 6)"),
    (lambda: pack_gate_up(_t(2, 8, 6, dtype=torch.bfloat16), _t(2, 8, 6, dtype=torch.bfloat16)), ValueError,
     "w_gate has shape (2, 8, 6); expected [K, N]"),
    (lambda: pack_gate_up(_t(8, 6, dtype=torch.bfloat16), _t(8, 6, dtype=torch.bfloat16, device="meta")),
     ValueError, f"w_up is on device meta but w_gate is on {DEV}"),
    (lambda: swiglu_gemm(_t(4, 8, dtype=torch.bfloat16), _t(8, 12, dtype=torch.bfloat16)), TypeError,
     "w must be a GateUpWeight from pack_gate_up, got Tensor"),
    (lambda: swiglu_gemm(_t(4, 8), _gate_up(8)), TypeError,
     "x has dtype torch.float32 but the weight has dtype torch.bfloat16"),
    (lambda: swiglu_gemm(_t(4, 16, dtype=torch.bfloat16), _gate_up(8)), ValueError,
     "x has K = 16 but the weight has K = 8"),
    (lambda: swiglu_gemm(_t(8, dtype=torch.bfloat16), _gate_up(8)), ValueError,
     "x has shape (8,); expected [..., tokens, K]"),
    (lambda: swiglu_gemm(_t(4, 8, dtype=torch.bfloat16, device="meta"), _gate_up(8)), ValueError,
     f"x is on device meta but the weight is on {DEV}"),
    (lambda: swiglu_gemm(_t(4, 6, dtype=torch.bfloat16), _gate_up(6)), ValueError,
     "x rows are 12 bytes apart from address"),
])
def test_error_messages(call, exc, message):
    with pytest.raises(exc) as info:
        call()
    assert message in str(info.value)


def test_cpu_tensor_outside_interpreter_is_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="the Triton kernels need a CUDA tensor"):
        check_operands(gate=_t(3, device="cpu"), up=_t(3, device="cpu"))


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.gpu_memory(gib=25)  # operands of 2**31 bfloat16 elements (4 GiB each): 24.5 GiB at the peak
@pytest.mark.parametrize("layout", ["flat", "strided_halves"])
def test_more_than_2_31_elements(layout):
    hidden = 16384
    rows = 2**31 // hidden + 3  # 2**31 + 49152 elements per operand
    if layout == "flat":
        gate = randn(rows, hidden, device="cuda")
        up = randn(rows, hidden, device="cuda", seed=1)
    else:
        gate, up = randn(rows, 2 * hidden, device="cuda").chunk(2, dim=-1)
    assert gate.numel() > 2**31
    out = swiglu_forward(gate, up)
    for sl in (slice(0, 2), slice(-4, None)):  # first rows and rows past 2**31
        ref = swiglu_eager(gate[sl].float(), up[sl].float())
        torch.testing.assert_close(out[sl].float(), ref, rtol=1e-2, atol=1e-2)
    d_gate, d_up = swiglu_backward(torch.ones_like(out), gate, up)
    ref_dg, ref_du = swiglu_backward_reference(torch.ones_like(out[-4:]), gate[-4:], up[-4:])
    torch.testing.assert_close(d_gate[-4:].float(), ref_dg, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(d_up[-4:].float(), ref_du, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [pytest.param((8192, 14336), marks=pytest.mark.gpu_memory(gib=9)),  # 7.7-8.4 GiB
                                   (16, 14336), (3, 1000, 431)], ids=str)
def test_autotuned_path_on_gpu(dtype, shape):
    from kernels.swiglu import elementwise as ew

    assert ew._FWD_TUNED is not None, "autotuner not active on the GPU"
    gate, up = randn(*shape, dtype=dtype, device="cuda"), randn(*shape, dtype=dtype, device="cuda", seed=1)
    d_out = randn(*shape, dtype=dtype, device="cuda", seed=2)
    out = swiglu_forward(gate, up)
    assert out.dtype == dtype and rel(out, swiglu_reference(gate, up)) < TOL[dtype]
    d_gate, d_up = swiglu_backward(d_out, gate, up)
    ref_dg, ref_du = swiglu_backward_reference(d_out, gate, up)
    assert rel(d_gate, ref_dg) < TOL[dtype] and rel(d_up, ref_du) < TOL[dtype]
    halves = randn(shape[0], 2 * shape[-1], dtype=dtype, device="cuda").chunk(2, dim=-1)
    assert rel(swiglu_forward(*halves), swiglu_reference(*halves)) < TOL[dtype]


@pytest.mark.gpu
def test_decode_in_cuda_graph():
    gate, up = randn(16, 14336, device="cuda"), randn(16, 14336, device="cuda", seed=1)
    expected = swiglu_decode(gate, up)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = swiglu_decode(gate, up)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("tokens, k, n", [(1024, 4096, 14336), (300, 512, 1000)])
def test_gemm_fused_autotuned_on_gpu(tokens, k, n):
    x = randn(tokens, k, device="cuda")
    w = randn(k, 2 * n, device="cuda", seed=1) * k ** -0.5
    ref = swiglu_reference(*(x.float() @ w.float()).chunk(2, dim=-1))
    assert rel(swiglu_gemm(x, pack_gate_up(*w.chunk(2, dim=-1))), ref) < 1e-2
    assert rel(swiglu_matmul(x, w), ref) < 1e-2


def test_autotune_candidates_keep_half_the_sms_busy():
    """The autotuner times only blocks that launch at least half as many programs as the GPU
    has SMs (132 on an H200), or the smallest block when none does."""
    import triton

    from kernels.swiglu.elementwise import FWD_CONFIGS, busy_configs

    configs = [triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b, w in FWD_CONFIGS]
    blocks = lambda n: sorted({c.kwargs["BLOCK_SIZE"] for c in busy_configs(configs, n.bit_length(), 132)})  # noqa: E731
    assert blocks(229376) == [1024]                       # >= 2**17 elements: 128 programs of 1024, 64 of 2048
    assert blocks(1048576) == [1024, 2048, 4096, 8192]    # >= 2**20: 128 programs of 8192, 64 of 16384
    assert blocks(8192 * 14336) == [1024, 2048, 4096, 8192, 16384]
    assert blocks(14336) == [1024]                        # 14 programs at most: the smallest block
