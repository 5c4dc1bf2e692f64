"""Plain-PyTorch references of the gated delta rule forward.

Both functions compute, for each sequence and head (state ``S`` is K x V)::

    S   = exp(g_t) * S                   # decay first
    u_t = beta_t * (v_t - S^T k_t)       # delta-rule error against the decayed state
    S   = S + k_t u_t^T
    o_t = scale * S^T q_t

(Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta
Rule", ICLR 2025; flash-linear-attention's layout). ``naive_recurrent_gated_delta_rule``
walks the tokens one by one; ``naive_chunk_gated_delta_rule`` evaluates the
same recurrence in the chunked (WY) form with a dense triangular solve. Both
accumulate in ``acc_dtype`` (float64 by default) and serve as the references the
Triton kernels are checked against.
"""

from __future__ import annotations

import functools

import torch

from kernels.gdn.validate import check_inputs, l2norm, seq_bounds


def _value_heads(q, k, HV):
    """q and k ``[B, T, H, K]`` repeated to the ``HV`` value heads (value head j reads key
    head ``j // (HV // H)``, flash-linear-attention's GVA); autograd sums their gradients back."""
    G = HV // q.shape[2]
    return (q, k) if G == 1 else (q.repeat_interleave(G, dim=2), k.repeat_interleave(G, dim=2))


def state_dtype(q):
    """dtype of the returned final state: float32, or float64 for float64 inputs (gradcheck)."""
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def naive_recurrent_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                                     output_final_state=False, cu_seqlens=None,
                                     use_qk_l2norm_in_kernel=False, acc_dtype=torch.float64):
    """Token-by-token gated delta rule (the definition).

    Args:
        q, k: ``[B, T, H, K]`` queries and keys (L2-normalised unless
            ``use_qk_l2norm_in_kernel``), float16/bfloat16/float32 (float64
            too, then the final state is float64: for gradcheck).
        v: ``[B, T, HV, V]`` values, same dtype; HV a multiple of H (GVA:
            value head j reads key head ``j // (HV // H)``).
        g: ``[B, T, HV]`` log decay per token (<= 0), any float dtype.
        beta: ``[B, T, HV]`` delta-rule step in (0, 1), any float dtype.
        scale: output scale, default ``K ** -0.5``.
        initial_state: optional ``[N, HV, K, V]`` float32 state before the first
            token (N = B, or the number of sequences with ``cu_seqlens``).
        output_final_state: also return the state after the last token.
        cu_seqlens: optional ``[N + 1]`` int32/int64 offsets of packed
            sequences (B must be 1); each sequence starts from its own state.
        use_qk_l2norm_in_kernel: L2-normalise q and k over the last axis first.
        acc_dtype: accumulation dtype (float64 for the reference, float32 for
            the timed naive baseline).
    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]`` in v's dtype; final_state
        ``[N, HV, K, V]`` float32, or None when ``output_final_state`` is False.
    Raises:
        ValueError / TypeError on bad shapes, dtypes, devices, cu_seqlens or g > 0
        (see :func:`kernels.gdn.validate.check_inputs`).
    """
    B, T, _, H, K, V, N = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens, allow_float64=True)
    scale = K ** -0.5 if scale is None else scale
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    q, k = _value_heads(q, k, H)   # H: the value heads from here on
    qf, kf, vf = (x.to(acc_dtype).reshape(B * T, H, -1) for x in (q, k, v))
    gf, bf = (x.to(acc_dtype).reshape(B * T, H) for x in (g, beta))
    o = torch.zeros(B * T, H, V, dtype=acc_dtype, device=q.device)
    bounds = seq_bounds(B, T, cu_seqlens)
    # all sequences advance together, one token per step, masked when finished
    lens = torch.tensor([e - s for s, e in bounds], device=q.device)
    starts = torch.tensor([s for s, _ in bounds], device=q.device)
    S = torch.zeros(N, H, K, V, dtype=acc_dtype, device=q.device)
    if initial_state is not None:
        S = S + initial_state.to(acc_dtype)
    for t in range(int(lens.max().item()) if N else 0):
        live = t < lens
        idx = (starts + t).clamp(max=B * T - 1)
        qt, kt, vt, gt, bt = qf[idx], kf[idx], vf[idx], gf[idx], bf[idx]
        S_new = S * gt.exp()[..., None, None]
        u = bt[..., None] * (vt - torch.einsum("nhkv,nhk->nhv", S_new, kt))
        S_new = S_new + kt[..., :, None] * u[..., None, :]
        ot = scale * torch.einsum("nhkv,nhk->nhv", S_new, qt)
        S = torch.where(live[:, None, None, None], S_new, S)
        o[idx[live]] = ot[live]
    final = S.to(state_dtype(q)) if output_final_state else None
    return o.reshape(B, T, H, V).to(v.dtype), final


