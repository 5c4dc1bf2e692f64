"""Chunked gated delta rule forward in Triton (chunk C = 64).

Two kernels (flash-linear-attention's chunked algorithm, fused as
``../shared/BRIEF.md`` section 8 suggests):

1. ``_chunk_intra_kernel``, one program per (chunk, head), everything that
   does not depend on the state: gamma = in-chunk cumulative sum of g;
   A = strict_lower(diag(beta) K K^T * Gamma) in 16 x 16 blocks; the unit
   lower-triangular inverse T = (I + A)^-1 (forward substitution on the four
   diagonal 16 x 16 blocks, then block products for the rest);
   W = T diag(beta e^gamma) K, U = T diag(beta) V; and the masked scores
   Aqk = scale (Q K^T * Gamma, lower triangle incl. diagonal). It writes
   gamma, W, U, Aqk in float32 in the token layout.
2. ``_chunk_state_kernel``, one program per (sequence, head, value block),
   walks the chunks in order with the K x BV state in registers (float32) and
   fuses the output: V_new = U - W S; O = scale diag(e^gamma) Q S + Aqk V_new;
   S <- e^{gamma_C} S + K^T diag(e^{gamma_C - gamma}) V_new. The value axis is
   split across programs (BV = 64/32/16) so that small B*H still fills the SMs.

Precision: products with the 16-bit inputs (K K^T, Q K^T) round nothing
extra; every product involving the inverse, W, U, the state or V_new takes
float32 operands (TF32 tensor cores on the GPU). Rounding those to bfloat16,
as flash-linear-attention does, chains five roundings and measured 0.005 to
0.012 RMSE/RMS against the float64 reference in the interpreter, over the
0.005 target; with float32 operands the error is the output's own rounding.

Every decay is exp of a difference gamma_r - gamma_s <= 0, never a ratio of
exponentials, so strong gates stay finite. :func:`chunk_gated_delta_rule_fwd`
also returns the per-chunk intermediates (:class:`ChunkIntermediates`) that a
backward pass recomputes or reads.
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

from kernels.gdn._launch import value_block
from kernels.launch import interpreting, maybe_autotune
from kernels.gdn.validate import check_inputs, l2norm

CHUNK_SIZE = 64
_INTRA_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (1, 2)]
_STATE_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (1, 2, 3)]


@triton.jit
def _mm(a, b, DT: tl.constexpr, UPCAST: tl.constexpr):
    """tl.dot of a and b rounded to DT, accumulated in float32. UPCAST (set under the
    interpreter, whose dot misreads 16-bit floats) feeds the rounded values as float32."""
    a = a.to(DT)
    b = b.to(DT)
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b)


@triton.jit
def _kkt_block(ki, kj, bi, gi, gj, DIAG: tl.constexpr, DT: tl.constexpr, UPCAST: tl.constexpr):
    """beta_i * (k_i k_j^T) * exp(gamma_i - gamma_j), strictly lower when DIAG (16 x 16)."""
    d = gi[:, None] - gj[None, :]
    if DIAG:
        r = tl.arange(0, 16)
        d = tl.where(r[:, None] > r[None, :], d, float("-inf"))
    return _mm(ki, tl.trans(kj), DT, UPCAST) * bi[:, None] * tl.exp(d)


@triton.jit
def _inv_unit_lower16(A):
    """(I + A)^-1 for a strictly lower-triangular 16 x 16 float32 A, by forward substitution."""
    r = tl.arange(0, 16)
    X = (r[:, None] == r[None, :]).to(tl.float32)
    for i in tl.static_range(1, 16):
        a_i = tl.sum(tl.where(r[:, None] == i, A, 0.0), 0)          # row i of A
        x_i = (r == i).to(tl.float32) - tl.sum(a_i[:, None] * X, 0)  # e_i - sum_j A_ij X_j
        X = tl.where(r[:, None] == i, x_i[None, :], X)
    return X


@triton.jit
def _dot32(a, b):
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _load_rows(ptr, rows, mask, stride, cols):
    """Rows ``rows`` (token indices, masked by ``mask``) x columns ``cols`` of a [tokens, stride] view."""
    return tl.load(ptr + rows[:, None] * stride + cols[None, :], mask=mask[:, None], other=0.0)


@triton.jit
def _wu_rows(X0, X1, X2, X3, a0, a1, a2, a3, N: tl.constexpr, DT: tl.constexpr, UPCAST: tl.constexpr):
    """sum_{j<N} X_j a_j (the blocks past N are placeholders, not read)."""
    acc = _mm(X0, a0, DT, UPCAST)
    if N > 1:
        acc += _mm(X1, a1, DT, UPCAST)
    if N > 2:
        acc += _mm(X2, a2, DT, UPCAST)
    if N > 3:
        acc += _mm(X3, a3, DT, UPCAST)
    return acc


@maybe_autotune(_INTRA_CONFIGS, key=["K", "V"])
@triton.jit
def _chunk_intra_kernel(q, k, v, g, beta, gamma, w, u, aqk, cu_seqlens, chunk_indices, scale, T, NT,
                        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr):
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    if IS_VARLEN:
        i_n = tl.load(chunk_indices + 2 * i_c)
        i_t = tl.load(chunk_indices + 2 * i_c + 1)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        i_n = i_c // NT
        i_t = i_c % NT
        bos = i_n.to(tl.int64) * T
        eos = bos + T
    t0 = bos + i_t * BT
    DT: tl.constexpr = k.dtype.element_ty
    ck = tl.arange(0, K)
    cv = tl.arange(0, V)
    r16 = tl.arange(0, 16)
    qk_base = k + i_h * K
    # four 16-row blocks: keys, gates, betas; gamma = running cumulative sum of g
    rows0 = t0 + r16
    rows1 = rows0 + 16
    rows2 = rows0 + 32
    rows3 = rows0 + 48
    m0 = rows0 < eos
    m1 = rows1 < eos
    m2 = rows2 < eos
    m3 = rows3 < eos
    k0 = _load_rows(qk_base, rows0, m0, H * K, ck)
    k1 = _load_rows(qk_base, rows1, m1, H * K, ck)
    k2 = _load_rows(qk_base, rows2, m2, H * K, ck)
    k3 = _load_rows(qk_base, rows3, m3, H * K, ck)
    g0 = tl.load(g + rows0 * H + i_h, mask=m0, other=0.0).to(tl.float32)
    g1 = tl.load(g + rows1 * H + i_h, mask=m1, other=0.0).to(tl.float32)
    g2 = tl.load(g + rows2 * H + i_h, mask=m2, other=0.0).to(tl.float32)
    g3 = tl.load(g + rows3 * H + i_h, mask=m3, other=0.0).to(tl.float32)
    c0 = tl.cumsum(g0, 0)
    c1 = tl.cumsum(g1, 0) + tl.sum(g0, 0)
    c2 = tl.cumsum(g2, 0) + tl.sum(g0, 0) + tl.sum(g1, 0)
    c3 = tl.cumsum(g3, 0) + tl.sum(g0, 0) + tl.sum(g1, 0) + tl.sum(g2, 0)
    b0 = tl.load(beta + rows0 * H + i_h, mask=m0, other=0.0).to(tl.float32)
    b1 = tl.load(beta + rows1 * H + i_h, mask=m1, other=0.0).to(tl.float32)
    b2 = tl.load(beta + rows2 * H + i_h, mask=m2, other=0.0).to(tl.float32)
    b3 = tl.load(beta + rows3 * H + i_h, mask=m3, other=0.0).to(tl.float32)
    tl.store(gamma + rows0 * H + i_h, c0, mask=m0)
    tl.store(gamma + rows1 * H + i_h, c1, mask=m1)
    tl.store(gamma + rows2 * H + i_h, c2, mask=m2)
    tl.store(gamma + rows3 * H + i_h, c3, mask=m3)

    # T = (I + A)^-1 blockwise: D_i = inverse of the diagonal blocks,
    # X_ij = -D_i sum_{j<=m<i} A_im X_mj
    D0 = _inv_unit_lower16(_kkt_block(k0, k0, b0, c0, c0, True, DT, UPCAST))
    D1 = _inv_unit_lower16(_kkt_block(k1, k1, b1, c1, c1, True, DT, UPCAST))
    D2 = _inv_unit_lower16(_kkt_block(k2, k2, b2, c2, c2, True, DT, UPCAST))
    D3 = _inv_unit_lower16(_kkt_block(k3, k3, b3, c3, c3, True, DT, UPCAST))
    A10 = _kkt_block(k1, k0, b1, c1, c0, False, DT, UPCAST)
    A20 = _kkt_block(k2, k0, b2, c2, c0, False, DT, UPCAST)
    A21 = _kkt_block(k2, k1, b2, c2, c1, False, DT, UPCAST)
    A30 = _kkt_block(k3, k0, b3, c3, c0, False, DT, UPCAST)
    A31 = _kkt_block(k3, k1, b3, c3, c1, False, DT, UPCAST)
    A32 = _kkt_block(k3, k2, b3, c3, c2, False, DT, UPCAST)
    X10 = -_dot32(D1, _dot32(A10, D0))
    X21 = -_dot32(D2, _dot32(A21, D1))
    X20 = -_dot32(D2, _dot32(A20, D0) + _dot32(A21, X10))
    X32 = -_dot32(D3, _dot32(A32, D2))
    X31 = -_dot32(D3, _dot32(A31, D1) + _dot32(A32, X21))
    X30 = -_dot32(D3, _dot32(A30, D0) + _dot32(A31, X10) + _dot32(A32, X20))

    # W = T diag(beta e^gamma) K and U = T diag(beta) V, 16 rows at a time; the
    # diagonal factors scale the inverse's columns so K and V enter unrounded
    e0 = b0 * tl.exp(c0)
    e1 = b1 * tl.exp(c1)
    e2 = b2 * tl.exp(c2)
    e3 = b3 * tl.exp(c3)
    v_base = v + i_h * V
    v0 = _load_rows(v_base, rows0, m0, H * V, cv)
    v1 = _load_rows(v_base, rows1, m1, H * V, cv)
    v2 = _load_rows(v_base, rows2, m2, H * V, cv)
    v3 = _load_rows(v_base, rows3, m3, H * V, cv)
    w_base = w + i_h * K
    u_base = u + i_h * V
    tl.store(w_base + rows0[:, None] * H * K + ck[None, :],
             _wu_rows(D0 * e0[None, :], D0, D0, D0, k0, k0, k0, k0, 1, tl.float32, UPCAST), mask=m0[:, None])
    tl.store(w_base + rows1[:, None] * H * K + ck[None, :],
             _wu_rows(X10 * e0[None, :], D1 * e1[None, :], D1, D1, k0, k1, k1, k1, 2, tl.float32, UPCAST),
             mask=m1[:, None])
    tl.store(w_base + rows2[:, None] * H * K + ck[None, :],
             _wu_rows(X20 * e0[None, :], X21 * e1[None, :], D2 * e2[None, :], D2, k0, k1, k2, k2, 3, tl.float32,
                      UPCAST), mask=m2[:, None])
    tl.store(w_base + rows3[:, None] * H * K + ck[None, :],
             _wu_rows(X30 * e0[None, :], X31 * e1[None, :], X32 * e2[None, :], D3 * e3[None, :], k0, k1, k2,
                      k3, 4, tl.float32, UPCAST), mask=m3[:, None])
    tl.store(u_base + rows0[:, None] * H * V + cv[None, :],
             _wu_rows(D0 * b0[None, :], D0, D0, D0, v0, v0, v0, v0, 1, tl.float32, UPCAST), mask=m0[:, None])
    tl.store(u_base + rows1[:, None] * H * V + cv[None, :],
             _wu_rows(X10 * b0[None, :], D1 * b1[None, :], D1, D1, v0, v1, v1, v1, 2, tl.float32, UPCAST),
             mask=m1[:, None])
    tl.store(u_base + rows2[:, None] * H * V + cv[None, :],
             _wu_rows(X20 * b0[None, :], X21 * b1[None, :], D2 * b2[None, :], D2, v0, v1, v2, v2, 3, tl.float32,
                      UPCAST), mask=m2[:, None])
    tl.store(u_base + rows3[:, None] * H * V + cv[None, :],
             _wu_rows(X30 * b0[None, :], X31 * b1[None, :], X32 * b2[None, :], D3 * b3[None, :], v0, v1, v2,
                      v3, 4, tl.float32, UPCAST), mask=m3[:, None])

    # Aqk = scale * (Q K^T * Gamma) on and below the diagonal, full 64 x 64
    rt = t0 + tl.arange(0, BT)
    mt = rt < eos
    bq = _load_rows(q + i_h * K, rt, mt, H * K, ck)
    bk = _load_rows(qk_base, rt, mt, H * K, ck)
    gt = tl.cumsum(tl.load(g + rt * H + i_h, mask=mt, other=0.0).to(tl.float32), 0)
    ct = tl.arange(0, BT)
    d = tl.where((ct[:, None] >= ct[None, :]) & mt[:, None], gt[:, None] - gt[None, :], float("-inf"))
    s = _mm(bq, tl.trans(bk), DT, UPCAST) * tl.exp(d) * scale
    tl.store(aqk + (rt[:, None] * H + i_h) * BT + ct[None, :], s, mask=mt[:, None])


@maybe_autotune(_STATE_CONFIGS, key=["K", "V", "BV"])
@triton.jit
def _chunk_state_kernel(q, k, gamma, w, u, aqk, o, h0, ht, h, v_new, cu_seqlens, chunk_offsets, scale, T,
                        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        BV: tl.constexpr, USE_H0: tl.constexpr, STORE_HT: tl.constexpr,
                        STORE_H: tl.constexpr, IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr):
    i_v = tl.program_id(0)
    i_nh = tl.program_id(1)
    i_n = i_nh // H
    i_h = i_nh % H
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
        c_off = tl.load(chunk_offsets + i_n).to(tl.int64)
    else:
        bos = i_n.to(tl.int64) * T
        eos = bos + T
        c_off = i_n.to(tl.int64) * tl.cdiv(T, BT)
    ck = tl.arange(0, K)
    cv = i_v * BV + tl.arange(0, BV)
    ct = tl.arange(0, BT)
    S = tl.zeros([K, BV], dtype=tl.float32)
    if USE_H0:
        S += tl.load(h0 + i_nh.to(tl.int64) * K * V + ck[:, None] * V + cv[None, :])
    n_chunks = tl.cdiv(eos - bos, BT)
    for i_t in range(0, n_chunks):
        rt = bos + i_t * BT + ct
        mt = rt < eos
        last = tl.minimum(bos + i_t * BT + BT, eos) - 1
        b_w = _load_rows(w + i_h * K, rt, mt, H * K, ck)
        b_u = _load_rows(u + i_h * V, rt, mt, H * V, cv)
        b_q = _load_rows(q + i_h * K, rt, mt, H * K, ck)
        b_k = _load_rows(k + i_h * K, rt, mt, H * K, ck)
        b_a = _load_rows(aqk + i_h * BT, rt, mt, H * BT, ct)
        b_g = tl.load(gamma + rt * H + i_h, mask=mt, other=0.0)
        g_last = tl.load(gamma + last * H + i_h)
        if STORE_H:
            tl.store(h + ((c_off + i_t) * H + i_h) * K * V + ck[:, None] * V + cv[None, :], S)
        b_vn = b_u - _mm(b_w, S, tl.float32, UPCAST)
        if STORE_H:
            tl.store(v_new + (rt[:, None] * H + i_h) * V + cv[None, :], b_vn, mask=mt[:, None])
        b_qg = b_q * (tl.exp(b_g) * scale)[:, None]
        b_o = _mm(b_qg, S, tl.float32, UPCAST) + _mm(b_a, b_vn, tl.float32, UPCAST)
        tl.store(o + (rt[:, None] * H + i_h) * V + cv[None, :], b_o.to(o.dtype.element_ty), mask=mt[:, None])
        b_kd = b_k * tl.where(mt, tl.exp(g_last - b_g), 0.0)[:, None]
        S = S * tl.exp(g_last) + _mm(tl.trans(b_kd), b_vn, tl.float32, UPCAST)
    if STORE_HT:
        tl.store(ht + i_nh.to(tl.int64) * K * V + ck[:, None] * V + cv[None, :], S)


@dataclasses.dataclass
class ChunkIntermediates:
    """Per-chunk quantities of the chunked forward (token layout, flattened B*T).

    Attributes:
        gamma: ``[B*T, H]`` float32, in-chunk cumulative sum of g.
        w: ``[B*T, H, K]`` float32, W = T diag(beta e^gamma) K.
        u: ``[B*T, H, V]`` float32, U = T diag(beta) V.
        aqk: ``[B*T, H, C]`` float32, scale (Q K^T * Gamma) lower incl. diagonal.
        h: ``[num_chunks, H, K, V]`` float32 state entering each chunk, or None.
        v_new: ``[B*T, H, V]`` float32, V_new = U - W S, or None.
        chunk_offsets: ``[N + 1]`` int32 first chunk of each sequence in ``h``.
    """

    gamma: torch.Tensor
    w: torch.Tensor
    u: torch.Tensor
    aqk: torch.Tensor
    h: torch.Tensor | None
    v_new: torch.Tensor | None
    chunk_offsets: torch.Tensor


def _chunk_tables(B, T, cu_seqlens, device):
    """(chunk_indices [NC, 2] int32 (sequence, chunk in sequence), chunk_offsets [N+1] int32, NC)."""
    if cu_seqlens is None:
        nt = triton.cdiv(T, CHUNK_SIZE)
        offsets = torch.arange(B + 1, dtype=torch.int32, device=device) * nt
        return None, offsets, B * nt
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).to(torch.int64)
    nts = (lens + CHUNK_SIZE - 1) // CHUNK_SIZE
    offsets = torch.zeros(len(nts) + 1, dtype=torch.int64, device=device)
    offsets[1:] = nts.cumsum(0)
    nc = int(offsets[-1].item())
    seq = torch.repeat_interleave(torch.arange(len(nts), device=device), nts)
    within = torch.arange(nc, device=device) - offsets[:-1].repeat_interleave(nts)
    indices = torch.stack([seq, within], 1).to(torch.int32).contiguous()
    return indices, offsets.to(torch.int32), nc


def chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, initial_state, output_final_state,
                               cu_seqlens=None, store_chunk_states=False):
    """Chunked forward on validated, contiguous inputs; also returns the intermediates.

    Args: as :func:`chunk_gated_delta_rule` (g already float32, q/k normalised,
        ``scale`` a float), plus ``store_chunk_states`` to also write the state
        entering every chunk and V_new (what a backward pass needs).
    Returns:
        ``(o [B, T, H, V], final_state [N, H, K, V] float32 or None, ChunkIntermediates)``.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    dev, C = q.device, CHUNK_SIZE
    indices, offsets, NC = _chunk_tables(B, T, cu_seqlens, dev)
    gamma = torch.empty(B * T, H, dtype=torch.float32, device=dev)
    w = torch.empty(B * T, H, K, dtype=torch.float32, device=dev)
    u = torch.empty(B * T, H, V, dtype=torch.float32, device=dev)
    aqk = torch.empty(B * T, H, C, dtype=torch.float32, device=dev)
    o = torch.empty_like(v)
    ht = torch.empty(N, H, K, V, dtype=torch.float32, device=dev) if output_final_state else None
    h = torch.empty(NC, H, K, V, dtype=torch.float32, device=dev) if store_chunk_states else None
    v_new = torch.empty(B * T, H, V, dtype=torch.float32, device=dev) if store_chunk_states else None
    inter = ChunkIntermediates(gamma, w, u, aqk, h, v_new, offsets)
    if NC == 0:
        if ht is not None:
            ht.copy_(initial_state) if initial_state is not None else ht.zero_()
        return o, ht, inter
    dummy = gamma
    _chunk_intra_kernel[(NC, H)](
        q, k, v, g, beta, gamma, w, u, aqk,
        cu_seqlens if cu_seqlens is not None else dummy, indices if indices is not None else dummy,
        scale, T, triton.cdiv(T, C), H=H, K=K, V=V, BT=C, IS_VARLEN=cu_seqlens is not None,
        UPCAST=interpreting())
    BV = value_block(V, N * H, dev)
    _chunk_state_kernel[(V // BV, N * H)](
        q, k, gamma, w, u, aqk, o,
        initial_state if initial_state is not None else dummy, ht if ht is not None else dummy,
        h if h is not None else dummy, v_new if v_new is not None else dummy,
        cu_seqlens if cu_seqlens is not None else dummy, offsets, scale, T,
        H=H, K=K, V=V, BT=C, BV=BV, USE_H0=initial_state is not None, STORE_HT=ht is not None,
        STORE_H=store_chunk_states, IS_VARLEN=cu_seqlens is not None, UPCAST=interpreting())
    return o, ht, inter


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    """Gated delta rule forward by the chunked algorithm (chunk 64), two Triton kernels.

    Args (flash-linear-attention's names and order):
        q, k: ``[B, T, H, K]`` float16/bfloat16/float32, L2-normalised (or set
            ``use_qk_l2norm_in_kernel``); K in 16, 32, 64, 128.
        v: ``[B, T, H, V]``, q's dtype; V in 16, 32, 64, 128.
        g: ``[B, T, H]`` log decay per token (<= 0), any float dtype.
        beta: ``[B, T, H]`` in (0, 1), any float dtype.
        scale: output scale (default ``K ** -0.5``).
        initial_state: optional ``[N, H, K, V]`` float32 state.
        output_final_state: also return the ``[N, H, K, V]`` float32 final state.
        cu_seqlens: optional ``[N + 1]`` int32/int64 offsets of packed
            sequences (B == 1); chunks restart at every sequence start.
        use_qk_l2norm_in_kernel: L2-normalise q and k first (float32, eps 1e-6).
    Returns:
        ``(o, final_state)``: o ``[B, T, H, V]`` in v's dtype, final_state or None.
        Differentiable (q, k, v, g, beta, initial_state) when any input
        requires grad: the Triton backward of :mod:`kernels.gdn.chunk_bwd`.
    Raises:
        TypeError/ValueError from :func:`kernels.gdn.validate.check_inputs`
        (shapes, dtypes, devices, cu_seqlens, g > 0, head dims).
    Method: Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025 (WY
    representation with the UT transform), as in flash-linear-attention.
    """
    B, T, H, K, V, N = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    scale = K ** -0.5 if scale is None else float(scale)
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    q, k, v, beta = (x.contiguous() for x in (q, k, v, beta))
    g = g.to(torch.float32).contiguous()
    if initial_state is not None:
        initial_state = initial_state.contiguous()
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad
                                       for x in (q, k, v, g, beta, initial_state)):
        from kernels.gdn.chunk_bwd import ChunkGatedDeltaRuleFunction

        return ChunkGatedDeltaRuleFunction.apply(q, k, v, g, beta, scale, initial_state, output_final_state,
                                                 cu_seqlens)
    o, ht, _ = chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, initial_state, output_final_state,
                                          cu_seqlens)
    return o, ht
