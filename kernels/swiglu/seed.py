"""The source material's SwiGLU Triton kernel, reproduced as published: the baseline.

What it is (the source material's kernel): a flat kernel over
contiguous ``gate``/``up`` with ``@triton.autotune`` over ``BLOCK_SIZE`` and
``num_warps`` (1024/4, 2048/8, 4096/8) keyed on the element count, loading
both inputs once, computing ``g * sigmoid(g) * u`` in fp32 and storing once.

Its defect, kept on purpose: the store is ``.to(tl.float16)`` whatever the
input dtype, so the result is a float16 tensor. A bfloat16 input gives a
float16 output (values above 65504 become inf; the dtype a caller expects is
lost) and a float32 input loses precision to fp16's 11-bit mantissa. It also
uses int32 offsets (wrong beyond 2**31 elements) and needs contiguous
inputs. The study compares its output, upcast, with the reference and
records the output dtype; our :mod:`kernels.swiglu.elementwise` fixes all
three defects.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.core.launch import interpreting
from kernels.swiglu.elementwise import check_operands

#: The source's autotuning candidates (BLOCK_SIZE, num_warps).
SEED_CONFIGS = ((1024, 4), (2048, 8), (4096, 8))


@triton.jit
def _seed_swiglu_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    g = tl.load(gate_ptr + offsets, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + offsets, mask=mask).to(tl.float32)
    y = g * tl.sigmoid(g) * u
    tl.store(out_ptr + offsets, y.to(tl.float16), mask=mask)


_SEED_TUNED = None if interpreting() else triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b, w in SEED_CONFIGS],
    key=["n_elements"])(_seed_swiglu_kernel)


def seed_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """The source kernel: ``SiLU(gate) * up`` stored as float16 (its defect).

    Args:
        gate, up: contiguous tensors of the same shape ``[..., hidden]``,
            dtype (bfloat16, float16, float32) and CUDA device (CPU under
            ``TRITON_INTERPRET=1``), at most 2**31 - 1 elements.
    Returns:
        ``[..., hidden]`` **float16** whatever the input dtype.
    Raises:
        TypeError / ValueError: as :func:`kernels.swiglu.elementwise.check_operands`;
            ValueError for non-contiguous inputs or 2**31 elements or more
            (the source's int32 offsets would be wrong; we refuse instead).
    """
    check_operands(gate=gate, up=up)
    if not (gate.is_contiguous() and up.is_contiguous()):
        raise ValueError("seed_swiglu needs contiguous gate and up (the source kernel is flat)")
    n = gate.numel()
    if n >= 2**31:
        raise ValueError(f"seed_swiglu uses int32 offsets: {n} elements is 2**31 or more")
    out = torch.empty(gate.shape, dtype=torch.float16, device=gate.device)
    if n == 0:
        return out
    if _SEED_TUNED is not None:
        _SEED_TUNED[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](gate, up, out, n)
    else:
        block, warps = SEED_CONFIGS[0]
        _seed_swiglu_kernel[(triton.cdiv(n, block),)](gate, up, out, n, BLOCK_SIZE=block, num_warps=warps)
    return out
