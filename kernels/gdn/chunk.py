"""Chunked gated delta rule in Triton (chunk C = 64): the public op, its autograd
Function, and the forward and backward passes that run the kernels.

Method: the gated delta rule of Yang, Kautz, Hatamizadeh ("Gated Delta
Networks: Improving Mamba2 with Delta Rule", ICLR 2025) in its chunked form,
the WY representation with the UT transform, as flash-linear-attention
computes it and lays it out (``fla/ops/gated_delta_rule/chunk.py``): this
module holds :func:`chunk_gated_delta_rule`, :class:`ChunkGatedDeltaRuleFunction`,
:func:`chunk_gated_delta_rule_fwd` and :func:`chunk_gated_delta_rule_bwd`; the
kernels of each direction and their launches are in :mod:`kernels.gdn.chunk_fwd`
(three kernels) and :mod:`kernels.gdn.chunk_bwd` (five), their device functions
in :mod:`kernels.gdn._triton`, the chunk size in :mod:`kernels.gdn.constants`.

Notation: gamma = in-chunk cumulative sum of g, Gamma_rs = exp(gamma_r - gamma_s),
A = strict_lower(diag(beta) K K^T * Gamma), T = (I + A)^-1 (the UT transform
of the WY representation), S = the K x V state entering a chunk. Per chunk

    V_new = T diag(beta) (V - diag(e^gamma) K S)      (= U - W S)
    O     = scale diag(e^gamma) Q S + Aqk V_new,      Aqk = scale (Q K^T * Gamma) lower incl. diagonal
    S'    = e^{gamma_C} S + K^T diag(e^{gamma_C - gamma}) V_new.

The forward forms W = T diag(beta e^gamma) K, U = T diag(beta) V and T for
every chunk at once, walks the chunks in order for the states, then forms
the outputs of every chunk at once. The backward differentiates each chunk's
computation analytically from the forward's intermediates
(:class:`ChunkIntermediates`), walking the chunks in reverse for the state's
gradient.

Heads: q and k have H heads, v, g, beta, the states and o HV (a multiple of H;
grouped value attention when HV > H). Everything per head above is per value
head; value head j reads the keys and queries of head j // (HV // H), so
HV = H is the plain layout with no copy.

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
products (0.0020 with TF32 ones). The backward's products take the forward's
operand dtype, read from the dtype the forward kept its states in.

Every decay is exp of a difference gamma_r - gamma_s <= 0, never a ratio of
exponentials, so strong gates stay finite.

Memory: the forward of the autograd Function keeps its intermediates
(:class:`ChunkIntermediates`): gamma and T in float32, the
chunk states and V_new in float16 with float16 products (every later use is a
float16-operand product, or S * dS' upcast), else float32: with p bytes per
kept element, (C + 1) * 4 + V * p bytes per token and head plus K * V * p per
chunk and head. The backward adds W (K * p bytes per token and head), the
scratch (2C * p), dV_new (V * p) and dS' (K * V * p per chunk and head).
"""

from __future__ import annotations

import dataclasses
import itertools

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from kernels.gdn.chunk_bwd import (chunk_dh_bwd, chunk_dqk_bwd, chunk_gate_bwd, chunk_wu_bwd, chunk_wy_bwd,
                                   group_sum)
from kernels.gdn.chunk_fwd import chunk_output_fwd, chunk_prepare_fwd, chunk_state_fwd
from kernels.gdn.constants import CHUNK_SIZE
from kernels.gdn.validate import cached_per_tensor, check_inputs, checked_offsets, l2norm
from kernels.core.launch import interpreting


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
    chunk_prepare_fwd(k, v, g, beta, gamma, tmat if tmat is not None else dummy, w, u, cu, idx, T, NT,
                      num_chunks=NC, store_t=tmat is not None, **meta)
    chunk_state_fwd(k, w, u, gamma, h, v_new, initial_state if initial_state is not None else dummy,
                    ht if ht is not None else dummy, cu, offsets, T, num_seqs=N,
                    use_h0=initial_state is not None, store_ht=ht is not None, **meta)
    chunk_output_fwd(q, k, gamma, h, v_new, o, cu, idx, scale, T, NT, num_chunks=NC, **meta)
    return o, ht, inter


