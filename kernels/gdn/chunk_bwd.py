"""Triton kernels of the chunked gated delta rule backward and their launches.

Notation of :mod:`kernels.gdn.chunk`, which runs these kernels in order
(:func:`kernels.gdn.chunk.chunk_gated_delta_rule_bwd`): gamma = in-chunk
cumulative sum of g, Gamma_rs = exp(gamma_r - gamma_s), T = (I + A)^-1,
W = T Kb with Kb = diag(beta e^gamma) K, U = T Vb with Vb = diag(beta) V,
S = state entering the chunk, S' = state leaving it. Per chunk the forward computes

    V_new = U - W S
    O     = Qg S + Aqk V_new,        Qg = scale diag(e^gamma) Q,  Aqk = scale (Q K^T * Gamma) lower incl.
    S'    = e^{gamma_C} S + Kd^T V_new,  Kd = diag(e^{gamma_C - gamma}) K.

Given dO and dS' (the gradient of the final state for the last chunk), the
backward differentiates that chunk-local computation analytically:

1. ``_chunk_wu_kernel``, one program per (chunk, head), rebuilds e^-gamma_0 W
   from the forward's saved T, kept in the products' operand dtype (its one
   reader, step 2, rounds it to that dtype anyway), and the part of dV_new that
   does not depend on the state, Aqk^T dO (into dV_new's buffer).
2. ``_chunk_dh_kernel``, one program per (sequence, head, value block), walks
   the chunks in reverse with dS (K x BV, float32) in registers:
   dV_new = Aqk^T dO + Kd dS';  dS = e^{gamma_C} dS' + Qg^T dO - W^T dV_new.
   It stores dS' of every chunk and dV_new; dS after the first chunk is the
   gradient of the initial state.
3. ``_chunk_bwd_wy_kernel``, one program per (chunk, head), everything summed
   over the value axis: dU = dV_new, dV = diag(beta) T^T dU, and
   dA = -(T^T dT T^T) = -((T^T dU) U^T + (T^T dW) W^T) with dW = -dV_new S^T.
   Because W S = U - V_new, (T^T dW) W^T = -(T^T dU)(U - V_new)^T, so
   dA = -(T^T dU) V_new^T, strictly lower: neither U nor S is needed here.
   It writes B = dA * beta_r Gamma_rs and Ms = scale (dO V_new^T * Gamma)
   lower incl. (C x C, float32) for step 4, and the dbeta and dgamma terms of A
   and Aqk.
4. ``_chunk_bwd_dqk_kernel``, one program per (key block of BK = 64 columns,
   chunk, head), with the saved S, V_new and T, dS' and dV_new of step 2:
   dQ = scale diag(e^gamma) dO S^T + Ms K,
   dK = diag(beta e^gamma) T^T dW + Ms^T Q + B K + B^T K + diag(e^{gamma_C-gamma}) V_new dS'^T,
   and this key block's dbeta and dgamma terms (row sums over its columns;
   dgamma_C collects the terms of the last token).
5. ``_chunk_bwd_gate_kernel``, one program per (chunk, head): dbeta and dgamma
   summed over steps 3 and 4; dg is the reverse in-chunk cumulative sum of dgamma.

With 16-bit inputs and K = 128 (and no initial state) every product takes float16
operands (Q K^T and K K^T the inputs themselves) with float32 accumulation, as in
the forward (:func:`kernels.gdn.chunk.product_dtype`; the backward reads the
choice from the dtype the forward kept its states in).

Grouped value attention (v ``[B, T, HV, V]``, q and k ``[B, T, H, K]``): every
step runs per value head, reading the key head ``j // (HV // H)``; step 4 writes
each value head's share of dQ and dK (float32), and ``_group_sum_kernel`` sums
each key head's HV / H shares into dQ and dK in q's dtype in one pass (torch's
sum over the strided group axis and the cast, three kernels, took 0.76 ms at
16/32 heads and 1 x 32768 tokens on an H200). With HV = H step 4 writes dQ and
dK directly.
Grids as in the forward: chunks (times key blocks in step 4) or (sequence,
head, value block) on axis 0, value heads on axis 1. Where a product sums terms scaled by
decays (W, diag(e^gamma) Q), the chunk's largest decay e^gamma_0 is factored
out and applied to the float32 result: otherwise terms below float16's range
vanish and dS (the initial state's gradient) lost precision (RMSE/RMS 0.0175 at
T = 300 in the model-init regime, 0.0000 with the factor). Transposed operands
are loaded transposed through pointer arithmetic; the two computed C x C
matrices whose transposes are needed (Ms, B) reach step 4 through a scratch in
global memory (only products read it: float16 with float16 products), read back
transposed, instead of ``tl.trans``: Triton 3.4-3.6 on Hopper miscompiles
``tl.dot(tl.trans(x), y)`` for a dot result x (flash-linear-attention issue
640, fixed there the same way). No atomics: every output element is written
by exactly one program, so gradients are bitwise reproducible.

Each launch function takes the kernel's arguments (``meta``: the constexprs
H, HV, K, V, BT, IS_VARLEN, UPCAST, DD) and sets its grid and block sizes.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.gdn._triton import _chunk_bounds, _load_rows, _load_t, _mm, _seq_bounds, _store_rows
from kernels.core.launch import maybe_autotune, value_block

#: Value columns that steps 3 and 4 (``_chunk_bwd_wy_kernel``, ``_chunk_bwd_dqk_kernel``) take per
#: iteration of their loop over the value axis (at most V). On an H200 (K = V = 128, device time),
#: 64 instead of 32, with W kept in the products' dtype, took the backward 9-17 % less time at the
#: study's shapes (geomean of six fwd+bwd and bwd cases 0.87: B4 T8192 H16 fwd+bwd 3.27 -> 2.83 ms,
#: GVA 16/32 heads 1 x 32768 bwd 6.08 -> 5.03 ms); all 128 at once, 0.88.
PARALLEL_BV = 64

_WU_CONFIGS = [triton.Config({}, num_warps=w, num_stages=1) for w in (4, 8)]
_DH_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (2, 3)]
_WY_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (1, 2)]
_DQK_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (4, 8) for s in (1, 2)]


@maybe_autotune(_WU_CONFIGS, key=["K", "V", "DD"])
@triton.jit
def _chunk_wu_kernel(q, k, gamma, beta, tmat, do, w, dvn, cu_seqlens, chunk_indices, scale, T, NT,
                     H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                     IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr, DD: tl.constexpr):
    """e^-gamma_0 W = T diag(beta e^(gamma - gamma_0)) K (gamma_0: the chunk's first token),
    in ``w``'s dtype (the products'), from the forward's saved T (the diagonal factors scale
    T's columns so K enters unrounded), and Aqk^T dO of one (chunk, value head)."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    i_hk = i_h // (HV // H)
    t0, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, BT, IS_VARLEN)
    DT: tl.constexpr = k.dtype.element_ty
    ck = tl.arange(0, K)
    ct = tl.arange(0, BT)
    rt = t0 + ct
    mt = rt < eos
    b_g = tl.load(gamma + rt * HV + i_h, mask=mt, other=0.0)
    b_b = tl.load(beta + rt * HV + i_h, mask=mt, other=0.0).to(tl.float32)
    b_t = _load_rows(tmat + i_h * BT, rt, mt, HV * BT, ct)
    b_k = _load_rows(k + i_hk * K, rt, mt, H * K, ck)
    g_first = tl.load(gamma + t0 * HV + i_h)
    e_rel = tl.where(mt, tl.exp(b_g - g_first), 0.0)          # e^(gamma - gamma_0) <= 1
    _store_rows(w + i_h * K, rt, mt, HV * K, ck, _mm(b_t * (b_b * e_rel)[None, :], b_k, DD, UPCAST))
    # Aqk^T [s, r] = scale k_s . q_r exp(gamma_r - gamma_s) for r >= s, built transposed (no tl.trans)
    b_qt = _load_t(q + i_hk * K, rt, mt, H * K, ck)
    d_t = tl.where((ct[None, :] >= ct[:, None]) & mt[None, :], b_g[None, :] - b_g[:, None], float("-inf"))
    b_at = _mm(b_k, b_qt, DT, UPCAST) * tl.exp(d_t) * scale
    cv = tl.arange(0, V)
    _store_rows(dvn + i_h * V, rt, mt, HV * V, cv, _mm(b_at, _load_rows(do + i_h * V, rt, mt, HV * V, cv), DD, UPCAST))


