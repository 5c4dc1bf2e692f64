"""Exact element and tile densities of the study's masks (no torch).

``density_elements`` = allowed (query, key) pairs / N²; the FLOPs the
attention really needs scale with it. ``density_blocks`` = 128x128 tiles
holding at least one allowed pair (partial and full tiles) / T², with
T = ceil(N / 128) tiles per side: the work a block-sparse kernel such as
FlexAttention does. The last row and column of tiles are partial when N is
not a multiple of 128; they count as whole tiles (the kernel runs them), which
is the convention here. We compute both ourselves because
``BlockMask.sparsity()`` miscounts (goes negative) when N % 128 != 0.

Element counts come from closed forms; tile counts from the extent of each
tile in ``q - kv`` per document (interval arithmetic), both checked against
brute force in ``tests/test_flex_density.py``.
"""

from __future__ import annotations

import math

import numpy as np

BLOCK_SIZE = 128


def _causal_window_count(length: int, window: int | None) -> int:
    """Allowed pairs of a causal (optionally windowed) mask on one segment of ``length`` tokens."""
    if window is None or window >= length:
        return length * (length + 1) // 2
    return window * (window + 1) // 2 + (length - window) * window


def _segments(seqlen: int, lengths) -> list[int]:
    lengths = [seqlen] if lengths is None or len(lengths) == 0 else [int(x) for x in lengths]
    if min(lengths) < 1 or sum(lengths) != seqlen:
        raise ValueError(f"document lengths must be >= 1 and sum to seqlen={seqlen}, got sum {sum(lengths)}")
    return lengths


def _check(mask: str, seqlen: int, window: int, prefix: int) -> int | None:
    if seqlen < 1:
        raise ValueError(f"seqlen must be >= 1, got {seqlen}")
    if mask in ("window", "document_window"):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        return int(window)
    if mask == "prefix" and not 0 <= prefix <= seqlen:
        raise ValueError(f"prefix must be in [0, seqlen={seqlen}], got {prefix}")
    if mask not in ("causal", "document", "prefix"):
        raise ValueError(f"unknown mask {mask!r}")
    return None


def element_count(mask: str, seqlen: int, window: int = 0, lengths=None, prefix: int = 0) -> int:
    """Number of allowed (query, key) pairs of a square N x N mask (see :mod:`kernels.flex.masks`).

    causal: N(N+1)/2. window w: w(w+1)/2 + (N-w) w (w < N). document
    (causal per document, lengths L_i): sum L_i(L_i+1)/2; document_window:
    the window formula per document. prefix p: p² + N(N+1)/2 - p(p+1)/2.
    ``lengths`` is used by the document masks only (None: one document).
    Raises ValueError for window < 1, prefix outside [0, N], lengths not summing to N.
    """
    w = _check(mask, seqlen, window, prefix)
    if mask == "prefix":
        return prefix * prefix + seqlen * (seqlen + 1) // 2 - prefix * (prefix + 1) // 2
    segs = _segments(seqlen, lengths if mask.startswith("document") else None)
    return sum(_causal_window_count(L, w) for L in segs)


def block_count(mask: str, seqlen: int, window: int = 0, lengths=None, prefix: int = 0,
                block_size: int = BLOCK_SIZE) -> int:
    """Number of ``block_size`` x ``block_size`` tiles with at least one allowed pair.

    Tile (i, j) covers queries [i·bs, min((i+1)·bs, N)) and keys [j·bs, ...).
    Within one document [s, e] the tile's queries and keys clip to intervals
    [Qlo, Qhi], [Klo, Khi], over which ``q - kv`` takes every integer in
    [Qlo - Khi, Qhi - Klo]; the tile is computed when that range meets
    [0, w - 1] (w = inf without a window) for some document. prefix p adds
    every tile whose first key is < p.
    """
    w = _check(mask, seqlen, window, prefix)
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    segs = np.asarray(_segments(seqlen, lengths if mask.startswith("document") else None), dtype=np.int64)
    ends = np.cumsum(segs) - 1
    starts = ends - segs + 1
    tiles = math.ceil(seqlen / block_size)
    lo = np.arange(tiles, dtype=np.int64) * block_size
    hi = np.minimum(lo + block_size, seqlen) - 1
    q_lo = np.maximum(lo[:, None, None], starts[None, None, :])
    q_hi = np.minimum(hi[:, None, None], ends[None, None, :])
    k_lo = np.maximum(lo[None, :, None], starts[None, None, :])
    k_hi = np.minimum(hi[None, :, None], ends[None, None, :])
    hit = (q_lo <= q_hi) & (k_lo <= k_hi) & (q_hi - k_lo >= 0)
    if w is not None:
        hit &= q_lo - k_hi <= w - 1
    computed = hit.any(axis=2)
    if mask == "prefix":
        computed |= lo[None, :] < prefix
    return int(computed.sum())


def densities(mask: str, seqlen: int, window: int = 0, lengths=None, prefix: int = 0,
              block_size: int = BLOCK_SIZE) -> tuple[float, float]:
    """``(density_elements, density_blocks)`` of a square mask, both in (0, 1]."""
    n_elem = element_count(mask, seqlen, window, lengths, prefix)
    n_blk = block_count(mask, seqlen, window, lengths, prefix, block_size)
    tiles = math.ceil(seqlen / block_size)
    return n_elem / seqlen**2, n_blk / tiles**2
