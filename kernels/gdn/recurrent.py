"""Fused recurrent gated delta rule forward in Triton.

One program per (sequence, value head, value block), all on grid axis 0
(limit 2^31 - 1, so any number of sequences and heads), walks the tokens in order with
its K x BV slice of the state in registers (float32): decay, delta-rule
update, output, exactly the recurrence of :mod:`kernels.gdn.naive`. The
columns of the state are independent, so splitting V across programs is exact.
This is the recurrence done well: one read of q, k, v, g, beta and one write
of o per token, no intermediate in memory (flash-linear-attention's
``fused_recurrent_gated_delta_rule`` follows the same plan).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.core.launch import maybe_autotune, value_block
from kernels.gdn.validate import check_inputs, l2norm

_CONFIGS = [triton.Config({}, num_warps=w, num_stages=1) for w in (1, 2, 4)]


@maybe_autotune(_CONFIGS, key=["K", "V", "BV"])
@triton.jit
def _fused_recurrent_fwd_kernel(q, k, v, g, beta, o, h0, ht, cu_seqlens, scale, T,
                                H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                                BV: tl.constexpr, USE_H0: tl.constexpr, STORE_HT: tl.constexpr,
                                IS_VARLEN: tl.constexpr):
    """One (sequence, value head, value block) per program on grid axis 0 (value block fastest);
    value head i_h reads key head i_h // (HV // H)."""
    i_v = tl.program_id(0) % (V // BV)
    i_nh = tl.program_id(0) // (V // BV)
    i_n = i_nh // HV
    i_h = i_nh % HV
    i_hk = i_h // (HV // H)
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        bos = i_n.to(tl.int64) * T
        eos = bos + T
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    S = tl.zeros([K, BV], dtype=tl.float32)
    if USE_H0:
        S += tl.load(h0 + i_nh.to(tl.int64) * K * V + o_k[:, None] * V + o_v[None, :])
    for t in range(bos, eos):
        b_q = tl.load(q + (t * H + i_hk) * K + o_k).to(tl.float32)
        b_k = tl.load(k + (t * H + i_hk) * K + o_k).to(tl.float32)
        b_v = tl.load(v + (t * HV + i_h) * V + o_v).to(tl.float32)
        b_g = tl.load(g + t * HV + i_h).to(tl.float32)
        b_beta = tl.load(beta + t * HV + i_h).to(tl.float32)
        S = S * tl.exp(b_g)
        b_u = b_beta * (b_v - tl.sum(S * b_k[:, None], 0))
        S += b_k[:, None] * b_u[None, :]
        b_o = tl.sum(S * b_q[:, None], 0) * scale
        tl.store(o + (t * HV + i_h) * V + o_v, b_o.to(o.dtype.element_ty))
    if STORE_HT:
        tl.store(ht + i_nh.to(tl.int64) * K * V + o_k[:, None] * V + o_v[None, :], S)


def fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                                     output_final_state=False, cu_seqlens=None,
                                     use_qk_l2norm_in_kernel=False, check_gate=False):
    """Gated delta rule forward, token by token in one fused Triton kernel.

    Args (flash-linear-attention's names and order):
        q, k: ``[B, T, H, K]`` float16/bfloat16/float32, L2-normalised (or set
            ``use_qk_l2norm_in_kernel``).
        v: ``[B, T, HV, V]``, q's dtype; HV a multiple of H (GVA: value head j
            reads key head ``j // (HV // H)``).
        g: ``[B, T, HV]`` log decay (<= 0); beta: ``[B, T, HV]`` in (0, 1).
        scale: output scale (default ``K ** -0.5``).
        initial_state: optional ``[N, HV, K, V]`` float32.
        output_final_state: return the ``[N, HV, K, V]`` float32 final state.
        cu_seqlens: optional ``[N + 1]`` int32/int64 offsets of packed sequences (B == 1).
        use_qk_l2norm_in_kernel: L2-normalise q and k first.
        check_gate: check g <= 0 before launching (reads g, so the host waits
            for the GPU); off by default, as flash-linear-attention never reads g.
    Returns:
        ``(o, final_state)`` with o ``[B, T, HV, V]`` in v's dtype and the final
        state or None.
    Raises:
        TypeError/ValueError from :func:`kernels.gdn.validate.check_inputs`;
        ValueError for g > 0 when ``check_gate`` (:func:`kernels.gdn.validate.gate_check`).
    """
    B, T, H, HV, K, V, N = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens, check_gate=check_gate)
    scale = K ** -0.5 if scale is None else float(scale)
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    o = torch.empty_like(v)
    ht = torch.empty(N, HV, K, V, dtype=torch.float32, device=q.device) if output_final_state else None
    if N == 0 or T == 0:
        return o, (ht.zero_() if ht is not None else None)
    BV = value_block(V, N * HV, q.device)
    _fused_recurrent_fwd_kernel[(V // BV * N * HV,)](
        q, k, v, g, beta, o,
        initial_state.contiguous() if initial_state is not None else o, ht if ht is not None else o,
        cu_seqlens if cu_seqlens is not None else o, scale, T,
        H=H, HV=HV, K=K, V=V, BV=BV, USE_H0=initial_state is not None, STORE_HT=ht is not None,
        IS_VARLEN=cu_seqlens is not None)
    return o, ht
