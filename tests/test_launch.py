"""The launch helpers: the autotune pick cache (:class:`kernels.core.launch.TunedPicks`) and the direct launch (:class:`kernels.core.launch.DirectLaunch`)."""

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, strategies as st

from kernels.core.launch import DirectLaunch, TunedPicks, _specialization


def test_tuned_picks_name_only_the_launches_since_clear():
    """A kept pick is reused by key; ``last`` names the latest pick of each kernel made or
    reused since ``clear_last``, so a row names its own case's picks and no earlier case's."""
    picks = TunedPicks()
    assert picks.get("fwd", (10, 0)) is None and picks.last() == {}   # a miss is no pick
    picks.put("fwd", (10, 0), (1024, 4))
    picks.put("bwd", (10, 0), (2048, 8))
    assert picks.last() == {"fwd": (1024, 4), "bwd": (2048, 8)}
    picks.clear_last()
    assert picks.last() == {}
    assert picks.get("fwd", (10, 0)) == (1024, 4)                     # kept across clear_last
    assert picks.get("fwd", (12, 0)) is None
    assert picks.last() == {"fwd": (1024, 4)}
    picks.put("fwd", (12, 0), (4096, 8))
    assert picks.last() == {"fwd": (4096, 8)} and picks.get("fwd", (10, 0)) == (1024, 4)


# ----------------------------------------------------------------------------
# DirectLaunch


@triton.jit
def _constexpr_first(BLOCK: tl.constexpr, x_ptr):
    pass


def test_direct_launch_needs_constexprs_last():
    if not hasattr(_constexpr_first, "params"):
        pytest.skip("the interpreter's kernels have no parameter list (launched through Triton)")
    with pytest.raises(ValueError, match="constexpr parameters last"):
        DirectLaunch(_constexpr_first)


_INTS = st.one_of(st.integers(-2**40, 2**40), st.integers(2**31 - 64, 2**31 + 64),
                  st.integers(2**63 - 64, 2**64 - 1), st.sampled_from([0, 1, 16, -16, 17]))


@given(_INTS, _INTS)
def test_specialization_key_is_at_least_as_fine_as_tritons(a, b):
    """Two ints that share a DirectLaunch key share Triton's own specialisation (type, ==1,
    multiple of 16), so a kept binary is only ever reused for arguments it was compiled for."""
    native = pytest.importorskip("triton._C.libtriton").native_specialize_impl
    from triton.backends.compiler import BaseBackend

    if _specialization(a) == _specialization(b):
        assert native(BaseBackend, a, False, True, True) == native(BaseBackend, b, False, True, True)


def test_specialization_key_of_tensors():
    """A tensor's key is its dtype and whether its address is a multiple of 16 bytes."""
    t = torch.zeros(64, dtype=torch.bfloat16)
    assert _specialization(t) == _specialization(t[8:]) == (torch.bfloat16, True)   # 16 bytes on
    assert _specialization(t[1:]) == (torch.bfloat16, False)
    assert _specialization(t.float()) != _specialization(t)
    assert _specialization(True) != _specialization(1) != _specialization(17)


@pytest.mark.gpu
def test_direct_launch_reuses_the_binary_triton_compiled_for_the_same_arguments():
    """Launches of every specialisation (aligned and misaligned pointers, sizes multiple of 16
    or not, 1) each keep the CompiledKernel Triton launched for them, reuse it on the next call
    (no other case's), and compute what the reference does."""
    from kernels.swiglu.elementwise import _swiglu_fwd_kernel
    from kernels.swiglu.reference import swiglu_reference

    direct = DirectLaunch(_swiglu_fwd_kernel)
    base = torch.randn(2, 8192 + 64, device="cuda", dtype=torch.bfloat16)
    cases = [(offset, n) for offset in (0, 1, 8) for n in (4096, 4095, 1, 1040)]

    def launch(offset, n, out):
        gate, up = base[0, offset:offset + n], base[1, offset:offset + n]
        args = (gate, up, out, n, 0, 0, 0, n.bit_length(), 0)
        direct(triton.cdiv(n, 1024), *args, BLOCK_SIZE=1024, num_warps=4)
        return args, swiglu_reference(gate, up)

    for offset, n in cases:  # first launches: through Triton, the binary kept
        launch(offset, n, torch.empty(n, device="cuda", dtype=torch.bfloat16))
    for offset, n in cases:  # direct launches
        out = torch.full((n,), float("nan"), device="cuda", dtype=torch.bfloat16)
        args, ref = launch(offset, n, out)
        assert direct.compiled(*args, BLOCK_SIZE=1024, num_warps=4) is \
            _swiglu_fwd_kernel[(triton.cdiv(n, 1024),)](*args, BLOCK_SIZE=1024, num_warps=4)
        torch.testing.assert_close(out.float(), ref.float(), rtol=1e-2, atol=1e-2)
