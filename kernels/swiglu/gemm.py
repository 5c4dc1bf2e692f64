"""SwiGLU in the epilogue of the gate/up projection: ``SiLU(x W_gate) * (x W_up)``.

Method: a tiled Triton matmul with two fp32 accumulators that share each
loaded ``x`` tile (one ``[BLOCK_M, BLOCK_K]`` load feeds ``tl.dot`` with the
``W_gate`` and the ``W_up`` tile), grouped tile order for L2 reuse
(Triton's matmul tutorial), and the activation applied to the accumulators
before the only store. Against cuBLAS ``x @ [W_gate | W_up]`` followed by an
elementwise kernel it saves writing and re-reading the ``[tokens, 2*hidden]``
projection (the fused GEMM-activation idea of e.g. CUTLASS epilogues and
Liger-Kernel's discussion of FFN fusion).

Weights are given as two ``[K, N]`` matrices with any strides, so the two
halves of one ``[K, 2N]`` matrix (``w.chunk(2, -1)``) or the transposes of
``nn.Linear`` weights (``[N, K]`` -> ``.t()``) are read in place.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import interpreting
from kernels.swiglu.elementwise import as_rows, swiglu_forward

#: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) candidates on a GPU:
#: Hopper-friendly tiles; two 128x128 fp32 accumulators make a 128x256 tile.
GEMM_CONFIGS = (
    (128, 128, 64, 3, 8),
    (128, 128, 64, 4, 8),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (128, 128, 32, 4, 8),
)
#: Fixed tile under the interpreter (BLOCK_M, BLOCK_N, BLOCK_K).
INTERPRET_TILE = (32, 32, 32)
GROUP_M = 8
GEMM_DTYPES = (torch.bfloat16, torch.float16)


@triton.jit
def _swiglu_gemm_kernel(x_ptr, wg_ptr, wu_ptr, out_ptr, M, N, K,
                        stride_xm, stride_xk, stride_gk, stride_gn, stride_uk, stride_un, stride_om,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr, UPCAST: tl.constexpr):
    # UPCAST (interpreter only): Triton 3.9's interpreter returns garbage for a
    # bf16 tl.dot, so there the tiles are multiplied in fp32 instead.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group_size = GROUP_M * num_pid_n
    first_m = (pid // group_size) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size) % group_m
    pid_n = (pid % group_size) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows/columns past M/N wrap around (valid addresses); the store masks them.
    # No contiguity hints: a wrapped last tile is not contiguous, and with N a
    # multiple of 16 (specialised by Triton) the loads are vectorised anyway.
    rm = (offs_m % M).to(tl.int64)
    rn = (offs_n % N).to(tl.int64)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + offs_k[None, :] * stride_xk
    g_ptrs = wg_ptr + offs_k[:, None] * stride_gk + rn[None, :] * stride_gn
    u_ptrs = wu_ptr + offs_k[:, None] * stride_uk + rn[None, :] * stride_un

    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        bg = tl.load(g_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        bu = tl.load(u_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if UPCAST:
            a, bg, bu = a.to(tl.float32), bg.to(tl.float32), bu.to(tl.float32)
        acc_g = tl.dot(a, bg, acc_g)
        acc_u = tl.dot(a, bu, acc_u)
        x_ptrs += BLOCK_K * stride_xk
        g_ptrs += BLOCK_K * stride_gk
        u_ptrs += BLOCK_K * stride_uk

    y = acc_g * tl.sigmoid(acc_g) * acc_u
    out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


_GEMM_TUNED = None if interpreting() else triton.autotune(
    configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M},
                           num_stages=s, num_warps=w) for bm, bn, bk, s, w in GEMM_CONFIGS],
    key=["M", "N", "K"])(_swiglu_gemm_kernel)


def _check_gemm(x, w_gate, w_up):
    for name, t in (("x", x), ("w_gate", w_gate), ("w_up", w_up)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in GEMM_DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; supported: bfloat16, float16")
        if t.dtype != x.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but x has dtype {x.dtype}")
        if t.device != x.device:
            raise ValueError(f"{name} is on device {t.device} but x is on {x.device}")
    if x.dim() < 2:
        raise ValueError(f"x has shape {tuple(x.shape)}; expected [..., tokens, K]")
    if w_gate.dim() != 2 or w_gate.shape != w_up.shape:
        raise ValueError(f"w_gate {tuple(w_gate.shape)} and w_up {tuple(w_up.shape)} must both be [K, N]")
    if w_gate.shape[0] != x.shape[-1]:
        raise ValueError(f"x has K = {x.shape[-1]} but the weights are [K, N] = {tuple(w_gate.shape)}")
    if x.device.type != "cuda" and not interpreting():
        raise ValueError(f"x is on device {x.device}; the Triton kernel needs a CUDA tensor "
                         "(or TRITON_INTERPRET=1 for CPU tensors)")


def swiglu_gemm(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
                config: tuple[int, ...] | None = None) -> torch.Tensor:
    """Fused ``SiLU(x @ w_gate) * (x @ w_up)`` in one Triton matmul kernel.

    Args:
        x: ``[..., K]`` (e.g. ``[tokens, model_dim]``), bfloat16 or float16,
            last dimension unit-stride.
        w_gate, w_up: ``[K, N]`` each (``N`` = FFN hidden size), same dtype
            and device as ``x``, any strides (halves of ``[K, 2N]``, or
            ``nn.Linear.weight.t()``).
        config: ``(BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)`` to skip
            the autotuner; None autotunes on a GPU (fixed tile in the interpreter).
    Returns:
        ``[..., N]`` in ``x``'s dtype, fp32 accumulation.
    Raises:
        TypeError: non-tensor, dtype other than bfloat16/float16, or mixed dtypes.
        ValueError: shapes that do not chain, mixed devices, a non-CUDA
            device outside the interpreter, or an ``x`` whose rows cannot be
            viewed without a copy.
    """
    _check_gemm(x, w_gate, w_up)
    x2 = as_rows("x", x)
    M, K = x2.shape
    N = w_gate.shape[1]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        args = (x2, w_gate, w_up, out, M, N, K, x2.stride(0), x2.stride(1), w_gate.stride(0), w_gate.stride(1),
                w_up.stride(0), w_up.stride(1), out.stride(0))
        if config is None and _GEMM_TUNED is not None:
            grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
            _GEMM_TUNED[grid](*args, UPCAST=False)
        else:
            bm, bn, bk, stages, warps = config or (*INTERPRET_TILE, 1, 4)
            _swiglu_gemm_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](
                *args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M, UPCAST=interpreting(),
                num_stages=stages, num_warps=warps)
    return out.view(*x.shape[:-1], N)


def swiglu_matmul(x: torch.Tensor, w_gate_up: torch.Tensor) -> torch.Tensor:
    """Unfused baseline: cuBLAS ``y = x @ w_gate_up``, then our Triton SwiGLU on ``y.chunk(2, -1)``.

    Args:
        x: ``[..., K]``; w_gate_up: ``[K, 2N]`` (``[W_gate | W_up]``), same dtype.
    Returns:
        ``[..., N]`` in ``x``'s dtype. The halves are read in place (strided rows).
    """
    gate, up = (x @ w_gate_up).chunk(2, dim=-1)
    return swiglu_forward(gate, up)
