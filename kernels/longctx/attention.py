"""Causal softmax attention for prefill and decode, by the FlexAttention study's implementations.

:func:`causal_attention` takes ``q`` [B, H, N_q, D] and ``k``, ``v`` [B, H_kv, N_k, D] (one
dtype, one device; H a multiple of H_kv: grouped-query attention) with the N_q queries at the
last N_q positions of the N_k keys, and returns ``o`` [B, H, N_q, D]:
``softmax(q kᵀ / sqrt(D) + causal mask) v``. Two cases are supported, the two phases of
inference: prefill (N_q = N_k, the usual causal mask) and decode (N_q = 1: the new token attends
to every key of the cache, so no mask is applied).

Implementations (names of :mod:`kernels.flex.impls`): ``sdpa_cudnn`` and ``sdpa_flash``,
PyTorch's SDPA forced to cuDNN's or FlashAttention-2's kernel (``is_causal=True`` in prefill,
no mask in decode); ``flex`` and ``flex_flash``, compiled FlexAttention with its Triton backend
or its FLASH backend (FlashAttention-4's CuTe kernels), with the causal block mask in prefill
(built once per length and device and kept) and none in decode. A backend that cannot run a
case raises (SDPA: RuntimeError "No available kernel"), which the study records as
``unsupported``.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

#: SDPA's backend of each SDPA implementation.
SDPA_BACKENDS = {"sdpa_cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa_flash": SDPBackend.FLASH_ATTENTION}
#: The FlexAttention implementations (their compile mode and backend: kernels.flex.ops MODES, BACKENDS).
FLEX = ("flex", "flex_flash")
IMPLS = (*SDPA_BACKENDS, *FLEX)


def check_phase(q: torch.Tensor, k: torch.Tensor) -> bool:
    """True for prefill (N_q = N_k), False for decode (N_q = 1 < N_k).

    Raises:
        ValueError: any other pair of lengths (a chunk of queries inside the sequence).
    """
    nq, nk = q.shape[2], k.shape[2]
    if nq == nk:
        return True
    if nq == 1:
        return False
    raise ValueError(f"N_q={nq} queries against N_k={nk} keys: only prefill (N_q = N_k) and decode "
                     "(N_q = 1) are supported")


@functools.cache
def _causal_block_mask(seqlen: int, device: str):
    from kernels.flex import masks, ops

    return ops.build_block_mask(masks.causal, seqlen, device)


def causal_attention(impl: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of ``q``'s queries, the last of ``k``'s positions (module docstring).

    Args:
        impl: one of :data:`IMPLS`.
        q: [B, H, N_q, D]; k, v: [B, H_kv, N_k, D]; N_q = N_k (prefill) or 1 (decode).
    Returns:
        o [B, H, N_q, D] in q's dtype.
    Raises:
        ValueError: an unknown impl, lengths of neither phase, or shapes FlexAttention's checks
            refuse (:func:`kernels.flex.ops.check_inputs`).
        RuntimeError: the SDPA backend cannot run the case.
    """
    from kernels.flex import ops

    ops.check_inputs(q, k, v)
    prefill = check_phase(q, k)
    gqa = q.shape[1] != k.shape[1]
    if impl in SDPA_BACKENDS:
        with sdpa_kernel(SDPA_BACKENDS[impl]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=prefill, enable_gqa=gqa)
    if impl in FLEX:
        mask = _causal_block_mask(q.shape[2], str(q.device)) if prefill else None
        return ops.attention(q, k, v, mask, mode=ops.MODES[impl], backend=ops.BACKENDS[impl])
    raise ValueError(f"unknown attention impl {impl!r}; expected one of {IMPLS}")
