"""Float64 attention with FlexAttention's semantics, the reference of every implementation.

For each query row: ``s = scale * q.k`` (scale = D**-0.5 by default), then
``s = score_mod(s, b, h, q_idx, kv_idx)``, then ``s = -inf`` where
``mask_mod(b, h, q_idx, kv_idx)`` is false, then ``softmax(s) @ v``; a fully
masked row gives 0 (FlexAttention's convention). Layout [B, H, N, D] with
grouped-query attention when K/V have fewer heads (query head h reads KV
head ``h // (H / H_kv)``). Computed in float64, query rows in chunks so that
no more than about 2**26 scores exist at once (O(N) memory per chunk).

``batch_offset`` / ``head_offset`` let a caller pass a slice of the batch and
heads (for example batch 0 and one KV-head group, to check a large case
cheaply) while the mods still see the true ``b`` and ``h`` indices.
"""

from __future__ import annotations

import torch


def _check(q, k, v):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"q, k, v must be 4-D [B, H, N, D], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape[:3] != v.shape[:3] or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: "
                         "batch, KV length or head_dim differ")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"query heads {q.shape[1]} are not a multiple of KV heads {k.shape[1]}")


def _chunk_attention(qc, k, v, q0, mask_mod, score_mod, scale, b_idx, h_idx):
    """Attention of the query rows ``q0 .. q0+len(qc)`` (float64 tensors; k, v already GQA-expanded)."""
    s = torch.matmul(qc, k.transpose(-2, -1)) * scale
    q_idx = torch.arange(q0, q0 + qc.shape[2], device=qc.device)[:, None]
    kv_idx = torch.arange(k.shape[2], device=qc.device)[None, :]
    b = b_idx[:, None, None, None]
    h = h_idx[None, :, None, None]
    if score_mod is not None:
        s = score_mod(s, b, h, q_idx, kv_idx)
    if mask_mod is None:
        return torch.softmax(s, dim=-1) @ v
    keep = torch.as_tensor(mask_mod(b, h, q_idx, kv_idx), device=qc.device).expand(s.shape)
    p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    p = torch.where(keep.any(dim=-1, keepdim=True), p, 0.0)
    return p @ v


def _chunk_rows(q, k) -> int:
    return max(1, min(q.shape[2], 2**26 // max(1, q.shape[0] * q.shape[1] * k.shape[2])))


def _indices(q, batch_offset, head_offset):
    b_idx = torch.arange(batch_offset, batch_offset + q.shape[0], device=q.device)
    h_idx = torch.arange(head_offset, head_offset + q.shape[1], device=q.device)
    return b_idx, h_idx


def attention_reference(q, k, v, mask_mod=None, score_mod=None, scale=None, batch_offset=0, head_offset=0):
    """Float64 attention output [B, H, N_q, D] (see the module docstring).

    Args:
        q: [B, H, N_q, D]; k, v: [B, H_kv, N_k, D] (any floating dtype, same device).
        mask_mod, score_mod: FlexAttention mods (None: no mask / identity).
        scale: score scale, default D**-0.5.
    Raises ValueError for mismatched shapes.
    """
    _check(q, k, v)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[1] // k.shape[1]
    q, k, v = (t.detach().to(torch.float64) for t in (q, k, v))
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    b_idx, h_idx = _indices(q, batch_offset, head_offset)
    step = _chunk_rows(q, k)
    return torch.cat([_chunk_attention(q[:, :, i:i + step], k, v, i, mask_mod, score_mod, scale, b_idx, h_idx)
                      for i in range(0, q.shape[2], step)], dim=2)


def attention_reference_grads(q, k, v, dout, mask_mod=None, score_mod=None, scale=None,
                              batch_offset=0, head_offset=0):
    """Float64 output and gradients ``(out, dq, dk, dv)`` for the output gradient ``dout``.

    Shapes as :func:`attention_reference`; ``dout`` is [B, H, N_q, D]. Each
    query chunk is differentiated on its own (autograd, chunk graph freed
    after use) and its K/V gradients accumulated, so memory stays O(chunk·N).
    """
    _check(q, k, v)
    if dout.shape != q.shape[:3] + v.shape[3:]:
        raise ValueError(f"dout {tuple(dout.shape)} does not match the output shape {tuple(q.shape[:3] + v.shape[3:])}")
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[1] // k.shape[1]
    q, k, v = (t.detach().to(torch.float64).requires_grad_(True) for t in (q, k, v))
    dout = dout.detach().to(torch.float64)
    b_idx, h_idx = _indices(q, batch_offset, head_offset)
    step = _chunk_rows(q, k)
    outs = []
    with torch.enable_grad():
        for i in range(0, q.shape[2], step):
            kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            out = _chunk_attention(q[:, :, i:i + step], kr, vr, i, mask_mod, score_mod, scale, b_idx, h_idx)
            out.backward(dout[:, :, i:i + step])
            outs.append(out.detach())
    return torch.cat(outs, dim=2), q.grad, k.grad, v.grad
