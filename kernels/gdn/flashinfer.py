"""FlashInfer's Gated DeltaNet prefill (``flashinfer.chunk_gated_delta_rule``) behind FLA's
arguments: the GDN study's anchor ``flashinfer`` (forward only; FlashInfer has no backward).

FlashInfer's call differs from FLA's in four ways, all bridged here:

- tokens packed: q, k ``[B*T, H, K]``, v ``[B*T, HV, V]`` (a reshape, no copy for contiguous inputs);
- ``cu_seqlens`` always: for B fixed-length sequences the offsets ``0, T, ..., B*T`` (int32, built
  once per (B, T, device)); ``max_seqlen``, the host-side bound that its context-parallel kernels
  size their grids by, is T, or for packed sequences their longest length, from the boundaries
  that :func:`kernels.gdn.validate.checked_offsets` checks and reads from the device once per
  ``cu_seqlens`` tensor and version (as our op does);
- the decay as a factor, ``alpha = exp(g)`` (float32 ``[B*T, HV]``): one elementwise kernel of
  each call, and part of the time measured;
- states ``[N, HV, V, K]``, the transpose of FLA's ``[N, HV, K, V]``: the initial state is passed
  transposed (a copy), the final state returned as a transposed view.

The version is pinned here (:data:`REQUIREMENT`) rather than in the ``anchors`` extra of
``pyproject.toml``, which is part of every study's fingerprint: this module is part of the GDN and
long-context studies' fingerprints only (:mod:`kernels.core.fingerprint`), so a new FlashInfer
makes those two studies stale and no other. :func:`kernels.gdn.study.load_op` records a row of
another installed version as ``unsupported``. Install it on a GPU host with
``pip install "$(python -m kernels.gdn.flashinfer)"``.

Method: FlashInfer (Ye et al., "FlashInfer: Efficient and Customizable Attention Engine for LLM
Inference Serving", MLSys 2025), its ``gdn_prefill`` module: CuTe DSL kernels for SM90, with a
context-parallel variant that it picks itself for long sequences (``use_cp="auto"``).
"""

from __future__ import annotations

import functools

from kernels.gdn.validate import checked_offsets

#: The FlashInfer release that this study's rows come from (a pip requirement string).
REQUIREMENT = "flashinfer-python==0.7.2.post1"
#: The module that the anchor's rows name (``anchor_module``, ``anchor_version``).
MODULE = "flashinfer"


@functools.lru_cache(maxsize=16)
def _fixed_offsets(batch: int, seqlen: int, device):
    """``cu_seqlens`` of ``batch`` sequences of ``seqlen`` tokens: int32 ``[batch + 1]`` on ``device``."""
    import torch

    return torch.arange(0, (batch + 1) * seqlen, seqlen, dtype=torch.int32, device=device)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None):
    """``flashinfer.chunk_gated_delta_rule`` with flash-linear-attention's arguments and results.

    Args:
        q, k: ``[B, T, H, K]`` bfloat16/float16 CUDA tensors, L2-normalised; K = 128 on SM90.
        v: ``[B, T, HV, V]``, q's dtype, HV a multiple of H (grouped value attention).
        g: ``[B, T, HV]`` log decay per token (<= 0), any float dtype.
        beta: ``[B, T, HV]`` in (0, 1), any float dtype.
        scale: output scale (FlashInfer's default ``K ** -0.5``).
        initial_state: optional ``[N, HV, K, V]`` float32 state.
        output_final_state: also return the ``[N, HV, K, V]`` final state.
        cu_seqlens: optional ``[N + 1]`` int32/int64 offsets of packed sequences (B == 1).
    Returns:
        ``(o [B, T, HV, V] in v's dtype, final_state [N, HV, K, V] float32 or None)``; the final
        state is a transposed view of FlashInfer's ``[N, HV, V, K]`` tensor.
    Raises:
        ValueError: ``cu_seqlens`` does not start at 0, decreases or does not end at T.
        ModuleNotFoundError: FlashInfer is not installed; FlashInfer's own errors for inputs it
        does not take (a device before SM90, another head size).
    """
    import flashinfer

    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if cu_seqlens is None:
        cu, longest = _fixed_offsets(B, T, q.device), T
    else:
        cs = checked_offsets(cu_seqlens, T)
        cu, longest = cu_seqlens, max((b - a for a, b in zip(cs, cs[1:])), default=0)
    h0 = None if initial_state is None else initial_state.transpose(-1, -2).contiguous()
    out = flashinfer.chunk_gated_delta_rule(
        q.reshape(B * T, H, K), k.reshape(B * T, H, K), v.reshape(B * T, HV, V),
        g=g.reshape(B * T, HV).float().exp(), beta=beta.reshape(B * T, HV).float(), scale=scale,
        initial_state=h0, output_final_state=output_final_state, cu_seqlens=cu, max_seqlen=longest)
    o, ht = out if output_final_state else (out, None)
    return o.reshape(B, T, HV, V), None if ht is None else ht.transpose(-1, -2)


if __name__ == "__main__":
    print(REQUIREMENT)
