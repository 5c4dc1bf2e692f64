"""Triton kernels of the chunked gated delta rule forward and their launches.

Notation and method: :mod:`kernels.gdn.chunk`, which runs these kernels in
order (:func:`kernels.gdn.chunk.chunk_gated_delta_rule_fwd`). Three kernels:

1. ``_chunk_prepare_kernel``, one program per (chunk, value head), everything that
   does not depend on the state: gamma; T from A built in 16 x 16 blocks
   (the four diagonal blocks inverted by the product form of
   :func:`kernels.gdn._triton._inv_unit_lower16`, the rest by block
   products); and from T's blocks W = T diag(beta e^gamma) K and
   U = T diag(beta) V, stored in the products' operand dtype. T itself is
   stored (float32) only for the backward pass. The solve's products take
   float16 operands with 16-bit inputs and K = 128 (the output's and final
   state's errors at T = 1000 did not change in the interpreter), full
   float32 otherwise.
2. ``_chunk_state_kernel``, one program per (sequence, value head, value block),
   walks the chunks in order with the K x BV state in registers (float32):
   V_new = U - W S, then S' = e^{gamma_C} S + K^T (e^{gamma_C - gamma} V_new),
   two products per chunk on the recurrence's path, with K^T loaded
   transposed rather than transposed in registers (flash-linear-attention's
   form of the pass). It stores the state entering each chunk and V_new. The
   value axis is split across programs (BV = 64/32/16, about one program per
   SM: :func:`kernels.core.launch.value_block`) so that small B*H still fills the GPU.
3. ``_chunk_output_kernel``, one program per (chunk, value head), in parallel over
   the chunks: O from Q, K, gamma and the stored state and V_new.

Grids: the (chunk, head) kernels put the chunks on axis 0 (limit 2^31 - 1)
and the value heads on axis 1 (65535, ``validate.MAX_HEADS``); the
sequential kernel puts (sequence, head, value block) on axis 0, so any
number of packed sequences fits. Each launch function takes the kernel's
arguments (``meta``: the constexprs H, HV, K, V, BT, IS_VARLEN, UPCAST, DD)
and sets its grid and block sizes.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.gdn._triton import (_chunk_bounds, _inv_unit_lower16, _kkt_block, _load_rows, _load_t, _mm,
                                 _seq_bounds, _solve_mm, _store_rows)
from kernels.core.launch import maybe_autotune, value_block

_PREP_CONFIGS = [triton.Config({}, num_warps=w, num_stages=1) for w in (2, 4, 8)]

# 4 warps, num_stages >= 2: with float16 products Triton 3.6 on the H200 compiled 8 warps
# (at BV <= 32 with num_stages=1; at BV = 16 and T = 1 with any) into an out-of-bounds
# shared-memory read (compute-sanitizer), an illegal memory access; num_stages=1 with
# 4 warps at BV = 16 gave no result within 40 s in the same sweep (not investigated)
_STATE_CONFIGS = [triton.Config({}, num_warps=4, num_stages=s) for s in (2, 3)]
_OUTPUT_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (1, 2)]


@triton.jit
def _store_t_rows(ptr, rows, mask, stride, X0, X1, X2, X3):
    """16 rows of T: the four 16 x 16 blocks X0..X3 side by side in columns 0..63."""
    r16 = tl.arange(0, 16)
    _store_rows(ptr, rows, mask, stride, r16, X0)
    _store_rows(ptr, rows, mask, stride, r16 + 16, X1)
    _store_rows(ptr, rows, mask, stride, r16 + 32, X2)
    _store_rows(ptr, rows, mask, stride, r16 + 48, X3)


@triton.jit
def _wy_rows(X0, X1, X2, X3, y0, y1, y2, y3, s0, s1, s2, s3, NB: tl.constexpr, DD: tl.constexpr,
             UPCAST: tl.constexpr):
    """One 16-row block of T diag(s) Y: sum over j < NB of X_j (diag(s_j) y_j), X_j the
    16 x 16 blocks of that row of T and y_j the 16-row blocks of Y (float32)."""
    acc = _mm(X0, y0 * s0[:, None], DD, UPCAST)
    if NB > 1:
        acc += _mm(X1, y1 * s1[:, None], DD, UPCAST)
    if NB > 2:
        acc += _mm(X2, y2 * s2[:, None], DD, UPCAST)
    if NB > 3:
        acc += _mm(X3, y3 * s3[:, None], DD, UPCAST)
    return acc


@maybe_autotune(_PREP_CONFIGS, key=["K", "V", "STORE_T", "DD"])
@triton.jit
def _chunk_prepare_kernel(k, v, g, beta, gamma, tmat, w, u, cu_seqlens, chunk_indices, T, NT,
                          H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                          STORE_T: tl.constexpr, IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr,
                          DD: tl.constexpr):
    """gamma, W = T diag(beta e^gamma) K and U = T diag(beta) V of one (chunk, value head), with
    STORE_T also T = (I + A)^-1 (row r of T at ``tmat[token r, head, :]``); value head i_h
    reads key head i_h // (HV // H)."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    i_hk = i_h // (HV // H)
    t0, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, BT, IS_VARLEN)
    DT: tl.constexpr = k.dtype.element_ty
    ck = tl.arange(0, K)
    r16 = tl.arange(0, 16)
    # four 16-row blocks: keys, gates, betas; gamma = running cumulative sum of g
    rows0 = t0 + r16
    rows1 = rows0 + 16
    rows2 = rows0 + 32
    rows3 = rows0 + 48
    m0 = rows0 < eos
    m1 = rows1 < eos
    m2 = rows2 < eos
    m3 = rows3 < eos
    k_base = k + i_hk * K
    k0 = _load_rows(k_base, rows0, m0, H * K, ck)
    k1 = _load_rows(k_base, rows1, m1, H * K, ck)
    k2 = _load_rows(k_base, rows2, m2, H * K, ck)
    k3 = _load_rows(k_base, rows3, m3, H * K, ck)
    g0 = tl.load(g + rows0 * HV + i_h, mask=m0, other=0.0).to(tl.float32)
    g1 = tl.load(g + rows1 * HV + i_h, mask=m1, other=0.0).to(tl.float32)
    g2 = tl.load(g + rows2 * HV + i_h, mask=m2, other=0.0).to(tl.float32)
    g3 = tl.load(g + rows3 * HV + i_h, mask=m3, other=0.0).to(tl.float32)
    c0 = tl.cumsum(g0, 0)
    c1 = tl.cumsum(g1, 0) + tl.sum(g0, 0)
    c2 = tl.cumsum(g2, 0) + tl.sum(g0, 0) + tl.sum(g1, 0)
    c3 = tl.cumsum(g3, 0) + tl.sum(g0, 0) + tl.sum(g1, 0) + tl.sum(g2, 0)
    tl.store(gamma + rows0 * HV + i_h, c0, mask=m0)
    tl.store(gamma + rows1 * HV + i_h, c1, mask=m1)
    tl.store(gamma + rows2 * HV + i_h, c2, mask=m2)
    tl.store(gamma + rows3 * HV + i_h, c3, mask=m3)
    b0 = tl.load(beta + rows0 * HV + i_h, mask=m0, other=0.0).to(tl.float32)
    b1 = tl.load(beta + rows1 * HV + i_h, mask=m1, other=0.0).to(tl.float32)
    b2 = tl.load(beta + rows2 * HV + i_h, mask=m2, other=0.0).to(tl.float32)
    b3 = tl.load(beta + rows3 * HV + i_h, mask=m3, other=0.0).to(tl.float32)
    # T blockwise: D_i = inverse of the diagonal blocks, X_ij = -D_i sum_{j<=m<i} A_im X_mj
    D0 = _inv_unit_lower16(_kkt_block(k0, k0, b0, c0, c0, True, DT, UPCAST), DD, UPCAST)
    D1 = _inv_unit_lower16(_kkt_block(k1, k1, b1, c1, c1, True, DT, UPCAST), DD, UPCAST)
    D2 = _inv_unit_lower16(_kkt_block(k2, k2, b2, c2, c2, True, DT, UPCAST), DD, UPCAST)
    D3 = _inv_unit_lower16(_kkt_block(k3, k3, b3, c3, c3, True, DT, UPCAST), DD, UPCAST)
    A10 = _kkt_block(k1, k0, b1, c1, c0, False, DT, UPCAST)
    A20 = _kkt_block(k2, k0, b2, c2, c0, False, DT, UPCAST)
    A21 = _kkt_block(k2, k1, b2, c2, c1, False, DT, UPCAST)
    A30 = _kkt_block(k3, k0, b3, c3, c0, False, DT, UPCAST)
    A31 = _kkt_block(k3, k1, b3, c3, c1, False, DT, UPCAST)
    A32 = _kkt_block(k3, k2, b3, c3, c2, False, DT, UPCAST)
    X10 = -_solve_mm(D1, _solve_mm(A10, D0, DD, UPCAST), DD, UPCAST)
    X21 = -_solve_mm(D2, _solve_mm(A21, D1, DD, UPCAST), DD, UPCAST)
    X20 = -_solve_mm(D2, _solve_mm(A20, D0, DD, UPCAST) + _solve_mm(A21, X10, DD, UPCAST), DD, UPCAST)
    X32 = -_solve_mm(D3, _solve_mm(A32, D2, DD, UPCAST), DD, UPCAST)
    X31 = -_solve_mm(D3, _solve_mm(A31, D1, DD, UPCAST) + _solve_mm(A32, X21, DD, UPCAST), DD, UPCAST)
    X30 = -_solve_mm(D3, _solve_mm(A30, D0, DD, UPCAST) + _solve_mm(A31, X10, DD, UPCAST)
                     + _solve_mm(A32, X20, DD, UPCAST), DD, UPCAST)
    if STORE_T:
        zero = tl.zeros([16, 16], dtype=tl.float32)
        base = tmat + i_h * BT
        _store_t_rows(base, rows0, m0, HV * BT, D0, zero, zero, zero)
        _store_t_rows(base, rows1, m1, HV * BT, X10, D1, zero, zero)
        _store_t_rows(base, rows2, m2, HV * BT, X20, X21, D2, zero)
        _store_t_rows(base, rows3, m3, HV * BT, X30, X31, X32, D3)
    # W and U by 16-row blocks of T (lower block triangular)
    _store_rows(w + i_h * K, rows0, m0, HV * K, ck, _wy_rows(D0, D0, D0, D0, k0, k0, k0, k0, b0 * tl.exp(c0),
                                                           b0, b0, b0, 1, DD, UPCAST))
    _store_rows(w + i_h * K, rows1, m1, HV * K, ck, _wy_rows(X10, D1, D1, D1, k0, k1, k1, k1, b0 * tl.exp(c0),
                                                           b1 * tl.exp(c1), b1, b1, 2, DD, UPCAST))
    _store_rows(w + i_h * K, rows2, m2, HV * K, ck, _wy_rows(X20, X21, D2, D2, k0, k1, k2, k2, b0 * tl.exp(c0),
                                                           b1 * tl.exp(c1), b2 * tl.exp(c2), b2, 3, DD, UPCAST))
    _store_rows(w + i_h * K, rows3, m3, HV * K, ck, _wy_rows(X30, X31, X32, D3, k0, k1, k2, k3, b0 * tl.exp(c0),
                                                           b1 * tl.exp(c1), b2 * tl.exp(c2), b3 * tl.exp(c3), 4,
                                                           DD, UPCAST))
    cv = tl.arange(0, V)
    v_base = v + i_h * V
    v0 = _load_rows(v_base, rows0, m0, HV * V, cv)
    v1 = _load_rows(v_base, rows1, m1, HV * V, cv)
    v2 = _load_rows(v_base, rows2, m2, HV * V, cv)
    v3 = _load_rows(v_base, rows3, m3, HV * V, cv)
    _store_rows(u + i_h * V, rows0, m0, HV * V, cv, _wy_rows(D0, D0, D0, D0, v0, v0, v0, v0, b0, b0, b0, b0, 1,
                                                           DD, UPCAST))
    _store_rows(u + i_h * V, rows1, m1, HV * V, cv, _wy_rows(X10, D1, D1, D1, v0, v1, v1, v1, b0, b1, b1, b1, 2,
                                                           DD, UPCAST))
    _store_rows(u + i_h * V, rows2, m2, HV * V, cv, _wy_rows(X20, X21, D2, D2, v0, v1, v2, v2, b0, b1, b2, b2, 3,
                                                           DD, UPCAST))
    _store_rows(u + i_h * V, rows3, m3, HV * V, cv, _wy_rows(X30, X31, X32, D3, v0, v1, v2, v3, b0, b1, b2, b3, 4,
                                                           DD, UPCAST))