#: The token loop as the study times it (implementation ``naive``):
#: :func:`naive_recurrent_gated_delta_rule` with float32 accumulation (float64 is the reference's).
timed_naive_recurrent_gated_delta_rule = functools.partial(naive_recurrent_gated_delta_rule, acc_dtype=torch.float32)


def naive_chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                                 output_final_state=False, cu_seqlens=None,
                                 use_qk_l2norm_in_kernel=False, chunk_size=64,
                                 acc_dtype=torch.float64):
    """The gated delta rule in chunked (WY) form, in PyTorch, one loop step per chunk.

    Same arguments, returns and errors as :func:`naive_recurrent_gated_delta_rule`
    plus ``chunk_size``. Per chunk (gamma = in-chunk cumulative sum of g,
    Gamma_rs = exp(gamma_r - gamma_s)): A = strict_lower(diag(beta) K K^T * Gamma),
    T = (I + A)^-1 (triangular solve), W = T diag(beta e^gamma) K,
    U = T diag(beta) V; then V_new = U - W S,
    O = scale (diag(e^gamma) Q S + (Q K^T * Gamma, lower incl. diagonal) V_new),
    S <- e^{gamma_C} S + K^T diag(e^{gamma_C - gamma}) V_new
    (flash-linear-attention's chunked algorithm). Exponents are always taken
    of differences gamma_r - gamma_s <= 0, so strong gates stay finite. It
    needs T/chunk_size sequential steps instead of T, which makes it the fast
    float64 reference for long sequences on the GPU.
    """
    B, T, _, H, K, V, N = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens, allow_float64=True)
    scale = K ** -0.5 if scale is None else scale
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    q, k = _value_heads(q, k, H)   # H: the value heads from here on
    dev = q.device
    C = chunk_size
    qf, kf, vf = (x.to(acc_dtype).reshape(B * T, H, -1) for x in (q, k, v))
    gf, bf = (x.to(acc_dtype).reshape(B * T, H) for x in (g, beta))
    finals, outs = [], []
    eye = torch.eye(C, dtype=acc_dtype, device=dev)
    strict = torch.ones(C, C, dtype=torch.bool, device=dev).tril(-1)
    incl = torch.ones(C, C, dtype=torch.bool, device=dev).tril()
    lengths = [e - s for s, e in seq_bounds(B, T, cu_seqlens)]
    # split/unbind and cat/stack rather than slicing and slice assignment: autograd's backward of
    # each slice (or assignment into one) touches the whole tensor, which made the reference's
    # gradients quadratic in the number of chunks and of sequences
    pieces = zip(*(x.split(lengths) for x in (qf, kf, vf, gf, bf)))
    for n, (L, (qs, ks, vs, gs, bs)) in enumerate(zip(lengths, pieces)):
        NT = -(-L // C)
        pad = NT * C - L

        def chunks(x):  # [L, H, ...] -> [H, NT, C, ...], zero padded
            x = torch.nn.functional.pad(x.movedim(0, -1), (0, pad)).movedim(-1, 0)
            return x.reshape(NT, C, *x.shape[1:]).movedim(2, 0)

        qc, kc, vc = chunks(qs), chunks(ks), chunks(vs)
        gc, bc = chunks(gs), chunks(bs)                         # [H, NT, C]
        gam = gc.cumsum(-1)
        diff = gam[..., :, None] - gam[..., None, :]            # gamma_r - gamma_s
        decay_strict = torch.where(strict, diff, -torch.inf).exp()
        decay_incl = torch.where(incl, diff, -torch.inf).exp()
        A = bc[..., None] * (kc @ kc.transpose(-1, -2)) * decay_strict
        Tm = torch.linalg.solve_triangular(eye + A, eye.expand_as(A), upper=False, unitriangular=True)
        W = Tm @ ((bc * gam.exp())[..., None] * kc)
        U = Tm @ (bc[..., None] * vc)
        Aqk = (qc @ kc.transpose(-1, -2)) * decay_incl
        S = torch.zeros(H, K, V, dtype=acc_dtype, device=dev)
        if initial_state is not None:
            S = S + initial_state[n].to(acc_dtype)
        oc = []
        for q_i, k_i, g_i, w_i, u_i, a_i in zip(*(x.unbind(1) for x in (qc, kc, gam, W, U, Aqk))):
            vnew = u_i - w_i @ S
            oc.append(scale * (g_i[:, :, None].exp() * (q_i @ S) + a_i @ vnew))
            last = g_i[:, -1]
            S = last.exp()[:, None, None] * S + k_i.transpose(-1, -2) @ (
                (last[:, None] - g_i).exp()[..., None] * vnew)
        oc = torch.stack(oc, 1) if oc else U.new_empty(H, 0, C, V)
        outs.append(oc.reshape(H, NT * C, V)[:, :L].movedim(0, 1))
        finals.append(S)
    o = torch.cat(outs) if outs else qf.new_zeros(B * T, H, V)
    final = torch.stack(finals).to(state_dtype(q)) if output_final_state and finals else None
    if output_final_state and final is None:
        final = torch.zeros(0, H, K, V, dtype=state_dtype(q), device=dev)
    return o.reshape(B, T, H, V).to(v.dtype), final


def reference_grads(q, k, v, g, beta, do, dht=None, scale=None, initial_state=None, cu_seqlens=None,
                    fn=naive_chunk_gated_delta_rule, acc_dtype=torch.float64):
    """Gradients of ``sum(o * do) + sum(final_state * dht)`` by autograd through a reference.

    Args: the forward's inputs (any supported dtype; they are taken as float32
        leaves, float64 leaves when float64), ``do`` ``[B, T, HV, V]`` and
        ``dht`` ``[N, HV, K, V]`` or None; ``fn`` one of the two references,
        ``acc_dtype`` its accumulation dtype.
    Returns:
        dict ``dq, dk, dv, dg, dbeta`` (and ``dh0`` with an initial state) of
        float32 (float64) tensors shaped like the inputs.
    """
    leaf = torch.float64 if q.dtype == torch.float64 else torch.float32
    xs = {n: x.detach().to(leaf).requires_grad_() for n, x in
          (("dq", q), ("dk", k), ("dv", v), ("dg", g), ("dbeta", beta))}
    if initial_state is not None:
        xs["dh0"] = initial_state.detach().to(leaf).requires_grad_()
    with torch.enable_grad():
        o, ht = fn(xs["dq"], xs["dk"], xs["dv"], xs["dg"], xs["dbeta"], scale=scale,
                   initial_state=xs.get("dh0"), output_final_state=dht is not None, cu_seqlens=cu_seqlens,
                   acc_dtype=acc_dtype)
        loss = (o * do.to(o.dtype)).sum()
        if dht is not None:
            loss = loss + (ht * dht.to(ht.dtype)).sum()
        grads = torch.autograd.grad(loss, list(xs.values()))
    return dict(zip(xs, grads))
