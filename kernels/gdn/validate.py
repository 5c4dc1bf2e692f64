"""Argument checks and small helpers shared by every GDN implementation."""

from __future__ import annotations

import functools

import torch

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEADS = 65535
"""Most value heads a call takes: the (chunk, head) kernels put the heads on grid axis 1,
whose limit on CUDA is 65535 (sequences and chunks go on axis 0, limit 2^31 - 1)."""


def check_inputs(q, k, v, g, beta, initial_state=None, cu_seqlens=None, check_gate=True, allow_float64=False):
    """Validate the arguments of a gated delta rule call (flash-linear-attention's layout).

    Shapes: q, k ``[B, T, H, K]``; v ``[B, T, HV, V]`` with HV a multiple of H
    (grouped value attention, GVA, when HV > H: value head j reads key head
    ``j // (HV // H)``, as in flash-linear-attention); g, beta ``[B, T, HV]``;
    initial_state ``[N, HV, K, V]`` float32; cu_seqlens ``[N + 1]`` int32/int64
    with B == 1, starting at 0, non-decreasing, ending at T. With
    ``allow_float64`` (the PyTorch references, for gradcheck) every float
    argument may also be float64, and then the initial state is float64.
    Returns ``(B, T, H, HV, K, V, N)`` with N the number of sequences.
    Raises:
        TypeError: non-tensor arguments, non-float q/k/v/g/beta, q/k/v dtypes
            differing, cu_seqlens not an integer tensor, state not float32.
        ValueError: shapes, devices, head dims not in ``SUPPORTED_HEAD_DIMS``,
            HV not a multiple of H or above ``MAX_HEADS``, cu_seqlens not
            matching T or B != 1, g > 0 (when ``check_gate``).
    """
    floats = FLOAT_DTYPES + ((torch.float64,) if allow_float64 else ())
    for name, x in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dtype not in floats:
            raise TypeError(f"{name} must be float16/bfloat16/float32, got {x.dtype}")
        if x.device != q.device:
            raise ValueError(f"{name} is on {x.device} but q is on {q.device}")
    if q.dim() != 4:
        raise ValueError(f"q must be [B, T, H, K], got shape {tuple(q.shape)}")
    B, T, H, K = q.shape
    if k.shape != q.shape:
        raise ValueError(f"k must have q's shape {tuple(q.shape)}, got {tuple(k.shape)}")
    if v.dim() != 4 or v.shape[:2] != q.shape[:2] or v.shape[2] == 0 or v.shape[2] % max(H, 1):
        raise ValueError(f"v must be [B, T, HV, V] = [{B}, {T}, HV, V] with HV a multiple of H={H}, "
                         f"got {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    HV, V = v.shape[2], v.shape[3]
    if HV > MAX_HEADS:
        raise ValueError(f"{HV} value heads exceed the {MAX_HEADS} the kernels' head grid axis holds")
    for name, x in (("g", g), ("beta", beta)):
        if x.shape != (B, T, HV):
            raise ValueError(f"{name} must be [B, T, HV] = [{B}, {T}, {HV}], got {tuple(x.shape)}")
    if K not in SUPPORTED_HEAD_DIMS or V not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dims K={K}, V={V} not supported; use one of {SUPPORTED_HEAD_DIMS}")
    if check_gate:
        gate_check(g)
    N = B
    if cu_seqlens is not None:
        if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dtype not in (torch.int32, torch.int64):
            raise TypeError("cu_seqlens must be an int32 or int64 tensor")
        if cu_seqlens.device != q.device:
            raise ValueError(f"cu_seqlens is on {cu_seqlens.device} but q is on {q.device}")
        if B != 1:
            raise ValueError(f"with cu_seqlens the batch must be 1 (packed sequences), got B={B}")
        if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
            raise ValueError(f"cu_seqlens must be 1-D [N + 1] with N >= 1, got {tuple(cu_seqlens.shape)}")
        N = len(checked_offsets(cu_seqlens, T)) - 1
    if initial_state is not None:
        state_dtype = torch.float64 if allow_float64 and q.dtype == torch.float64 else torch.float32
        if not isinstance(initial_state, torch.Tensor) or initial_state.dtype != state_dtype:
            raise TypeError(f"initial_state must be a {state_dtype} tensor [N, HV, K, V]")
        if initial_state.shape != (N, HV, K, V):
            raise ValueError(f"initial_state must be [N, HV, K, V] = [{N}, {HV}, {K}, {V}], "
                             f"got {tuple(initial_state.shape)}")
        if initial_state.device != q.device:
            raise ValueError(f"initial_state is on {initial_state.device} but q is on {q.device}")
    return B, T, H, HV, K, V, N


def cached_per_tensor(fn):
    """Memoise ``fn(t, *args)`` on the tensor ``t`` itself (identity and version) and ``args``.

    An in-place write bumps a tensor's version, so a changed ``cu_seqlens`` is
    seen again; the last 8 results are kept, with a reference to their tensor
    (so its identity is not reused). An inference-mode tensor has no version,
    so its results are not cached. Used where a result needs the values of a
    small device tensor on the host: reading them waits for every kernel
    queued before, so a model whose layers share one ``cu_seqlens`` pays that
    wait once rather than per call. flash-linear-attention caches its
    chunk indices the same way (``tensor_cache``, by identity only). An
    exception is not cached.
    """
    entries: list = []

    @functools.wraps(fn)
    def wrapper(t, *args):
        if t.is_inference():
            return fn(t, *args)
        for entry in entries:
            if entry[0] is t and entry[1] == t._version and entry[2] == args:
                return entry[3]
        value = fn(t, *args)
        entries.insert(0, (t, t._version, args, value))
        del entries[8:]
        return value

    return wrapper


@cached_per_tensor
def checked_offsets(cu_seqlens: torch.Tensor, T: int) -> tuple[int, ...]:
    """The sequence boundaries ``cu_seqlens`` ``[N + 1]`` as a tuple of ints, checked
    to start at 0, never decrease and end at ``T`` (``ValueError`` otherwise).
    Read from the device once per tensor and version (:func:`cached_per_tensor`)."""
    cs = tuple(cu_seqlens.tolist())
    if cs[0] != 0 or cs[-1] != T or any(b < a for a, b in zip(cs, cs[1:])):
        raise ValueError(f"cu_seqlens must start at 0, never decrease and end at T={T}; got "
                         f"{list(cs[:4])}...{list(cs[-2:])}")
    return cs


def gate_check(g) -> None:
    """Raise ``ValueError`` naming the largest g if any g (a log decay) is positive.

    Reads g's values, so on a GPU the host waits for every kernel enqueued
    before it: our Triton wrappers call it only when asked (``check_gate``),
    like flash-linear-attention, whose ops do not read g at all.
    """
    if g.numel() and bool((g > 0).any()):
        raise ValueError(f"g is a log decay and must be <= 0; max is {g.max().item():.3g}")


def seq_bounds(B: int, T: int, cu_seqlens=None) -> list[tuple[int, int]]:
    """Token ranges ``[(start, end), ...]`` of the sequences in the flattened ``B*T`` axis."""
    if cu_seqlens is None:
        return [(b * T, (b + 1) * T) for b in range(B)]
    cs = checked_offsets(cu_seqlens, B * T)
    return list(zip(cs[:-1], cs[1:]))


def l2norm(x, eps: float = 1e-6):
    """``x / sqrt(sum(x^2, -1) + eps)`` computed in float32, returned in x's dtype
    (the normalisation flash-linear-attention applies with use_qk_l2norm_in_kernel)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + eps)).to(x.dtype)
