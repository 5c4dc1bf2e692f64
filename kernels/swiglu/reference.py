"""The SwiGLU formula in plain PyTorch: the eager tier and the reference.

``SwiGLU(gate, up) = SiLU(gate) * up`` with ``SiLU(g) = g * sigmoid(g)``
(Shazeer 2020, arXiv:2002.05202; Elfwing et al. 2017 for SiLU). Its
derivatives, with ``s = sigmoid(gate)``:

    d_gate = d_out * up * s * (1 + gate * (1 - s))
    d_up   = d_out * gate * s
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def swiglu_eager(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Eager PyTorch SwiGLU ``F.silu(gate) * up`` (two kernels, one intermediate).

    Args:
        gate, up: tensors of the same shape ``[..., hidden]`` and dtype.
    Returns:
        ``[..., hidden]`` in the inputs' dtype. Autograd works through it.
    """
    return F.silu(gate) * up


def swiglu_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """fp32 (or fp64 for fp64 inputs) reference of the forward.

    Args:
        gate, up: tensors of the same shape ``[..., hidden]``, any float dtype.
    Returns:
        ``SiLU(gate) * up`` computed in float32 (float64 if an input is
        float64), shape ``[..., hidden]``.
    """
    dt = torch.float64 if torch.float64 in (gate.dtype, up.dtype) else torch.float32
    g, u = gate.to(dt), up.to(dt)
    return g * torch.sigmoid(g) * u


def swiglu_backward_reference(d_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor):
    """fp32 (or fp64) reference of the backward, from the closed-form derivatives.

    Args:
        d_out, gate, up: tensors of the same shape ``[..., hidden]``.
    Returns:
        ``(d_gate, d_up)``, each ``[..., hidden]`` in float32 (float64 if an
        input is float64).
    """
    dt = torch.float64 if torch.float64 in (d_out.dtype, gate.dtype, up.dtype) else torch.float32
    dy, g, u = d_out.to(dt), gate.to(dt), up.to(dt)
    s = torch.sigmoid(g)
    return dy * u * s * (1 + g * (1 - s)), dy * g * s
