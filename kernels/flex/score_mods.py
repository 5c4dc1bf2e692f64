"""score_mod generators for FlexAttention (attention-gym style).

A ``score_mod(score, b, h, q_idx, kv_idx) -> score`` rewrites the scaled
score ``scale * q.k`` (fp32 inside the kernel) before the mask and the
softmax. Numeric knobs (slopes, cap) are tensors, so a new value reuses the
compiled kernel. The functions also accept broadcastable index tensors
(used by the float64 reference and the materialised baselines).
"""

from __future__ import annotations

import torch

#: Score mods of the study (the ``score_mod`` field of a row).
SCORE_MODS = ("none", "alibi", "softcap", "softcap_sigmoid", "alibi_softcap")
#: The source's soft-cap (Gemma 2 uses 50 for attention logits; the source uses 30).
SOURCE_CAP = 30.0


def alibi_slopes(heads: int, device=None) -> torch.Tensor:
    """ALiBi's geometric slopes ``2**(-8 (h+1) / heads)``: float32 [heads] (Press et al., ICLR 2022)."""
    if heads < 1:
        raise ValueError(f"heads must be >= 1, got {heads}")
    return torch.exp2(-8.0 * torch.arange(1, heads + 1, dtype=torch.float32, device=device) / heads)


def source_slopes(heads: int, device=None) -> torch.Tensor:
    """The source's slopes ``0.125 (h+1)``: float32 [heads]."""
    if heads < 1:
        raise ValueError(f"heads must be >= 1, got {heads}")
    return 0.125 * torch.arange(1, heads + 1, dtype=torch.float32, device=device)


def alibi(slopes: torch.Tensor):
    """ALiBi distance penalty ``score - slopes[h] * (q_idx - kv_idx)``.

    Args:
        slopes: float tensor [heads] on the attention's device, one slope per query head.
    Raises TypeError/ValueError for a non-floating or non-1-D ``slopes``.
    """
    if not isinstance(slopes, torch.Tensor) or not slopes.dtype.is_floating_point or slopes.ndim != 1:
        raise TypeError("slopes must be a 1-D floating tensor [heads]")

    def alibi_bias(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx)

    return alibi_bias


def _cap_tensor(cap, device, inline: bool = False) -> torch.Tensor | float:
    """``cap`` as a 0-d float32 tensor on ``device`` (a Python float when ``inline``: FlexAttention's
    FLASH backend refuses a captured 0-d tensor, :mod:`kernels.flex.masks`); ValueError unless > 0 and finite."""
    c = torch.as_tensor(cap, dtype=torch.float32, device=device)
    if c.ndim != 0 or not bool(torch.isfinite(c)) or float(c) <= 0.0:
        raise ValueError(f"cap must be a positive finite scalar, got {cap!r}")
    return float(c) if inline else c


def soft_cap(cap, device=None, inline: bool = False):
    """tanh soft-capping ``cap * tanh(score / cap)`` (Gemma 2), ``cap`` > 0 captured as a 0-d float32 tensor
    (a Python float when ``inline``).

    Raises ValueError for cap <= 0 (or not finite).
    """
    c = _cap_tensor(cap, device, inline)

    def tanh_soft_cap(score, b, h, q_idx, kv_idx):
        return c * torch.tanh(score / c)

    return tanh_soft_cap


def soft_cap_sigmoid(cap, device=None, inline: bool = False):
    """The same soft-cap written as ``cap * (2 sigmoid(2 score / cap) - 1)`` (= ``cap * tanh(score / cap)``).

    A diagnostic for the soft-cap cost: it trades the ``tanh`` lowering for
    one exponential and one reciprocal, so comparing the two rows shows how
    much of the cost is the ``tanh`` instruction sequence itself.
    Raises ValueError for cap <= 0 (or not finite).
    """
    c = _cap_tensor(cap, device, inline)

    def sigmoid_soft_cap(score, b, h, q_idx, kv_idx):
        return c * (2.0 * torch.sigmoid(2.0 * score / c) - 1.0)

    return sigmoid_soft_cap


def compose(*mods):
    """Apply score mods left to right: ``compose(f, g)(s, ...) = g(f(s, ...), ...)``."""
    if not mods:
        raise ValueError("compose needs at least one score_mod")

    def composed(score, b, h, q_idx, kv_idx):
        for mod in mods:
            score = mod(score, b, h, q_idx, kv_idx)
        return score

    return composed


def score_mod_for(name: str, heads: int, device=None, cap: float = SOURCE_CAP, inline: bool = False):
    """The score_mod of a study row, or None for ``"none"``.

    ``alibi`` uses the source's slopes ``0.125 (h+1)``; ``softcap`` caps at
    ``cap`` (``softcap_sigmoid``: the same through a sigmoid); ``alibi_softcap`` is the source's combination
    ``cap * tanh((score - 0.125 (h+1) (q - kv)) / cap)``, so the three rows
    split the combined cost into its parts. ``inline`` captures the cap as a Python float.
    """
    if name == "none":
        return None
    if name == "alibi":
        return alibi(source_slopes(heads, device))
    if name == "softcap":
        return soft_cap(cap, device, inline)
    if name == "softcap_sigmoid":
        return soft_cap_sigmoid(cap, device, inline)
    if name == "alibi_softcap":
        return compose(alibi(source_slopes(heads, device)), soft_cap(cap, device, inline))
    raise ValueError(f"score_mod must be one of {SCORE_MODS}, got {name!r}")
