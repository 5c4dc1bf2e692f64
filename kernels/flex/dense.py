"""The dense causal baselines of the FlexAttention study: PyTorch's SDPA forced to one backend.

Each op takes ``q`` [B, H, N, D] and ``k``, ``v`` [B, H_kv, N, D] of one dtype on one device (H a
multiple of H_kv: grouped-query attention where they differ) and returns ``o`` [B, H, N, D], the
causal attention ``softmax(q kᵀ / sqrt(D) + causal mask) v``
(``torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)`` under
``torch.nn.attention.sdpa_kernel``). Where the backend cannot run the case SDPA raises
RuntimeError ("No available kernel"), which the study records as ``unsupported``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def _causal(backend: SDPBackend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])


def sdpa_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention by SDPA's FlashAttention-2 backend (Dao 2023; CUDA only)."""
    return _causal(SDPBackend.FLASH_ATTENTION, q, k, v)


def sdpa_cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention by SDPA's cuDNN backend (cuDNN's fused attention; CUDA only)."""
    return _causal(SDPBackend.CUDNN_ATTENTION, q, k, v)


def sdpa_efficient(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention by SDPA's memory-efficient backend (xFormers' kernel, Rabe and Staats 2021)."""
    return _causal(SDPBackend.EFFICIENT_ATTENTION, q, k, v)