# T not specialised, as in the forward's sequential _chunk_state_kernel (see there)
@maybe_autotune(_DH_CONFIGS, key=["K", "V", "BV", "DD"], restore_value=["dvn"])   # dV_new += ...
@triton.jit(do_not_specialize=["T"])
def _chunk_dh_kernel(q, k, gamma, w, do, dht, dh0, dh, dvn, cu_seqlens, chunk_offsets, scale, T,
                     H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                     BV: tl.constexpr, USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr, IS_VARLEN: tl.constexpr,
                     UPCAST: tl.constexpr, DD: tl.constexpr):
    """Reverse pass over the chunks of one (sequence, value head, value block), all three on grid
    axis 0 (value block fastest): dS', dV_new, dS0."""
    i_v = tl.program_id(0) % (V // BV)
    i_nh = tl.program_id(0) // (V // BV)
    i_n = i_nh // HV
    i_h = i_nh % HV
    i_hk = i_h // (HV // H)
    bos, eos, c_off = _seq_bounds(i_n, cu_seqlens, chunk_offsets, T, BT, IS_VARLEN)
    ck = tl.arange(0, K)
    cv = i_v * BV + tl.arange(0, BV)
    ct = tl.arange(0, BT)
    dS = tl.zeros([K, BV], dtype=tl.float32)
    if USE_DHT:
        dS += tl.load(dht + i_nh.to(tl.int64) * K * V + ck[:, None] * V + cv[None, :])
    n_chunks = tl.cdiv(eos - bos, BT)
    for i in range(0, n_chunks):
        i_t = n_chunks - 1 - i
        rt = bos + i_t * BT + ct
        mt = rt < eos
        last = tl.minimum(bos + i_t * BT + BT, eos) - 1
        tl.store(dh + ((c_off + i_t) * HV + i_h) * K * V + ck[:, None] * V + cv[None, :], dS.to(dh.dtype.element_ty))
        b_g = tl.load(gamma + rt * HV + i_h, mask=mt, other=0.0)
        g_last = tl.load(gamma + last * HV + i_h)
        b_do = _load_rows(do + i_h * V, rt, mt, HV * V, cv)
        b_k = _load_rows(k + i_hk * K, rt, mt, H * K, ck)
        b_kd = b_k * tl.where(mt, tl.exp(g_last - b_g), 0.0)[:, None]
        b_dvn = _load_rows(dvn + i_h * V, rt, mt, HV * V, cv).to(tl.float32) + _mm(b_kd, dS, DD, UPCAST)
        _store_rows(dvn + i_h * V, rt, mt, HV * V, cv, b_dvn)
        g_first = tl.load(gamma + (bos + i_t * BT) * HV + i_h)
        e_rel = tl.where(mt, tl.exp(b_g - g_first), 0.0)
        b_qt = _load_t(q + i_hk * K, rt, mt, H * K, ck) * (e_rel * scale)[None, :]   # e^-gamma_0 Qg^T [K, C]
        b_wt = _load_t(w + i_h * K, rt, mt, HV * K, ck)                         # e^-gamma_0 W^T [K, C]
        dS = dS * tl.exp(g_last) + (_mm(b_qt, b_do, DD, UPCAST) - _mm(b_wt, b_dvn, DD, UPCAST)) * tl.exp(g_first)
    if STORE_DH0:
        tl.store(dh0 + i_nh.to(tl.int64) * K * V + ck[:, None] * V + cv[None, :], dS)


@maybe_autotune(_WY_CONFIGS, key=["K", "V", "BV", "DD"])
@triton.jit
def _chunk_bwd_wy_kernel(q, k, v, gamma, beta, tmat, v_new, dvn, do, dv, db_part, dgam_part, scratch,
                         cu_seqlens, chunk_indices, scale, T, NT,
                         H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                         BV: tl.constexpr, IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr, DD: tl.constexpr):
    """Step 3 of one (chunk, head): everything summed over the value axis. dV, and the
    C x C matrices B = dA * beta_r Gamma_rs and Ms (to ``scratch``, for step 4), with their
    contributions to dbeta and dgamma (to ``db_part``, ``dgam_part``)."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    i_hk = i_h // (HV // H)
    t0, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, BT, IS_VARLEN)
    DT: tl.constexpr = k.dtype.element_ty
    ck = tl.arange(0, K)
    ct = tl.arange(0, BT)
    rt = t0 + ct
    mt = rt < eos
    b_g = tl.load(gamma + rt * HV + i_h, mask=mt, other=0.0)
    b_b = tl.load(beta + rt * HV + i_h, mask=mt, other=0.0).to(tl.float32)
    b_tt = _load_t(tmat + i_h * BT, rt, mt, HV * BT, ct)                         # T^T [C, C]
    acc_da = tl.zeros([BT, BT], dtype=tl.float32)    # (T^T dU) V_new^T
    acc_dqk = tl.zeros([BT, BT], dtype=tl.float32)   # dO V_new^T
    acc_db = tl.zeros([BT], dtype=tl.float32)
    for i_v in range(0, V // BV):
        cv = i_v * BV + tl.arange(0, BV)
        b_dvn = _load_rows(dvn + i_h * V, rt, mt, HV * V, cv)
        b_vnt = _load_t(v_new + i_h * V, rt, mt, HV * V, cv)                     # V_new^T [BV, C]
        b_do = _load_rows(do + i_h * V, rt, mt, HV * V, cv)
        b_v = _load_rows(v + i_h * V, rt, mt, HV * V, cv).to(tl.float32)
        b_dut = _mm(b_tt, b_dvn, DD, UPCAST)                           # T^T dU [C, BV]
        _store_rows(dv + i_h * V, rt, mt, HV * V, cv, b_dut * b_b[:, None])
        acc_db += tl.sum(b_dut * b_v, 1)
        acc_da += _mm(b_dut, b_vnt, DD, UPCAST)
        acc_dqk += _mm(b_do, b_vnt, DD, UPCAST)
    b_q = _load_rows(q + i_hk * K, rt, mt, H * K, ck)
    b_k = _load_rows(k + i_hk * K, rt, mt, H * K, ck)
    b_kt = _load_t(k + i_hk * K, rt, mt, H * K, ck)                              # K^T [K, C]
    diff = b_g[:, None] - b_g[None, :]
    valid = mt[:, None] & mt[None, :]
    gam_s = tl.exp(tl.where(valid & (ct[:, None] > ct[None, :]), diff, float("-inf")))
    gam_i = tl.exp(tl.where(valid & (ct[:, None] >= ct[None, :]), diff, float("-inf")))
    # A = strict_lower(diag(beta) K K^T * Gamma), dA = -acc_da (see the module doc)
    b_da = -acc_da * gam_s                                                      # dA_rs Gamma_rs
    b_m = b_da * _mm(b_k, b_kt, DT, UPCAST)                                     # dA * K K^T * Gamma
    b_qa = b_m * b_b[:, None]                                                   # dA * A
    b_dgam = tl.sum(b_qa, 1) - tl.sum(b_qa, 0)
    # Aqk = scale (Q K^T * Gamma) lower incl.: Ms = dAqk
    b_ms = acc_dqk * gam_i * scale
    # dAqk * Aqk off the diagonal (the diagonal's row and column sums cancel; left in,
    # their rounding swamps dgamma where the gates are strong)
    b_p = acc_dqk * gam_s * scale * _mm(b_q, b_kt, DT, UPCAST)
    b_dgam += tl.sum(b_p, 1) - tl.sum(b_p, 0)
    tl.store(db_part + rt * HV + i_h, acc_db + tl.sum(b_m, 1), mask=mt)
    tl.store(dgam_part + rt * HV + i_h, b_dgam, mask=mt)
    sp = scratch + (i_c.to(tl.int64) * HV + i_h) * 2 * BT * BT
    tl.store(sp + ct[:, None] * BT + ct[None, :], b_ms.to(scratch.dtype.element_ty))
    tl.store(sp + BT * BT + ct[:, None] * BT + ct[None, :], (b_da * b_b[:, None]).to(scratch.dtype.element_ty))  # B


@maybe_autotune(_DQK_CONFIGS, key=["H", "HV", "K", "V", "BK", "BV", "DD"])
@triton.jit
def _chunk_bwd_dqk_kernel(q, k, gamma, beta, tmat, h, v_new, dh, dvn, do, scratch, dq, dk, db_part, dgam_part,
                          cu_seqlens, chunk_indices, scale, T, NT,
                          H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                          BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, UPCAST: tl.constexpr,
                          DD: tl.constexpr):
    """Step 4 of one (key block, chunk, value head), (chunk, key block) on grid axis 0 (key block
    fastest): dQ and dK on BK key columns of this value head's share (``dq``, ``dk`` hold HV
    heads), and their contributions to dbeta and dgamma (to ``db_part``, ``dgam_part`` of this
    key block)."""
    i_k = tl.program_id(0) % (K // BK)
    i_c = tl.program_id(0) // (K // BK)
    i_h = tl.program_id(1)
    i_hk = i_h // (HV // H)
    t0, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, BT, IS_VARLEN)
    ck = i_k * BK + tl.arange(0, BK)
    ct = tl.arange(0, BT)
    rt = t0 + ct
    mt = rt < eos
    last = tl.minimum(t0 + BT, eos) - 1
    b_g = tl.load(gamma + rt * HV + i_h, mask=mt, other=0.0)
    g_last = tl.load(gamma + last * HV + i_h)
    b_b = tl.load(beta + rt * HV + i_h, mask=mt, other=0.0).to(tl.float32)
    b_qf = _load_rows(q + i_hk * K, rt, mt, H * K, ck).to(tl.float32)
    b_kf = _load_rows(k + i_hk * K, rt, mt, H * K, ck).to(tl.float32)
    hp = h + (i_c.to(tl.int64) * HV + i_h) * K * V                               # S entering the chunk
    dhp = dh + (i_c.to(tl.int64) * HV + i_h) * K * V                             # dS' leaving it
    acc_dq = tl.zeros([BT, BK], dtype=tl.float32)    # dO S^T
    acc_dw = tl.zeros([BT, BK], dtype=tl.float32)    # dV_new S^T (= -dW)
    acc_dk = tl.zeros([BT, BK], dtype=tl.float32)    # V_new dS'^T
    acc_sc = tl.zeros([BK], dtype=tl.float32)        # column sums of S * dS'
    for i_v in range(0, V // BV):
        cv = i_v * BV + tl.arange(0, BV)
        b_st = tl.load(hp + ck[None, :] * V + cv[:, None])                      # S^T [BV, BK]
        b_dst = tl.load(dhp + ck[None, :] * V + cv[:, None])                    # dS'^T [BV, BK]
        b_do = _load_rows(do + i_h * V, rt, mt, HV * V, cv)
        b_dvn = _load_rows(dvn + i_h * V, rt, mt, HV * V, cv)
        b_vn = _load_rows(v_new + i_h * V, rt, mt, HV * V, cv)
        acc_dq += _mm(b_do, b_st, DD, UPCAST)
        acc_dw += _mm(b_dvn, b_st, DD, UPCAST)
        acc_dk += _mm(b_vn, b_dst, DD, UPCAST)
        acc_sc += tl.sum(b_st.to(tl.float32) * b_dst.to(tl.float32), 0)
    e_g = tl.where(mt, tl.exp(b_g), 0.0)
    eb = b_b * e_g
    # W = T diag(beta e^gamma) K
    b_tt = _load_t(tmat + i_h * BT, rt, mt, HV * BT, ct)                         # T^T [C, C]
    b_dwt = -_mm(b_tt, acc_dw, DD, UPCAST)                              # T^T dW [C, BK]
    t_w = tl.sum(b_dwt * b_kf, 1)
    b_dk = b_dwt * eb[:, None]
    b_db = e_g * t_w
    b_dgam = eb * t_w
    # Ms, B and their transposes from step 3 (loaded transposed: no tl.trans, see the module doc)
    sp = scratch + (i_c.to(tl.int64) * HV + i_h) * 2 * BT * BT
    b_ms = tl.load(sp + ct[:, None] * BT + ct[None, :])
    b_mst = tl.load(sp + ct[None, :] * BT + ct[:, None])
    b_bm = tl.load(sp + BT * BT + ct[:, None] * BT + ct[None, :])
    b_bmt = tl.load(sp + BT * BT + ct[None, :] * BT + ct[:, None])
    b_dk += _mm(b_bm, b_kf, DD, UPCAST) + _mm(b_bmt, b_kf, DD, UPCAST)
    # O = scale diag(e^gamma) Q S + Aqk V_new
    b_dq = acc_dq * (scale * e_g)[:, None]
    b_dgam += tl.sum(b_dq * b_qf, 1)
    b_dq += _mm(b_ms, b_kf, DD, UPCAST)
    b_dk += _mm(b_mst, b_qf, DD, UPCAST)
    # S' = e^{gamma_C} S + K^T diag(e^{gamma_C - gamma}) V_new
    b_dks = acc_dk * tl.where(mt, tl.exp(g_last - b_g), 0.0)[:, None]
    # the last token's own term cancels between -t_s and d_last: left out of both
    t_s = tl.where(rt == last, 0.0, tl.sum(b_dks * b_kf, 1))
    b_dk += b_dks
    b_dgam -= t_s
    d_last = tl.sum(t_s, 0) + tl.exp(g_last) * tl.sum(acc_sc, 0)
    b_dgam += tl.where(rt == last, d_last, 0.0)
    _store_rows(dq + i_h * K, rt, mt, HV * K, ck, b_dq)
    _store_rows(dk + i_h * K, rt, mt, HV * K, ck, b_dk)
    tl.store(db_part + (rt * HV + i_h) * (K // BK) + i_k, b_db, mask=mt)
    tl.store(dgam_part + (rt * HV + i_h) * (K // BK) + i_k, b_dgam, mask=mt)


@triton.jit
def _group_sum_kernel(x, y, rows, G: tl.constexpr, K: tl.constexpr, BR: tl.constexpr):
    """Rows ``[BR]`` of y ``[rows, K]`` = the sum over g of x ``[rows, G, K]`` (float32, g in order)."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.arange(0, K)
    m = (r < rows)[:, None]
    acc = tl.zeros([BR, K], dtype=tl.float32)
    for i_g in range(0, G):
        acc += tl.load(x + (r[:, None].to(tl.int64) * G + i_g) * K + c[None, :], mask=m, other=0.0)
    tl.store(y + r[:, None].to(tl.int64) * K + c[None, :], acc.to(y.dtype.element_ty), mask=m)