# T is not specialised in the two sequential kernels (this one and the backward's
# _chunk_dh_kernel; Triton makes an integer argument equal to 1 a constant): Triton 3.6 on
# the H200 compiled this kernel's T = 1 specialisation into an out-of-bounds shared-memory
# read in a product (compute-sanitizer), an illegal memory access; without it T = 1 ran
# clean. The parallel kernels keep Triton's default specialisation, whose divisibility
# hints on T are worth 50 us in the prepare and W/U kernels at B4 T8192 H16 (H200 A/B);
# they pass the T = 1 tests.
@maybe_autotune(_STATE_CONFIGS, key=["K", "V", "BV", "DD"])
@triton.jit(do_not_specialize=["T"])
def _chunk_state_kernel(k, w, u, gamma, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T,
                        H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        BV: tl.constexpr, USE_H0: tl.constexpr, STORE_HT: tl.constexpr,
                        IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr, DD: tl.constexpr):
    """Sequential pass over the chunks of one (sequence, value head, value block), all three on
    grid axis 0 (value block fastest): stores the state entering each chunk and V_new = U - W S,
    and carries S' = e^{gamma_C} S + K^T diag(e^{gamma_C - gamma}) V_new."""
    i_v = tl.program_id(0) % (V // BV)
    i_nh = tl.program_id(0) // (V // BV)
    i_n = i_nh // HV
    i_h = i_nh % HV
    i_hk = i_h // (HV // H)
    bos, eos, c_off = _seq_bounds(i_n, cu_seqlens, chunk_offsets, T, BT, IS_VARLEN)
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
        tl.store(h + ((c_off + i_t) * HV + i_h) * K * V + ck[:, None] * V + cv[None, :], S.to(h.dtype.element_ty))
        b_w = _load_rows(w + i_h * K, rt, mt, HV * K, ck)
        b_u = _load_rows(u + i_h * V, rt, mt, HV * V, cv).to(tl.float32)
        b_g = tl.load(gamma + rt * HV + i_h, mask=mt, other=0.0)
        g_last = tl.load(gamma + last * HV + i_h)
        b_vn = b_u - _mm(b_w, S, DD, UPCAST)
        _store_rows(v_new + i_h * V, rt, mt, HV * V, cv, b_vn)
        # the decay goes on V_new and K^T is loaded transposed: no transpose in registers
        b_kt = _load_t(k + i_hk * K, rt, mt, H * K, ck)
        b_vd = b_vn * tl.where(mt, tl.exp(g_last - b_g), 0.0)[:, None]
        S = S * tl.exp(g_last) + _mm(b_kt, b_vd, DD, UPCAST)
    if STORE_HT:
        tl.store(ht + i_nh.to(tl.int64) * K * V + ck[:, None] * V + cv[None, :], S)


@maybe_autotune(_OUTPUT_CONFIGS, key=["K", "V", "DD"])
@triton.jit
def _chunk_output_kernel(q, k, gamma, h, v_new, o, cu_seqlens, chunk_indices, scale, T, NT,
                         H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                         IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr, DD: tl.constexpr):
    """O = scale diag(e^gamma) Q S + Aqk V_new of one (chunk, value head), from the state entering
    the chunk and V_new that ``_chunk_state_kernel`` stored."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    i_hk = i_h // (HV // H)
    t0, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, BT, IS_VARLEN)
    DT: tl.constexpr = k.dtype.element_ty
    ck = tl.arange(0, K)
    cv = tl.arange(0, V)
    ct = tl.arange(0, BT)
    rt = t0 + ct
    mt = rt < eos
    b_q = _load_rows(q + i_hk * K, rt, mt, H * K, ck)
    b_k = _load_rows(k + i_hk * K, rt, mt, H * K, ck)
    b_g = tl.load(gamma + rt * HV + i_h, mask=mt, other=0.0)
    S = tl.load(h + (i_c.to(tl.int64) * HV + i_h) * K * V + ck[:, None] * V + cv[None, :])
    d = tl.where((ct[:, None] >= ct[None, :]) & mt[:, None], b_g[:, None] - b_g[None, :], float("-inf"))
    b_a = _mm(b_q, tl.trans(b_k), DT, UPCAST) * tl.exp(d) * scale
    b_vn = _load_rows(v_new + i_h * V, rt, mt, HV * V, cv)
    b_o = _mm(b_q, S, DD, UPCAST) * (scale * tl.exp(b_g))[:, None] + _mm(b_a, b_vn, DD, UPCAST)
    _store_rows(o + i_h * V, rt, mt, HV * V, cv, b_o)


def chunk_prepare_fwd(k, v, g, beta, gamma, tmat, w, u, cu_seqlens, chunk_indices, T, NT, *, num_chunks, store_t,
                      **meta):
    """Launch ``_chunk_prepare_kernel`` on (chunks, value heads): writes gamma, W, U and, with
    ``store_t``, T into ``tmat`` (otherwise a placeholder)."""
    _chunk_prepare_kernel[(num_chunks, meta["HV"])](k, v, g, beta, gamma, tmat, w, u, cu_seqlens, chunk_indices,
                                                     T, NT, STORE_T=store_t, **meta)


def chunk_state_fwd(k, w, u, gamma, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, *, num_seqs, use_h0, store_ht,
                    **meta):
    """Launch ``_chunk_state_kernel`` on (sequence, value head, value block) with the value block
    that fills the SMs: writes the chunk states ``h``, ``v_new`` and, with ``store_ht``, the final
    state; reads ``h0`` with ``use_h0`` (``h0``/``ht`` otherwise placeholders)."""
    V, HV = meta["V"], meta["HV"]
    BV = value_block(V, num_seqs * HV, k.device)
    _chunk_state_kernel[(V // BV * num_seqs * HV,)](
        k, w, u, gamma, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, BV=BV,
        USE_H0=use_h0, STORE_HT=store_ht, **meta)


def chunk_output_fwd(q, k, gamma, h, v_new, o, cu_seqlens, chunk_indices, scale, T, NT, *, num_chunks, **meta):
    """Launch ``_chunk_output_kernel`` on (chunks, value heads): writes ``o``."""
    _chunk_output_kernel[(num_chunks, meta["HV"])](q, k, gamma, h, v_new, o, cu_seqlens, chunk_indices, scale, T, NT,
                                                   **meta)
