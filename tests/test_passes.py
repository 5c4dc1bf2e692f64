"""The timed call of each pass (:func:`kernels.core.passes.timed_pass`)."""

import gc
import weakref

import pytest
import torch

from kernels.core.passes import timed_pass


def _setup():
    x = torch.arange(1.0, 5.0, requires_grad=True)
    calls = []

    def forward():
        calls.append(1)
        return x * x

    return x, forward, calls


def test_fwd_is_the_forward_call():
    _, forward, _ = _setup()
    assert timed_pass("fwd", forward) is forward


def test_bwd_reruns_the_backward_on_the_kept_graph_without_a_forward():
    x, forward, calls = _setup()
    out = forward()
    call = timed_pass("bwd", forward, (x,), torch.ones(4), outputs=out)
    for _ in range(2):   # the graph is retained: every call differentiates the same forward
        (dx,) = call()
        assert torch.equal(dx, 2 * x.detach()) and x.grad is None
    assert len(calls) == 1
    own = timed_pass("bwd", forward, backward=lambda: "own backward")
    assert own() == "own backward"


def test_fwdbwd_runs_both_and_keeps_no_earlier_output():
    x, forward, calls = _setup()
    out = forward()
    kept = weakref.ref(out)
    call = timed_pass("fwdbwd", forward, [x], [torch.ones(4)], outputs=out)
    del out
    gc.collect()
    assert kept() is None   # the checked run's output (and graph) is freed before timing
    (dx,) = call()
    assert torch.equal(dx, 2 * x.detach()) and len(calls) == 2 and x.grad is None


def test_unused_input_and_bad_passes():
    x, forward, _ = _setup()
    y = torch.ones(1, requires_grad=True)
    dx, dy = timed_pass("fwdbwd", forward, (x, y), torch.ones(4), allow_unused=True)()
    assert dy is None and torch.equal(dx, 2 * x.detach())
    with pytest.raises(ValueError, match="unknown pass 'fwd_bwd'"):
        timed_pass("fwd_bwd", forward)
    with pytest.raises(ValueError, match="pass bwd needs the outputs"):
        timed_pass("bwd", forward, (x,), torch.ones(4))
