"""Chunked gated delta rule forward in Triton (chunk C = 64).

Notation: gamma = in-chunk cumulative sum of g, Gamma_rs = exp(gamma_r - gamma_s),
A = strict_lower(diag(beta) K K^T * Gamma), T = (I + A)^-1 (the UT transform
of the WY representation), S = the K x V state entering a chunk. Per chunk

    V_new = T diag(beta) (V - diag(e^gamma) K S)      (= U - W S)
    O     = scale diag(e^gamma) Q S + Aqk V_new,      Aqk = scale (Q K^T * Gamma) lower incl. diagonal
    S'    = e^{gamma_C} S + K^T diag(e^{gamma_C - gamma}) V_new.

Three kernels:

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
   SM) so that small B*H still fills the GPU.
3. ``_chunk_output_kernel``, one program per (chunk, value head), in parallel over
   the chunks: O from Q, K, gamma and the stored state and V_new.

Heads: q and k have H heads, v, g, beta, the states and o HV (a multiple of H;
grouped value attention when HV > H). Everything per head above is per value
head; value head j reads the keys and queries of head j // (HV // H), so
HV = H is the plain layout with no copy. Grids: the (chunk, head) kernels put
the chunks on axis 0 (limit 2^31 - 1) and the value heads on axis 1 (65535,
``validate.MAX_HEADS``); the sequential kernel puts (sequence, head, value
block) on axis 0, so any number of packed sequences fits.

Measured on the H200 (B4 T8192 H16, bf16, forward, same process): with the
output fused into the sequential pass and V_new computed there as T times a
residual (three products per chunk on the recurrence's path, T read in
float32), that pass took 757 us of a 0.92 ms forward; split out, the pass
alone still took 581 us; with W and U formed in the prepare kernel it took
235 us (prepare 277 us, output 265 us, 0.81 ms in all).

Precision: products with the 16-bit inputs (K K^T, Q K^T) round nothing extra;
the products of W, U, the state pass and the output (T's blocks times K and V,
W S, K^T V_new, Q S, Aqk V_new) take float16 operands with float32 accumulation
(:func:`product_dtype`: for 16-bit inputs and K = 128): float16 keeps TF32's 11-bit significand at twice the
tensor-core rate. In the interpreter at T = 1000 (K = 64) the output's
RMSE/RMS against float64 stayed 0.0033 in every gate regime and the final
state's rose from 0.0000 to 0.0004; bfloat16 operands raised the output's to
0.009-0.011. Every operand is of the order of v (keys are unit vectors) or
carries a decay <= 1, so float16's range (65504) bounds |v|: without an initial
state. A caller's initial state can hold any float32 value, so with one the
products stay float32 (:func:`product_dtype`; at K = 128 with 16-bit inputs a
state of 1e5 in float16 products gave NaN outputs). W and U, the chunk
states and V_new are stored in the products' operand dtype (float16 or float32),
so storing them rounds W, the states and V_new no further than the products that
read them do; U is rounded once to float16 where the former state kernel
rounded the residual that T multiplied instead (in the interpreter at K = 128,
T up to 300, every gate regime and packed sequences, the output's RMSE/RMS
stayed 0.0033 and the final state's at most 0.0004). Never in
bfloat16: the chunk states and V_new rounded to bfloat16 before the output products raised
the output's RMSE/RMS against the float64 reference from 0.0033 to 0.0062 at
T = 1000 in every gate regime (interpreter), over the 0.005 target. On the
H200 at the study's shapes the output's RMSE/RMS is 0.0017 with float16
products (0.0020 with TF32 ones).

Every decay is exp of a difference gamma_r - gamma_s <= 0, never a ratio of
exponentials, so strong gates stay finite. :func:`chunk_gated_delta_rule_fwd`
also returns the per-chunk intermediates (:class:`ChunkIntermediates`) that
the backward pass reads.
"""

from __future__ import annotations

import dataclasses
import itertools

import torch
import triton
import triton.language as tl

from kernels.gdn._triton import (_chunk_bounds, _inv_unit_lower16, _kkt_block, _load_rows, _load_t, _mm,
                                 _seq_bounds, _solve_mm, _store_rows)
from kernels.launch import interpreting, maybe_autotune, value_block
from kernels.gdn.validate import cached_per_tensor, check_inputs, checked_offsets, l2norm

CHUNK_SIZE = 64
_PREP_CONFIGS = [triton.Config({}, num_warps=w, num_stages=1) for w in (2, 4, 8)]


