"""The timed call of each pass, the same in every study.

``fwd``
    The forward call itself.
``bwd``
    ``torch.autograd.grad`` of the outputs of one forward run whose graph is
    kept (``retain_graph=True``): the backward kernels alone, on the same
    graph at every call. An implementation with a backward entry point of its
    own (our Triton SwiGLU backward) times that call instead.
``fwdbwd``
    The forward and ``torch.autograd.grad`` of its outputs; the graph is freed
    at the end of each call.

Gradients are returned by ``torch.autograd.grad``, never accumulated into
``.grad``, so nothing is cleared between calls. The call holds only what its
pass needs: the ``fwdbwd`` call does not keep the outputs of the run that
checked it, so they are freed before timing and peak memory.
"""

from __future__ import annotations

PASSES = ("fwd", "bwd", "fwdbwd")


def timed_pass(pas: str, forward, inputs=(), grad_outputs=None, *, outputs=None, backward=None,
               allow_unused: bool = False):
    """The call to time for pass ``pas`` of one implementation (see the module docstring).

    Args:
        pas: ``"fwd"``, ``"bwd"`` or ``"fwdbwd"``.
        forward: ``forward()`` runs the forward on fixed inputs and returns its
            output tensor or a sequence of them (fwd, fwdbwd).
        inputs: the tensors (``requires_grad``) whose gradients the backward
            returns (bwd, fwdbwd).
        grad_outputs: the fixed gradient of each output (bwd, fwdbwd).
        outputs: the outputs of one ``forward()`` run with their graph (bwd).
        backward: ``backward()`` timed for bwd instead of autograd (an
            implementation's own backward call); ``outputs`` is then unused.
        allow_unused: passed to ``torch.autograd.grad`` (an input that no
            output depends on gets None instead of an error).
    Returns:
        A callable of no arguments; bwd and fwdbwd return the gradients of ``inputs``.
    Raises:
        ValueError: an unknown pass, or bwd with neither ``outputs`` nor ``backward``.
    """
    import torch

    if pas == "fwd":
        return forward
    if pas == "bwd":
        if backward is not None:
            return backward
        if outputs is None:
            raise ValueError("pass bwd needs the outputs of a forward run (outputs=) or a backward call")
        return lambda: torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph=True,
                                           allow_unused=allow_unused)
    if pas == "fwdbwd":
        return lambda: torch.autograd.grad(forward(), inputs, grad_outputs, allow_unused=allow_unused)
    raise ValueError(f"unknown pass {pas!r}; expected one of {', '.join(PASSES)}")
