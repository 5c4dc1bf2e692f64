"""Triton device functions shared by the GDN kernels: tile loads and stores in
the token layout ``[tokens, heads, width]``, the dots with explicit rounding,
the unit lower-triangular inverse, and where a sequence or chunk starts."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _mm(a, b, DT: tl.constexpr, UPCAST: tl.constexpr):
    """tl.dot of a and b rounded to DT, accumulated in float32 (DT float32: TF32 tensor
    cores on the GPU). UPCAST (set under the interpreter, whose dot misreads 16-bit
    floats) feeds the rounded values as float32."""
    a = a.to(DT)
    b = b.to(DT)
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b)


@triton.jit
def _dot32(a, b):
    """Full float32 product (no TF32 rounding)."""
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _load_rows(ptr, rows, mask, stride, cols):
    """Rows ``rows`` (token indices, masked by ``mask``) x columns ``cols`` of a [tokens, stride] view."""
    return tl.load(ptr + rows[:, None] * stride + cols[None, :], mask=mask[:, None], other=0.0)


@triton.jit
def _load_t(ptr, rows, mask, stride, cols):
    """Transposed tile ``[cols, rows]`` of a [tokens, stride] view (rows = token indices masked by ``mask``)."""
    return tl.load(ptr + rows[None, :] * stride + cols[:, None], mask=mask[None, :], other=0.0)


@triton.jit
def _store_rows(ptr, rows, mask, stride, cols, x):
    tl.store(ptr + rows[:, None] * stride + cols[None, :], x.to(ptr.dtype.element_ty), mask=mask[:, None])


@triton.jit
def _seq_bounds(i_n, cu_seqlens, chunk_offsets, T, BT: tl.constexpr, IS_VARLEN: tl.constexpr):
    """(first token, end token, first chunk) of sequence ``i_n``, int64."""
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
        c_off = tl.load(chunk_offsets + i_n).to(tl.int64)
    else:
        bos = i_n.to(tl.int64) * T
        eos = bos + T
        c_off = i_n.to(tl.int64) * tl.cdiv(T, BT)
    return bos, eos, c_off


@triton.jit
def _chunk_bounds(i_c, cu_seqlens, chunk_indices, T, NT, BT: tl.constexpr, IS_VARLEN: tl.constexpr):
    """(first token of chunk ``i_c``, end token of its sequence), int64; chunk_indices
    holds (sequence, chunk within it) pairs of packed sequences."""
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
    return bos + i_t * BT, eos


@triton.jit
def _kkt_block(ki, kj, bi, gi, gj, DIAG: tl.constexpr, DT: tl.constexpr, UPCAST: tl.constexpr):
    """beta_i * (k_i k_j^T) * exp(gamma_i - gamma_j), strictly lower when DIAG (16 x 16)."""
    d = gi[:, None] - gj[None, :]
    if DIAG:
        r = tl.arange(0, 16)
        d = tl.where(r[:, None] > r[None, :], d, float("-inf"))
    return _mm(ki, tl.trans(kj), DT, UPCAST) * bi[:, None] * tl.exp(d)


@triton.jit
def _solve_mm(a, b, DD: tl.constexpr, UPCAST: tl.constexpr):
    """Product of the triangular solve: full float32 when DD is float32, else DD operands."""
    if DD == tl.float32:
        return _dot32(a, b)
    else:
        return _mm(a, b, DD, UPCAST)


@triton.jit
def _inv_unit_lower16(A, DD: tl.constexpr, UPCAST: tl.constexpr):
    """(I + A)^-1 for a strictly lower-triangular 16 x 16 float32 A.

    A is nilpotent (A^16 = 0), so (I + A)^-1 = sum_{j<16} (-A)^j
    = (I - A)(I + A^2)(I + A^4)(I + A^8): six 16 x 16 products (``_solve_mm``)
    and no sequential row-by-row substitution.
    """
    r = tl.arange(0, 16)
    n = -A
    p = (r[:, None] == r[None, :]).to(tl.float32) + n
    s = _solve_mm(n, n, DD, UPCAST)
    p += _solve_mm(p, s, DD, UPCAST)
    s = _solve_mm(s, s, DD, UPCAST)
    p += _solve_mm(p, s, DD, UPCAST)
    s = _solve_mm(s, s, DD, UPCAST)
    p += _solve_mm(p, s, DD, UPCAST)
    return p