def product_dtype(dtype: torch.dtype, head_dim: int, initial_state: bool = False):
    """Operand dtype (a Triton constexpr) of the GDN kernels' float32 products for inputs of
    ``dtype`` with key dimension ``head_dim``, with or without a caller's ``initial_state``.

    With 16-bit inputs, K = 128 and no initial state the products that the kernels would
    feed float32 operands take float16 ones (TF32's significand at twice its tensor-core
    rate): the state then grows from v alone, of v's order (see the module docstring).
    A caller's initial state is any finite float32 tensor: float16 (largest 65504) would
    turn a state of 1e5 into inf and every output into NaN, so with one the products stay
    float32 (TF32 on the GPU, float32's range), decided from the argument alone, without
    reading the state. With float32 inputs they stay float32 (TF32 on the GPU, exact in the
    interpreter), and with K = 64 too: there Triton 3.6 on the H200 compiled the float16
    kernels into an illegal memory access (packed sequences, K = V = 64).
    """
    fp16 = dtype != torch.float32 and head_dim == 128 and not initial_state
    return tl.float16 if fp16 else tl.float32


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


@dataclasses.dataclass
class ChunkIntermediates:
    """Per-chunk quantities of the chunked forward (token layout, flattened B*T).

    Attributes:
        gamma: ``[B*T, HV]`` float32, in-chunk cumulative sum of g (HV value heads).
        tmat: ``[B*T, HV, C]`` float32, row r of T = (I + A)^-1 of r's chunk, or None
            unless ``store_chunk_states``.
        h: ``[num_chunks, HV, K, V]`` state entering each chunk.
        v_new: ``[B*T, HV, V]`` V_new. Both float16 when the products take
            float16 operands (:func:`product_dtype`), else float32.
        chunk_offsets: ``[N + 1]`` int32 first chunk of each sequence in ``h``.
        chunk_indices: ``[num_chunks, 2]`` int32 (sequence, chunk within it) of
            packed sequences, or None without ``cu_seqlens``.
    """

    gamma: torch.Tensor
    tmat: torch.Tensor | None
    h: torch.Tensor
    v_new: torch.Tensor
    chunk_offsets: torch.Tensor
    chunk_indices: torch.Tensor | None


def _chunk_tables(B, T, cu_seqlens, device):
    """(chunk_indices [NC, 2] int32 (sequence, chunk in sequence), chunk_offsets [N+1] int32, NC)."""
    if cu_seqlens is None:
        nt = triton.cdiv(T, CHUNK_SIZE)
        offsets = torch.arange(B + 1, dtype=torch.int32, device=device) * nt
        return None, offsets, B * nt
    return _packed_chunk_tables(cu_seqlens, T)


@cached_per_tensor
def _packed_chunk_tables(cu_seqlens, T):
    """:func:`_chunk_tables` of packed sequences, built on the host from the checked
    boundaries and copied to ``cu_seqlens``' device once per tensor and version."""
    cs = checked_offsets(cu_seqlens, T)
    nts = [triton.cdiv(b - a, CHUNK_SIZE) for a, b in zip(cs, cs[1:])]
    offsets = list(itertools.accumulate(nts, initial=0))
    indices = [(n, i) for n, nt in enumerate(nts) for i in range(nt)]
    dev = cu_seqlens.device
    return (torch.tensor(indices, dtype=torch.int32, device=dev).reshape(-1, 2),
            torch.tensor(offsets, dtype=torch.int32, device=dev), offsets[-1])


def chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, initial_state, output_final_state,
                               cu_seqlens=None, store_chunk_states=False):
    """Chunked forward on validated, contiguous inputs; also returns the intermediates.

    Args: as :func:`chunk_gated_delta_rule` (g already float32, q/k normalised,
        ``scale`` a float), plus ``store_chunk_states`` to also write T, which the
        backward pass reads with the chunk states and V_new.
        Memory: besides o, W and U (K + V elements per token and head), V_new (V)
        and the state entering every chunk (K * V per chunk and head), in the
        products' operand dtype, and with ``store_chunk_states`` T (64 float32
        per token and head); all but o are freed when the caller drops them.
    Returns:
        ``(o [B, T, HV, V], final_state [N, HV, K, V] float32 or None, ChunkIntermediates)``.
    """
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    dev, C = q.device, CHUNK_SIZE
    indices, offsets, NC = _chunk_tables(B, T, cu_seqlens, dev)
    gamma = torch.empty(B * T, HV, dtype=torch.float32, device=dev)
    DD = product_dtype(q.dtype, K, initial_state is not None)
    kept = torch.float16 if DD == tl.float16 else torch.float32   # read only by products
    tmat = torch.empty(B * T, HV, C, dtype=torch.float32, device=dev) if store_chunk_states else None
    w = torch.empty(B * T, HV, K, dtype=kept, device=dev)
    u = torch.empty(B * T, HV, V, dtype=kept, device=dev)
    h = torch.empty(NC, HV, K, V, dtype=kept, device=dev)
    v_new = torch.empty(B * T, HV, V, dtype=kept, device=dev)
    o = torch.empty_like(v)
    ht = torch.empty(N, HV, K, V, dtype=torch.float32, device=dev) if output_final_state else None
    inter = ChunkIntermediates(gamma, tmat, h, v_new, offsets, indices)
    if NC == 0:
        if ht is not None:
            ht.copy_(initial_state) if initial_state is not None else ht.zero_()
        return o, ht, inter
    dummy = gamma
    varlen = cu_seqlens is not None
    cu = cu_seqlens if varlen else dummy
    idx = indices if varlen else dummy
    NT = triton.cdiv(T, C)
    meta = dict(H=H, HV=HV, K=K, V=V, BT=C, IS_VARLEN=varlen, UPCAST=interpreting(), DD=DD)
    _chunk_prepare_kernel[(NC, HV)](k, v, g, beta, gamma, tmat if tmat is not None else dummy, w, u, cu, idx,
                                    T, NT, STORE_T=tmat is not None, **meta)
    BV = value_block(V, N * HV, dev)
    _chunk_state_kernel[(V // BV * N * HV,)](
        k, w, u, gamma, h, v_new, initial_state if initial_state is not None else dummy,
        ht if ht is not None else dummy, cu, offsets, T, BV=BV,
        USE_H0=initial_state is not None, STORE_HT=ht is not None, **meta)
    _chunk_output_kernel[(NC, HV)](q, k, gamma, h, v_new, o, cu, idx, scale, T, NT, **meta)
    return o, ht, inter


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, use_qk_l2norm_in_kernel=False, check_gate=False):
    """Gated delta rule forward by the chunked algorithm (chunk 64), three Triton kernels.

    Args (flash-linear-attention's names and order):
        q, k: ``[B, T, H, K]`` float16/bfloat16/float32, L2-normalised (or set
            ``use_qk_l2norm_in_kernel``); K in 16, 32, 64, 128.
        v: ``[B, T, HV, V]``, q's dtype; V in 16, 32, 64, 128; HV a multiple of
            H (grouped value attention when HV > H: value head j reads key head
            ``j // (HV // H)``, flash-linear-attention's layout).
        g: ``[B, T, HV]`` log decay per token (<= 0), any float dtype.
        beta: ``[B, T, HV]`` in (0, 1), any float dtype.
        scale: output scale (default ``K ** -0.5``).
        initial_state: optional ``[N, HV, K, V]`` float32 state, any finite
            values (with one the products stay float32: :func:`product_dtype`).
        output_final_state: also return the ``[N, HV, K, V]`` float32 final state.
        cu_seqlens: optional ``[N + 1]`` int32/int64 offsets of packed
            sequences (B == 1); chunks restart at every sequence start.
        use_qk_l2norm_in_kernel: L2-normalise q and k first (float32, eps 1e-6).
        check_gate: check g <= 0 before launching (reads g, so the host waits
            for the GPU); off by default, as flash-linear-attention never reads g.
    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]`` in v's dtype, final_state or None.
        Differentiable (q, k, v, g, beta, initial_state) when any input
        requires grad: the Triton backward of :mod:`kernels.gdn.chunk_bwd`.
    Raises:
        TypeError/ValueError from :func:`kernels.gdn.validate.check_inputs`
        (shapes, dtypes, devices, cu_seqlens, head dims), ValueError for g > 0
        when ``check_gate`` (:func:`kernels.gdn.validate.gate_check`).
    Method: Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025 (WY
    representation with the UT transform), as in flash-linear-attention.
    """
    B, T, H, HV, K, V, N = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens, check_gate=check_gate)
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

        o, ht = ChunkGatedDeltaRuleFunction.apply(q, k, v, g, beta, scale, initial_state, output_final_state,
                                                  cu_seqlens)
    else:
        o, ht, _ = chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, initial_state, output_final_state,
                                              cu_seqlens)
    return o, ht
