"""SwiGLU in the epilogue of the gate/up projection: ``SiLU(x W_gate) * (x W_up)``.

Method: a persistent Triton matmul (one program per SM walking the output
tiles in grouped order for L2 reuse, operands moved by TMA tensor
descriptors; Triton's persistent matmul tutorial) whose epilogue applies the
activation before the only store. The weight is packed once (at load time,
like any inference weight layout) so that each block of ``PACK_BLOCK_N``
gate columns is followed by the same ``PACK_BLOCK_N`` up columns: one
``[BLOCK_K, 2 * PACK_BLOCK_N]`` tile load and one ``tl.dot`` of width 256
(Hopper's widest MMA) produce a gate and an up tile, split in registers in
the epilogue. Against cuBLAS ``x @ [W_gate | W_up]`` followed by an
elementwise kernel it saves writing and re-reading the ``[tokens, 2*hidden]``
projection (the fused GEMM-activation idea of CUTLASS epilogues).

On the H200 (an A/B run at 8192 x 4096 -> 14336, bf16) two separate dots of
width 128 per tile were 4 % slower than the packed single dot, and letting
Triton pipeline across tiles (``tl.range(..., flatten=True)``) helped the
packed kernel but slowed the two-dot one by a quarter.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.core.launch import interpreting, sm_count
from kernels.swiglu.elementwise import as_rows, check_operands, swiglu_forward

#: Gate (and up) columns per block of the packed weight; the kernel's BLOCK_N.
PACK_BLOCK_N = 128
#: (BLOCK_M, BLOCK_K, num_stages, num_warps, GROUP_M) candidates on a GPU (the
#: first was the best at both Llama shapes on the H200).
GEMM_CONFIGS = (
    (128, 64, 3, 8, 8),
    (128, 64, 4, 8, 16),
    (64, 64, 4, 4, 8),
)
#: (BLOCK_M, BLOCK_K) and the number of persistent programs under the interpreter.
INTERPRET_TILE = (32, 32)
INTERPRET_PROGRAMS = 3
GEMM_DTYPES = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class GateUpWeight:
    """A packed ``[W_gate | W_up]`` (from :func:`pack_gate_up`).

    Attributes:
        weight: ``[K, 2 * N_pad]``, ``N_pad`` = ``hidden`` rounded up to
            ``PACK_BLOCK_N``; block ``j`` of ``2 * PACK_BLOCK_N`` columns holds
            gate columns ``j*PACK_BLOCK_N ...`` then the same up columns; padding is zero.
        hidden: ``N``, the FFN hidden size (columns of the output).
    """

    weight: torch.Tensor
    hidden: int


def pack_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor) -> GateUpWeight:
    """Pack two ``[K, N]`` weights for :func:`swiglu_gemm` (a copy, done once).

    Args:
        w_gate, w_up: ``[K, N]`` each, bfloat16 or float16, same dtype and
            device, any strides (halves of ``[K, 2N]``, or
            ``nn.Linear.weight.t()``).
    Returns:
        :class:`GateUpWeight` with a contiguous ``[K, 2 * N_pad]`` weight.
    Raises:
        TypeError: non-tensor, dtype other than bfloat16/float16, or mixed dtypes.
        ValueError: shapes other than two equal ``[K, N]``, mixed devices, or
            a non-CUDA device outside the interpreter.
    """
    check_operands(w_gate=w_gate, w_up=w_up)
    if w_gate.dtype not in GEMM_DTYPES:
        raise TypeError(f"w_gate has dtype {w_gate.dtype}; supported: bfloat16, float16")
    if w_gate.dim() != 2:
        raise ValueError(f"w_gate has shape {tuple(w_gate.shape)}; expected [K, N]")
    k, n = w_gate.shape
    blocks = triton.cdiv(n, PACK_BLOCK_N)
    pad = blocks * PACK_BLOCK_N - n
    halves = [torch.nn.functional.pad(t, (0, pad)).view(k, blocks, 1, PACK_BLOCK_N) for t in (w_gate, w_up)]
    return GateUpWeight(torch.cat(halves, dim=2).view(k, 2 * blocks * PACK_BLOCK_N), n)


@triton.jit
def _tile_of(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row, column) of tile number ``tile`` in grouped order: GROUP_M row tiles share
    each weight column tile while it is in L2 (Triton's matmul tutorial)."""
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group_size = GROUP_M * num_pid_n
    first_m = (tile // group_size) * GROUP_M
    group_m = min(tl.cdiv(M, BLOCK_M) - first_m, GROUP_M)
    return first_m + (tile % group_size) % group_m, (tile % group_size) // group_m


@triton.jit
def _swiglu_gemm_kernel(x_ptr, w_ptr, out_ptr, M, N, N_PAD, K, stride_xm, stride_wk, stride_om, NUM_PROGRAMS,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr, UPCAST: tl.constexpr):
    # UPCAST (interpreter only): Triton 3.9's interpreter returns garbage for a
    # bf16 tl.dot, so there the tiles are multiplied in fp32 instead.
    # Out-of-range rows and K columns load as zero; out-of-range output is not stored.
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[stride_xm, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[K, 2 * N_PAD], strides=[stride_wk, 1],
                                       block_shape=[BLOCK_K, 2 * BLOCK_N])
    o_desc = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[stride_om, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = _tile_of(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = x_desc.load([off_m, k * BLOCK_K])
            b = w_desc.load([k * BLOCK_K, pid_n * 2 * BLOCK_N])
            if UPCAST:
                a, b = a.to(tl.float32), b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        gate, up = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N)), (0, 2, 1)))
        o_desc.store([off_m, pid_n * BLOCK_N], (gate * tl.sigmoid(gate) * up).to(out_ptr.dtype.element_ty))


