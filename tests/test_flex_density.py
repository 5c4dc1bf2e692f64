"""Exact mask densities (kernels.flex.density) against brute force over the materialised mask."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import create_mask

from kernels.flex import density, masks


def _brute(mask, n, window, lengths, prefix, bs):
    mm = masks.mask_mod_for(mask, n, window=window, lengths=lengths, prefix=prefix)
    m = create_mask(mm, None, None, n, n, device="cpu")[0, 0]
    t = math.ceil(n / bs)
    tiles = torch.nn.functional.pad(m, (0, t * bs - n, 0, t * bs - n)).reshape(t, bs, t, bs).any(3).any(1)
    return int(m.sum()), int(tiles.sum())


@st.composite
def mask_cases(draw):
    n = draw(st.integers(1, 300))
    mask = draw(st.sampled_from(masks.MASKS))
    window = draw(st.integers(1, n + 5))
    docs = draw(st.integers(1, min(n, 12)))
    lengths = masks.document_lengths(n, docs, draw(st.sampled_from(masks.DOC_DISTS)), draw(st.integers(0, 99)))
    prefix = draw(st.integers(0, n))
    bs = draw(st.sampled_from([1, 7, 16, 128]))
    return mask, n, window, lengths, prefix, bs


@settings(max_examples=150, deadline=None)
@given(mask_cases())
def test_counts_match_brute_force(case):
    mask, n, window, lengths, prefix, bs = case
    elements, blocks = _brute(*case)
    assert density.element_count(mask, n, window, lengths, prefix) == elements
    assert density.block_count(mask, n, window, lengths, prefix, bs) == blocks


def test_causal_densities_at_8191_are_in_range():
    """Partial last tiles count as whole tiles; both densities stay in (0, 1] (BlockMask.sparsity() does not)."""
    de, db = density.densities("causal", 8191)
    assert de == pytest.approx(8191 * 8192 / 2 / 8191**2)
    assert db == pytest.approx(64 * 65 / 2 / 64**2)


@pytest.mark.parametrize("call,match", [
    (lambda: density.element_count("window", 100, window=0), "window must be >= 1"),
    (lambda: density.block_count("document", 100, lengths=[50, 49]), "sum to seqlen=100"),
    (lambda: density.element_count("prefix", 100, prefix=101), r"prefix must be in \[0, seqlen=100\]"),
    (lambda: density.element_count("band", 100), "unknown mask"),
])
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