@triton.jit
def _chunk_bwd_gate_kernel(db3, dgam3, db4, dgam4, dg, dbeta, cu_seqlens, chunk_indices, T, NT,
                           HV: tl.constexpr, BT: tl.constexpr, NK: tl.constexpr, IS_VARLEN: tl.constexpr):
    """Step 5 of one (chunk, value head): dbeta and dgamma summed over steps 3 and 4 (all key blocks);
    g -> gamma = in-chunk cumsum(g), so dg is the reverse in-chunk cumulative sum of dgamma."""
    i_c = tl.program_id(0)
    i_h = tl.program_id(1)
    t0, eos = _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, BT, IS_VARLEN)
    rt = t0 + tl.arange(0, BT)
    mt = rt < eos
    ik = tl.arange(0, NK)
    b_db = tl.load(db3 + rt * HV + i_h, mask=mt, other=0.0)
    b_dgam = tl.load(dgam3 + rt * HV + i_h, mask=mt, other=0.0)
    b_db += tl.sum(tl.load(db4 + (rt[:, None] * HV + i_h) * NK + ik[None, :], mask=mt[:, None], other=0.0), 1)
    b_dgam += tl.sum(tl.load(dgam4 + (rt[:, None] * HV + i_h) * NK + ik[None, :], mask=mt[:, None], other=0.0), 1)
    tl.store(dg + rt * HV + i_h, tl.cumsum(b_dgam, 0, reverse=True), mask=mt)
    tl.store(dbeta + rt * HV + i_h, b_db, mask=mt)


