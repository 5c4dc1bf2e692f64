"""mask_mod generators for FlexAttention, one small function per mask (attention-gym style).

A ``mask_mod(b, h, q_idx, kv_idx) -> bool`` says whether query ``q_idx`` may
attend to key ``kv_idx``; FlexAttention (``torch.nn.attention.flex_attention``,
Dong et al., MLSys 2025) compiles it into its kernel and ``create_block_mask``
turns it into a table of 128x128 tiles to skip. Every mask here contains the
diagonal, so no query row is fully masked.

Numeric knobs (window, prefix, document ids) are captured as tensors, never as
Python numbers: a new value then reuses the compiled kernel instead of
recompiling it (a Python number is baked into the generated code). The
exception is ``inline=True``, for FlexAttention's FLASH backend, whose CuTe
lowering refuses a captured 0-d tensor ("Expected TensorSSA, but got int", H200
rows of flex_flash): the scalar knobs are then Python ints, and each value
compiles its own kernel (the FLASH backend compiles per mask anyway).

The functions also accept broadcastable index tensors, which is how
:mod:`kernels.flex.reference` and the materialised-mask baselines evaluate
them densely.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn.attention.flex_attention import and_masks, or_masks

#: Mask families of the study (the ``mask`` field of a row).
MASKS = ("causal", "window", "document", "prefix", "document_window")
#: Document-length distributions (the ``doc_dist`` field of a row).
DOC_DISTS = ("uniform", "heavy")


def _knob(name: str, value, device, minimum: int, inline: bool = False) -> torch.Tensor | int:
    """``value`` as a 0-d int64 tensor on ``device`` (a Python int when ``inline``);
    ValueError below ``minimum``, TypeError when not an integer."""
    t = torch.as_tensor(value, device=device)
    if t.ndim != 0 or t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer or a 0-d integer tensor, got {t.dtype} of shape {tuple(t.shape)}")
    if int(t) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {int(t)}")
    return int(t) if inline else t.to(torch.int64)


def causal(b, h, q_idx, kv_idx):
    """Causal mask: ``kv_idx <= q_idx``."""
    return q_idx >= kv_idx


def sliding_window_mask(window, device=None, inline: bool = False):
    """Causal sliding window: ``0 <= q_idx - kv_idx < window`` (``window`` keys, the diagonal included).

    Args:
        window: int or 0-d integer tensor, >= 1 (window 1 keeps only the diagonal).
        device: device of the captured 0-d tensor (the attention's device).
        inline: capture the window as a Python int instead (module docstring).
    Raises:
        ValueError: window < 1. TypeError: window not an integer.
    Source: Longformer / Mistral sliding-window attention; attention-gym ``generate_sliding_window``.
    """
    w = _knob("window", window, device, 1, inline)

    def within_window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx < w

    return and_masks(causal, within_window)


def document_lengths(seqlen: int, documents: int, distribution: str = "uniform", seed: int = 0) -> list[int]:
    """Lengths of ``documents`` packed documents summing to ``seqlen`` (each >= 1).

    ``uniform``: equal lengths, the first ``seqlen % documents`` one longer.
    ``heavy``: heavy-tailed, proportional to Pareto(alpha=1.2) draws of a
    ``numpy`` generator seeded with ``seed`` (deterministic), so that a few
    long documents and many short ones share the sequence.
    Raises ValueError when documents < 1, documents > seqlen or the
    distribution is unknown.
    """
    if documents < 1 or documents > seqlen:
        raise ValueError(f"documents must be in [1, seqlen={seqlen}], got {documents}")
    if distribution == "uniform":
        base, rest = divmod(seqlen, documents)
        return [base + (i < rest) for i in range(documents)]
    if distribution != "heavy":
        raise ValueError(f"distribution must be one of {DOC_DISTS}, got {distribution!r}")
    weights = np.random.default_rng(seed).pareto(1.2, documents) + 1.0
    free = seqlen - documents  # every document gets 1 token, the rest is shared by weight
    share = weights / weights.sum() * free
    extra = np.floor(share).astype(np.int64)
    order = np.argsort(-(share - extra), kind="stable")
    extra[order[: free - int(extra.sum())]] += 1
    return [int(1 + e) for e in extra]


def document_ids(seqlen: int, lengths=None, offsets=None, device=None) -> torch.Tensor:
    """Document index of every token: int64 tensor [seqlen].

    Give exactly one of ``lengths`` (per-document token counts, each >= 1,
    summing to ``seqlen``) or ``offsets`` (``cu_seqlens`` style: starts of the
    documents followed by ``seqlen``, i.e. ``[0, l0, l0+l1, ..., seqlen]``,
    strictly increasing).
    Raises ValueError naming the mismatch otherwise.
    """
    if (lengths is None) == (offsets is None):
        raise ValueError("give exactly one of lengths or offsets")
    if offsets is not None:
        off = [int(o) for o in torch.as_tensor(offsets).reshape(-1).tolist()]
        if len(off) < 2 or off[0] != 0 or off[-1] != seqlen:
            raise ValueError(f"offsets must start at 0 and end at seqlen={seqlen}, got {off[:3]}...{off[-2:]}")
        lengths = [b - a for a, b in zip(off[:-1], off[1:])]
        if min(lengths) < 1:
            raise ValueError("offsets must be strictly increasing (every document at least one token)")
    lengths = [int(x) for x in torch.as_tensor(lengths).reshape(-1).tolist()]
    if not lengths or min(lengths) < 1:
        raise ValueError(f"document lengths must be >= 1, got {lengths[:8]}")
    if sum(lengths) != seqlen:
        raise ValueError(f"document lengths sum to {sum(lengths)}, not seqlen={seqlen}")
    counts = torch.tensor(lengths, device=device)
    return torch.repeat_interleave(torch.arange(len(lengths), device=device), counts)


def document_mask(seqlen: int, lengths=None, offsets=None, device=None):
    """Causal document packing: a token sees earlier tokens of its own document only.

    Args: as :func:`document_ids` (``seqlen``: tokens of the packed sequence).
    Source: attention-gym ``generate_doc_mask_mod``; FlashAttention varlen (``cu_seqlens``).
    """
    doc = document_ids(seqlen, lengths, offsets, device)

    def same_document(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    return and_masks(causal, same_document)


def document_window_mask(seqlen: int, window, lengths=None, offsets=None, device=None, inline: bool = False):
    """The source's combined mask: sliding window + causal + document packing (composition by ``and_masks``)."""
    return and_masks(document_mask(seqlen, lengths, offsets, device), sliding_window_mask(window, device, inline))


def prefix_lm_mask(prefix, device=None, inline: bool = False):
    """Prefix-LM: the first ``prefix`` tokens attend to each other bidirectionally, the rest causally.

    ``kv_idx < prefix`` or ``kv_idx <= q_idx`` (composition by ``or_masks``);
    ``prefix`` is an int or 0-d integer tensor >= 0 (0 gives the causal mask); ``inline``
    captures it as a Python int instead (module docstring).
    Source: T5 / UniLM prefix language models; attention-gym ``generate_prefix_lm_mask``.
    """
    p = _knob("prefix", prefix, device, 0, inline)

    def in_prefix(b, h, q_idx, kv_idx):
        return kv_idx < p

    return or_masks(causal, in_prefix)


def mask_mod_for(mask: str, seqlen: int, window: int = 0, lengths=None, prefix: int = 0, device=None,
                 inline: bool = False):
    """The mask_mod of a study row (``mask`` in :data:`MASKS`); unused knobs are ignored; ``inline``
    captures the scalar knobs (window, prefix) as Python ints (module docstring)."""
    if mask == "causal":
        return causal
    if mask == "window":
        return sliding_window_mask(window, device, inline)
    if mask == "document":
        return document_mask(seqlen, lengths=lengths, device=device)
    if mask == "document_window":
        return document_window_mask(seqlen, window, lengths=lengths, device=device, inline=inline)
    if mask == "prefix":
        if prefix > seqlen:
            raise ValueError(f"prefix={prefix} is longer than seqlen={seqlen}")
        return prefix_lm_mask(prefix, device, inline)
    raise ValueError(f"mask must be one of {MASKS}, got {mask!r}")