_GEMM_TUNED = None if interpreting() else triton.autotune(
    configs=[triton.Config({"BLOCK_M": bm, "BLOCK_K": bk, "GROUP_M": gm}, num_stages=s, num_warps=w)
             for bm, bk, s, w, gm in GEMM_CONFIGS],
    key=["M", "N", "K"])(_swiglu_gemm_kernel)


def _check_gemm(x, w):
    if not isinstance(w, GateUpWeight):
        raise TypeError(f"w must be a GateUpWeight from pack_gate_up, got {type(w).__name__}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != w.weight.dtype:
        raise TypeError(f"x has dtype {x.dtype} but the weight has dtype {w.weight.dtype}")
    if x.device != w.weight.device:
        raise ValueError(f"x is on device {x.device} but the weight is on {w.weight.device}")
    if x.dim() < 2:
        raise ValueError(f"x has shape {tuple(x.shape)}; expected [..., tokens, K]")
    if x.shape[-1] != w.weight.shape[0]:
        raise ValueError(f"x has K = {x.shape[-1]} but the weight has K = {w.weight.shape[0]}")
    if x.device.type != "cuda" and not interpreting():
        raise ValueError(f"x is on device {x.device}; the Triton kernel needs a CUDA tensor "
                         "(or TRITON_INTERPRET=1 for CPU tensors)")


def swiglu_gemm(x: torch.Tensor, w: GateUpWeight) -> torch.Tensor:
    """Fused ``SiLU(x @ w_gate) * (x @ w_up)`` in one persistent Triton matmul.

    Args:
        x: ``[..., K]`` (e.g. ``[tokens, model_dim]``), bfloat16 or float16,
            last dimension unit-stride; its rows must start 16 bytes apart
            (TMA), i.e. ``K`` a multiple of 8 for contiguous rows.
        w: the packed weights, :func:`pack_gate_up` of two ``[K, N]``
            matrices, same dtype and device as ``x``.
    Returns:
        ``[..., N]`` in ``x``'s dtype, fp32 accumulation. Where ``N`` is not
        a multiple of 8, a view of rows padded to 16 bytes (TMA stores).
    Raises:
        TypeError: ``w`` not a :class:`GateUpWeight`, or ``x`` not a tensor
            of the weight's dtype.
        ValueError: shapes that do not chain, mixed devices, a non-CUDA
            device outside the interpreter, an ``x`` whose rows cannot be
            viewed without a copy, or rows / base not 16-byte aligned.
    """
    _check_gemm(x, w)
    x2 = as_rows("x", x)
    M, K = x2.shape
    N = w.hidden
    size = x2.element_size()
    if (x2.stride(0) * size) % 16 or x2.data_ptr() % 16:
        raise ValueError(f"x rows are {x2.stride(0) * size} bytes apart from address {x2.data_ptr()}: "
                         "TMA needs both a multiple of 16 (K a multiple of 8 for contiguous rows)")
    row = triton.cdiv(N, 8) * 8
    out = torch.empty((M, row), dtype=x.dtype, device=x.device)[:, :N]
    if M and N:
        triton.set_allocator(lambda nbytes, alignment, stream: torch.empty(nbytes, dtype=torch.int8, device=x.device))
        programs = INTERPRET_PROGRAMS if interpreting() else sm_count(x.device)
        args = (x2, w.weight, out, M, N, w.weight.shape[1] // 2, K, x2.stride(0), w.weight.stride(0),
                out.stride(0), programs)
        if _GEMM_TUNED is not None:
            grid = lambda meta: (min(programs, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, PACK_BLOCK_N)),)  # noqa: E731
            _GEMM_TUNED[grid](*args, BLOCK_N=PACK_BLOCK_N, UPCAST=False)
        else:
            bm, bk = INTERPRET_TILE
            _swiglu_gemm_kernel[(min(programs, triton.cdiv(M, bm) * triton.cdiv(N, PACK_BLOCK_N)),)](
                *args, BLOCK_M=bm, BLOCK_N=PACK_BLOCK_N, BLOCK_K=bk, GROUP_M=2, UPCAST=True)
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
