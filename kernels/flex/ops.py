"""Compiled FlexAttention and block-mask construction, with input checks.

``flex_attention`` is only fast compiled: ``torch.compile`` turns the
mask_mod and score_mod into one fused FlashAttention-style Triton kernel
(C++ on the CPU). The compiled callables are made once per process and
shared. ``dynamic=False``: every new shape compiles (the CPU backend failed
to lower ``dynamic=True`` with a score_mod), so the recompile limit is raised
and hitting it is made an error: past the limit Dynamo would otherwise fall
back silently to an unfused path that materialises the scores.

``BACKEND="FLASH"`` (:data:`BACKENDS`) lowers the same call to the
FlashAttention-4 CuTe-DSL kernels instead of Inductor's Triton template
(``torch/_inductor/kernel/flex/flex_flash_attention.py``, experimental): it
needs the ``flash-attn-4`` and ``nvidia-cutlass-dsl`` packages and a CUDA
device; on the CPU FlexAttention ignores the option and lowers to its C++ kernel.
Its kernels are JIT-compiled per mask_mod and score_mod (5-8 s each on the H200 host)
and kept on disk (FlashAttention-4's ``FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED``, set
here unless the caller chose; ``flash_attn/cute/cache_utils.py``), as Triton keeps its
kernels, so that a compile-ahead child's compile is read back by the timed job
(:func:`kernels.core.ahead.compile_ahead`).
"""

from __future__ import annotations

import functools
import os

import torch
import torch._dynamo
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

for _name, _value in (("recompile_limit", 512), ("accumulated_recompile_limit", 4096),
                      ("fail_on_recompile_limit_hit", True)):
    if hasattr(torch._dynamo.config, _name):  # names of torch >= 2.6
        setattr(torch._dynamo.config, _name, _value)

os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")  # read when flash_attn.cute is imported

#: torch.compile modes of the study's flex implementations.
MODES = {"flex": None, "flex_autotune": "max-autotune-no-cudagraphs", "flex_flash": None}
#: FlexAttention's ``kernel_options["BACKEND"]`` of each flex implementation (None: its default choice).
BACKENDS = {"flex": None, "flex_autotune": None, "flex_flash": "FLASH"}
#: The modules the FLASH backend imports, and the distributions that provide them.
FLASH_MODULES = {"flash_attn.cute": "flash-attn-4", "cutlass": "nvidia-cutlass-dsl"}


def flash_backend_missing() -> str | None:
    """Why the FLASH backend cannot be loaded here (a module of :data:`FLASH_MODULES` is not
    importable), naming the module and its distribution; None when all are there."""
    import importlib.util

    for module, dist in FLASH_MODULES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # the parent package (flash_attn) is missing
            found = False
        if not found:
            return (f"FlexAttention's FLASH backend needs module {module} (distribution {dist}, "
                    f"pyproject's anchors extra), which is not installed")
    return None


@functools.cache
def compiled_flex(mode: str | None = None):
    """``torch.compile(flex_attention, dynamic=False, mode=mode)``, made once per mode.

    Also turns off AOTAutograd's donated buffers for the process: the study times the
    backward of one forward graph again and again (``retain_graph=True``,
    :mod:`kernels.core.passes`), which a backward compiled with donated buffers refuses. The
    backward is compiled at its first call, and only a first call without ``retain_graph``
    donates, so a process whose first flex backward was of that kind (the mask tests
    before the study's in one pytest run on the H200) failed every later timed backward.
    """
    import torch._functorch.config

    torch._functorch.config.donated_buffer = False
    return torch.compile(flex_attention, dynamic=False, mode=mode)


@functools.cache
def compiled_create_block_mask():
    """``torch.compile(create_block_mask)``, made once (building the tile table on the device).

    Without persistent reductions (Inductor option ``triton.persistent_reductions``):
    with them Inductor lowers the mask's ``argsort`` over the key blocks to a Triton
    sort, whose cold compile took 185 s on the H200 at N = 16384 (128 key blocks;
    5 s at 8192, 16 s at 32768), the cliff of pytorch/pytorch#182060; without, that
    sort runs as the ATen kernel.
    """
    return torch.compile(create_block_mask, dynamic=False, options={"triton.persistent_reductions": False})


def build_block_mask(mask_mod, seqlen: int, device, compiled: bool = True, batch: int | None = None) -> BlockMask:
    """The BlockMask (128x128 tiles) of ``mask_mod`` for a square ``seqlen`` x ``seqlen`` attention.

    The study's masks do not depend on the head, and on the batch index only
    when ``batch`` is given (None: broadcast over the batch). ``compiled`` builds it through the compiled
    ``create_block_mask`` (fast on the GPU, no N² temporary); False calls it
    eagerly (used by CPU tests to save compile time).
    """
    if seqlen < 1:
        raise ValueError(f"seqlen must be >= 1, got {seqlen}")
    build = compiled_create_block_mask() if compiled else create_block_mask
    return build(mask_mod, batch, None, seqlen, seqlen, device=device)


def check_inputs(q, k, v, block_mask: BlockMask | None = None) -> None:
    """Raise a clear error unless q [B, H, N, D], k/v [B, H_kv, N_k, D] and the block mask agree.

    Raises:
        ValueError: not 4-D; batch, head_dim or KV lengths differ; H not a
            multiple of H_kv; block mask built for other lengths.
        TypeError: dtypes or devices differ.
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"q, k, v must be 4-D [B, H, N, D], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.device != k.device or q.device != v.device:
        raise TypeError(f"q, k, v devices differ: {q.device}, {k.device}, {v.device}")
    if k.shape != v.shape:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} shapes differ")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)}: batch or head_dim differ")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"query heads {q.shape[1]} are not a multiple of KV heads {k.shape[1]}")
    if block_mask is not None and tuple(block_mask.seq_lengths) != (q.shape[2], k.shape[2]):
        raise ValueError(f"block_mask was built for lengths {tuple(block_mask.seq_lengths)}, "
                         f"inputs have N_q={q.shape[2]}, N_k={k.shape[2]}")


def attention(q, k, v, block_mask: BlockMask | None = None, score_mod=None, mode: str | None = None,
              backend: str | None = None):
    """Compiled FlexAttention with checked inputs: output [B, H, N_q, D] in q's dtype.

    ``mode`` is the torch.compile mode (None: default kernel options),
    ``backend`` FlexAttention's ``kernel_options["BACKEND"]`` (None: its default
    choice; ``"FLASH"``: the FlashAttention-4 kernels, whose refusals the
    compiler raises as exceptions on the first call).
    Grouped-query attention is enabled when K/V have fewer heads.
    """
    check_inputs(q, k, v, block_mask)
    return compiled_flex(mode)(q, k, v, score_mod=score_mod, block_mask=block_mask,
                               enable_gqa=q.shape[1] != k.shape[1],
                               kernel_options={"BACKEND": backend} if backend else None)