def chunk_wu_bwd(q, k, gamma, beta, tmat, do, w, dvn, cu_seqlens, chunk_indices, scale, T, NT, *, num_chunks,
                 **meta):
    """Launch step 1, ``_chunk_wu_kernel``, on (chunks, value heads): writes ``w`` and Aqk^T dO into ``dvn``."""
    _chunk_wu_kernel[(num_chunks, meta["HV"])](q, k, gamma, beta, tmat, do, w, dvn, cu_seqlens, chunk_indices,
                                               scale, T, NT, **meta)


def chunk_dh_bwd(q, k, gamma, w, do, dht, dh0, dh, dvn, cu_seqlens, chunk_offsets, scale, T, *, num_seqs, use_dht,
                 store_dh0, **meta):
    """Launch step 2, ``_chunk_dh_kernel``, on (sequence, value head, value block): writes ``dh``,
    completes ``dvn`` and, with ``store_dh0``, the initial state's gradient; reads ``dht`` with
    ``use_dht`` (``dht``/``dh0`` otherwise placeholders)."""
    V, HV = meta["V"], meta["HV"]
    # BV >= 32: at BV = 16 Triton 3.6 on the H200 compiles _chunk_dh_kernel into an
    # out-of-bounds shared-memory read (compute-sanitizer: "Invalid __shared__ read"
    # in the dot of _mm; illegal memory access for every N*H < 33 with V = 128)
    BV = value_block(V, num_seqs * HV, k.device, min_block=32)
    _chunk_dh_kernel[(V // BV * num_seqs * HV,)](
        q, k, gamma, w, do, dht, dh0, dh, dvn, cu_seqlens, chunk_offsets, scale, T,
        BV=BV, USE_DHT=use_dht, STORE_DH0=store_dh0, **meta)


def chunk_wy_bwd(q, k, v, gamma, beta, tmat, v_new, dvn, do, dv, db_part, dgam_part, scratch, cu_seqlens,
                 chunk_indices, scale, T, NT, *, num_chunks, **meta):
    """Launch step 3, ``_chunk_bwd_wy_kernel``, on (chunks, value heads), :data:`PARALLEL_BV` value
    columns at a time: writes ``dv``, ``scratch`` (Ms and B) and step 3's dbeta and dgamma terms."""
    _chunk_bwd_wy_kernel[(num_chunks, meta["HV"])](
        q, k, v, gamma, beta, tmat, v_new, dvn, do, dv, db_part, dgam_part, scratch, cu_seqlens, chunk_indices,
        scale, T, NT, BV=min(meta["V"], PARALLEL_BV), **meta)


def chunk_dqk_bwd(q, k, gamma, beta, tmat, h, v_new, dh, dvn, do, scratch, dq, dk, db_part, dgam_part, cu_seqlens,
                  chunk_indices, scale, T, NT, *, num_chunks, BK, **meta):
    """Launch step 4, ``_chunk_bwd_dqk_kernel``, on (chunk x key block of ``BK`` columns, value
    heads), :data:`PARALLEL_BV` value columns at a time: writes ``dq``, ``dk`` and each key block's
    dbeta and dgamma terms."""
    _chunk_bwd_dqk_kernel[(meta["K"] // BK * num_chunks, meta["HV"])](
        q, k, gamma, beta, tmat, h, v_new, dh, dvn, do, scratch, dq, dk, db_part, dgam_part,
        cu_seqlens, chunk_indices, scale, T, NT, BK=BK, BV=min(meta["V"], PARALLEL_BV), **meta)


def group_sum(x, y):
    """Launch ``_group_sum_kernel`` and return y ``[B, T, H, K]`` (any float dtype): x
    ``[B, T, HV, K]`` float32 summed over each key head's HV / H consecutive value heads."""
    rows, K = y.numel() // y.shape[-1], y.shape[-1]
    BR = 16
    _group_sum_kernel[(triton.cdiv(rows, BR),)](x, y, rows, G=x.shape[-2] // y.shape[-2], K=K, BR=BR)
    return y


def chunk_gate_bwd(db3, dgam3, db4, dgam4, dg, dbeta, cu_seqlens, chunk_indices, T, NT, *, num_chunks, HV, BT, NK,
                   IS_VARLEN):
    """Launch step 5, ``_chunk_bwd_gate_kernel``, on (chunks, value heads): writes ``dg`` and ``dbeta``."""
    _chunk_bwd_gate_kernel[(num_chunks, HV)](db3, dgam3, db4, dgam4, dg, dbeta, cu_seqlens, chunk_indices, T, NT,
                                             HV=HV, BT=BT, NK=NK, IS_VARLEN=IS_VARLEN)