def chunk_gated_delta_rule_bwd(q, k, v, beta, scale, initial_state, cu_seqlens, inter, do, dht):
    """Gradients of the chunked forward from its saved intermediates.

    Args:
        q, k, v, beta, scale, initial_state, cu_seqlens: the validated,
            contiguous forward inputs (q/k already normalised; q, k
            ``[B, T, H, K]``, v ``[B, T, HV, V]``).
        inter: :class:`ChunkIntermediates` of the forward run
            with ``store_chunk_states=True`` (gamma replaces g; its chunk tables
            are reused; the products take the operand dtype its states were kept in).
        do: ``[B, T, HV, V]`` gradient of the output (v's dtype or any float).
        dht: ``[N, HV, K, V]`` gradient of the final state, or None (zero).
    Returns:
        ``(dq, dk, dv, dg, dbeta, dh0)``: dq, dk ``[B, T, H, K]`` in q's dtype
        (with HV > H each the sum over the value heads that read its key head,
        formed in float32), dv in v's, dg and dbeta float32 ``[B, T, HV]``,
        dh0 float32 ``[N, HV, K, V]`` or None without an initial state.
    Raises:
        ValueError: ``inter`` lacks T (a forward run without ``store_chunk_states``).
    """
    if inter.tmat is None:
        raise ValueError("inter has no T: run chunk_gated_delta_rule_fwd with store_chunk_states=True")
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    dev, C = q.device, CHUNK_SIZE
    indices, offsets, NC = inter.chunk_indices, inter.chunk_offsets, inter.h.shape[0]
    do = do.to(v.dtype).contiguous()
    if HV == H:
        dq, dk = torch.empty_like(q), torch.empty_like(k)
    else:   # one share per value head, summed over each key head's group below
        dq, dk = (torch.empty(B, T, HV, K, dtype=torch.float32, device=dev) for _ in range(2))
    dv = torch.empty_like(v)
    dg = torch.empty(B, T, HV, dtype=torch.float32, device=dev)
    dbeta = torch.empty(B, T, HV, dtype=torch.float32, device=dev)
    dh0 = torch.empty(N, HV, K, V, dtype=torch.float32, device=dev) if initial_state is not None else None
    if NC == 0:
        if dh0 is not None:
            dh0.copy_(dht) if dht is not None else dh0.zero_()
        return torch.zeros_like(q), torch.zeros_like(k), dv, dg, dbeta, dh0
    dh = torch.empty(NC, HV, K, V, dtype=inter.h.dtype, device=dev)      # read only by products (and S * dS')
    dvn = torch.empty(B * T, HV, V, dtype=inter.h.dtype, device=dev)
    w = torch.empty(B * T, HV, K, dtype=inter.h.dtype, device=dev)        # read only by products
    scratch = torch.empty(NC, HV, 2, C, C, dtype=inter.h.dtype, device=dev)   # read only by products
    BK = min(K, 64)
    db3, dgam3 = (torch.empty(B * T, HV, dtype=torch.float32, device=dev) for _ in range(2))
    db4, dgam4 = (torch.empty(B * T, HV, K // BK, dtype=torch.float32, device=dev) for _ in range(2))
    dummy = inter.gamma
    varlen = cu_seqlens is not None
    cu = cu_seqlens if varlen else dummy
    idx = indices if varlen else dummy
    NT = triton.cdiv(T, C)
    DD = tl.float16 if inter.h.dtype == torch.float16 else tl.float32   # the forward's product_dtype
    meta = dict(H=H, HV=HV, K=K, V=V, BT=C, IS_VARLEN=varlen, UPCAST=interpreting(), DD=DD)
    chunk_wu_bwd(q, k, inter.gamma, beta, inter.tmat, do, w, dvn, cu, idx, scale, T, NT, num_chunks=NC, **meta)
    chunk_dh_bwd(q, k, inter.gamma, w, do, dht.contiguous() if dht is not None else dummy,
                 dh0 if dh0 is not None else dummy, dh, dvn, cu, offsets, scale, T,
                 num_seqs=N, use_dht=dht is not None, store_dh0=dh0 is not None, **meta)
    chunk_wy_bwd(q, k, v, inter.gamma, beta, inter.tmat, inter.v_new, dvn, do, dv, db3, dgam3, scratch, cu, idx,
                 scale, T, NT, num_chunks=NC, **meta)
    chunk_dqk_bwd(q, k, inter.gamma, beta, inter.tmat, inter.h, inter.v_new, dh, dvn, do, scratch, dq, dk, db4,
                  dgam4, cu, idx, scale, T, NT, num_chunks=NC, BK=BK, **meta)
    chunk_gate_bwd(db3, dgam3, db4, dgam4, dg, dbeta, cu, idx, T, NT, num_chunks=NC, HV=HV, BT=C, NK=K // BK,
                   IS_VARLEN=varlen)
    if HV != H:
        dq, dk = (group_sum(x, torch.empty_like(y)) for x, y in ((dq, q), (dk, k)))
    return dq, dk, dv, dg, dbeta, dh0


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    """Autograd Function of the chunked gated delta rule (Triton forward and backward).

    ``apply(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens)``
    with validated, contiguous inputs (g float32, ``scale`` a float) returns
    ``(o, final_state or None)``; gradients flow to q, k, v, g, beta and
    initial_state. The forward saves its per-chunk intermediates (see the
    module docstring); the backward is :func:`chunk_gated_delta_rule_bwd`.
    """

    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens):
        o, ht, inter = chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, initial_state, output_final_state,
                                                  cu_seqlens, store_chunk_states=True)
        ctx.save_for_backward(q, k, v, beta, initial_state, cu_seqlens, inter.gamma, inter.tmat, inter.h,
                              inter.v_new, inter.chunk_offsets, inter.chunk_indices)
        ctx.scale = scale
        ctx.set_materialize_grads(False)
        return o, ht

    @staticmethod
    @once_differentiable
    def backward(ctx, do, dht):
        q, k, v, beta, h0, cu, gamma, tmat, h, v_new, offsets, indices = ctx.saved_tensors
        if do is None:
            do = torch.zeros_like(v)
        inter = ChunkIntermediates(gamma, tmat, h, v_new, offsets, indices)
        dq, dk, dv, dg, dbeta, dh0 = chunk_gated_delta_rule_bwd(q, k, v, beta, ctx.scale, h0, cu, inter, do, dht)
        return dq, dk, dv, dg, dbeta.to(beta.dtype), None, dh0, None, None


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
        requires grad: the Triton backward (:func:`chunk_gated_delta_rule_bwd`).
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
        o, ht = ChunkGatedDeltaRuleFunction.apply(q, k, v, g, beta, scale, initial_state, output_final_state,
                                                  cu_seqlens)
    else:
        o, ht, _ = chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, initial_state, output_final_state,
                                              cu_seqlens)
    return o, ht
