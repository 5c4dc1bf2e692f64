"""Triton SwiGLU kernels: forward, backward, autograd Function, decode launch.

Method: one memory pass per direction. The forward loads ``gate`` and ``up``
once, computes ``gate * sigmoid(gate) * up`` in fp32 registers and stores
once in the input dtype (6 B/element in bf16 against eager's ~10 B; the
source material's kernel, see :mod:`kernels.swiglu.seed`, is the starting
point). The backward loads ``d_out, gate, up`` once and stores ``d_gate``
and ``d_up`` once, recomputing ``sigmoid(gate)`` instead of saving it
(Liger-Kernel's SiLUMul does the same). Derivatives:
``d_gate = d_out * up * s * (1 + gate * (1 - s))``, ``d_up = d_out * gate * s``
with ``s = sigmoid(gate)``.

Layout: inputs of any leading shape ``[..., hidden]`` are seen as rows
``[rows, hidden]`` without a copy. When every operand is contiguous the
kernel walks one flat range (large blocks, no per-row tail); otherwise it
walks rows with their own strides, so the two halves of a fused gate-up
projection (``y.chunk(2, -1)``, row stride ``2 * hidden``) are read in
place. Offsets are 64-bit (rows times strides and block starts), so tensors
of more than 2**31 elements are correct. Outputs are new contiguous tensors.

On a GPU the block size and warp count are autotuned (the source's
1024/4, 2048/8, 4096/8 plus larger blocks) per power-of-two size class, among
the blocks that keep at least half the SMs busy (:func:`busy_configs`), and
the pick is kept per class so that later launches skip the autotuner and call
the kept binary's launcher directly (:class:`kernels.core.launch.DirectLaunch`:
the host's cost of a launch, not Triton's argument binding); under
``TRITON_INTERPRET=1`` (the CPU interpreter, where autotuning has no driver)
a fixed configuration is used.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
import triton.testing

from kernels.core.launch import DirectLaunch, TunedPicks, interpreting, sm_count

#: dtypes the kernels accept; math is fp32 whatever the storage dtype.
DTYPES = (torch.bfloat16, torch.float16, torch.float32)

#: (BLOCK_SIZE, num_warps) candidates of the autotuned forward and backward.
FWD_CONFIGS = ((1024, 4), (2048, 8), (4096, 8), (8192, 8), (8192, 16), (16384, 16))
BWD_CONFIGS = ((1024, 4), (2048, 8), (4096, 8), (8192, 16), (16384, 16), (16384, 32))
#: Fixed configuration under the interpreter.
INTERPRET_CONFIG = (1024, 4)
#: Fixed configuration of the decode launch (1-64 tokens: ~100-1000 programs
#: of 1024 elements at hidden 14336, enough for the 132 SMs of an H200).
DECODE_CONFIG = (1024, 4)


def _autotune_bench(kernel_call, quantiles=None):
    # 50 ms per candidate: shorter runs picked configurations ~10 % off the best
    # at 8192 x 14336 (the sweep autotunes ~20 size classes, ~10 s in all).
    return triton.testing.do_bench(kernel_call, warmup=5, rep=50, quantiles=quantiles)


@triton.jit(do_not_specialize=["size_class", "col_class"])
def _swiglu_fwd_kernel(gate_ptr, up_ptr, out_ptr, n_cols, stride_gate, stride_up, stride_out,
                       size_class, col_class, BLOCK_SIZE: tl.constexpr):
    # One program = BLOCK_SIZE columns of one row (the flat case: one row).
    # size_class/col_class only key the autotuner.
    pid = tl.program_id(0).to(tl.int64)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_SIZE)
    row = pid // n_col_blocks
    col_start = (pid - row * n_col_blocks) * BLOCK_SIZE
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols - col_start
    g = tl.load(gate_ptr + (row * stride_gate + col_start) + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + (row * stride_up + col_start) + offs, mask=mask, other=0.0).to(tl.float32)
    y = g * tl.sigmoid(g) * u
    tl.store(out_ptr + (row * stride_out + col_start) + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["size_class", "col_class"])
def _swiglu_bwd_kernel(dout_ptr, gate_ptr, up_ptr, dgate_ptr, dup_ptr, n_cols, stride_dout, stride_gate,
                       stride_up, stride_grad, size_class, col_class, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_SIZE)
    row = pid // n_col_blocks
    col_start = (pid - row * n_col_blocks) * BLOCK_SIZE
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols - col_start
    dy = tl.load(dout_ptr + (row * stride_dout + col_start) + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(gate_ptr + (row * stride_gate + col_start) + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + (row * stride_up + col_start) + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(g)
    d_up = dy * g * s
    d_gate = dy * u * s * (1.0 + g * (1.0 - s))
    grad_off = row * stride_grad + col_start
    tl.store(dgate_ptr + grad_off + offs, d_gate.to(dgate_ptr.dtype.element_ty), mask=mask)
    tl.store(dup_ptr + grad_off + offs, d_up.to(dup_ptr.dtype.element_ty), mask=mask)


def busy_configs(configs: list, size_class: int, n_sms: int) -> list:
    """The candidates (``triton.Config`` with ``BLOCK_SIZE``) worth timing for a tensor of
    at least ``2 ** (size_class - 1)`` elements: those that launch at least half as many
    programs as the GPU has SMs (``n_sms``), or, if none does, the one of the smallest block.

    A block that leaves most SMs idle is never the fastest, but at a few microseconds the
    autotuner's timing cannot always tell (the H200 runs picked 8192-element blocks for
    229 376 elements, 1.5 µs slower than 1024); pruning them makes the pick reproducible.
    """
    n = 2 ** max(size_class - 1, 0)
    busy = [c for c in configs if n // c.kwargs["BLOCK_SIZE"] >= n_sms / 2]
    return busy or [min(configs, key=lambda c: c.kwargs["BLOCK_SIZE"])]


def _prune(configs, named_args, **kwargs):
    n_sms = sm_count(torch.device("cuda", torch.cuda.current_device()))
    return busy_configs(configs, named_args["size_class"], n_sms)


def _tuned(kernel, configs):
    return triton.autotune(
        configs=[triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b, w in configs],
        key=["size_class", "col_class"], prune_configs_by={"early_config_prune": _prune},
        do_bench=_autotune_bench)(kernel)


_FWD_TUNED = None if interpreting() else _tuned(_swiglu_fwd_kernel, FWD_CONFIGS)
_BWD_TUNED = None if interpreting() else _tuned(_swiglu_bwd_kernel, BWD_CONFIGS)
_FWD = DirectLaunch(_swiglu_fwd_kernel)
_BWD = DirectLaunch(_swiglu_bwd_kernel)


def check_operands(**tensors: torch.Tensor) -> torch.Tensor:
    """Validate same-shape elementwise operands; return the first one.

    Raises:
        TypeError: an operand is not a tensor, has a dtype other than
            bfloat16/float16/float32, or its dtype differs from the first's.
        ValueError: shapes or devices differ, an operand is 0-d, or the
            device is not CUDA while Triton is not interpreting.
    """
    items = list(tensors.items())
    for name, t in items:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    first_name, first = items[0]
    for name, t in items:
        if t.dtype not in DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; supported: bfloat16, float16, float32")
        if t.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but {first_name} has dtype {first.dtype}")
        if t.shape != first.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but {first_name} has shape {tuple(first.shape)}")
        if t.device != first.device:
            raise ValueError(f"{name} is on device {t.device} but {first_name} is on {first.device}")
    if first.dim() == 0:
        raise ValueError(f"{first_name} is 0-d; expected shape [..., hidden]")
    if first.device.type != "cuda" and not interpreting():
        raise ValueError(f"{first_name} is on device {first.device}; the Triton kernels need a CUDA tensor "
                         "(or TRITON_INTERPRET=1 for CPU tensors)")
    return first


def as_rows(name: str, t: torch.Tensor) -> torch.Tensor:
    """View ``t`` (``[..., hidden]``) as ``[rows, hidden]`` without copying.

    Raises:
        ValueError: the last dimension is not unit-stride, or the leading
            dimensions cannot be merged into one row index without a copy.
    """
    hidden = t.shape[-1]
    if hidden > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name} has strides {t.stride()}: the last dimension must have stride 1; "
                         "call .contiguous() first")
    try:
        return t.view(-1, hidden)
    except RuntimeError:
        raise ValueError(f"{name} with shape {tuple(t.shape)} and strides {t.stride()} cannot be seen as rows "
                         f"of {hidden} elements without a copy; call .contiguous() first") from None


def _layout(**operands: torch.Tensor):
    """(operands, n_rows, n_cols, row strides, output row stride) for the kernels.

    Contiguous operands become one flat row (row strides 0), passed as they
    are; otherwise each is seen as rows (:func:`as_rows`, which raises its
    ValueError) and keeps its row stride, and the (contiguous) outputs use
    ``n_cols``.
    """
    tensors = list(operands.values())
    if all(t.is_contiguous() for t in tensors):
        return tensors, 1, tensors[0].numel(), [0] * len(tensors), 0
    rows = [as_rows(name, t) for name, t in operands.items()]
    n_rows, n_cols = rows[0].shape
    return rows, n_rows, n_cols, [r.stride(0) for r in rows], n_cols


#: (BLOCK_SIZE, num_warps) the autotuner chose per kernel and (size class, column class,
#: dtype); later launches of that class skip the autotuner's dispatch.
_PICKS = TunedPicks()


def clear_last_tuned() -> None:
    """Forget the last autotuned launches, so that :func:`last_tuned` names only later ones."""
    _PICKS.clear_last()


def last_tuned() -> dict[str, tuple[int, int]]:
    """``{"fwd"|"bwd": (BLOCK_SIZE, num_warps)}`` of the last autotuned launch of each kernel."""
    names = {_swiglu_fwd_kernel: "fwd", _swiglu_bwd_kernel: "bwd"}
    return {names[k]: v for k, v in _PICKS.last().items()}


def _launch(tuned, direct, config, n_rows, n_cols, args, strides):
    # A class's first launch autotunes through Triton; the pick is then launched directly (DirectLaunch).
    size_class = (n_rows * n_cols).bit_length()
    col_class = 0 if n_rows == 1 else n_cols.bit_length()
    if config is None and tuned is not None:
        key = (size_class, col_class, args[0].dtype)
        config = _PICKS.get(direct.kernel, key)
        if config is None:
            grid = lambda meta: (n_rows * triton.cdiv(n_cols, meta["BLOCK_SIZE"]),)  # noqa: E731
            tuned[grid](*args, n_cols, *strides, size_class, col_class)
            best = tuned.best_config
            _PICKS.put(direct.kernel, key, (best.kwargs["BLOCK_SIZE"], best.num_warps))
            return
    block, warps = config or INTERPRET_CONFIG
    direct(n_rows * triton.cdiv(n_cols, block), *args, n_cols, *strides, size_class, col_class,
           BLOCK_SIZE=block, num_warps=warps)


def swiglu_forward(gate: torch.Tensor, up: torch.Tensor, config: tuple[int, int] | None = None) -> torch.Tensor:
    """SwiGLU forward ``SiLU(gate) * up`` in one Triton kernel.

    Args:
        gate, up: ``[..., hidden]``, same shape, dtype (bfloat16, float16 or
            float32) and CUDA device (CPU under ``TRITON_INTERPRET=1``). The
            last dimension must be unit-stride; leading dimensions may be
            strided (e.g. the halves of ``y.chunk(2, -1)``), never copied.
        config: ``(BLOCK_SIZE, num_warps)`` to launch without the autotuner;
            None autotunes on a GPU (fixed config in the interpreter).
    Returns:
        ``[..., hidden]``, contiguous, in the inputs' dtype (fp32 math).
    Raises:
        TypeError / ValueError: see :func:`check_operands` and :func:`as_rows`.
    """
    check_operands(gate=gate, up=up)
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if gate.numel() == 0:
        return out
    (g2, u2), n_rows, n_cols, (sg, su), so = _layout(gate=gate, up=up)
    _launch(_FWD_TUNED, _FWD, config, n_rows, n_cols, (g2, u2, out), (sg, su, so))
    return out


def swiglu_backward(d_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
                    config: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """SwiGLU backward in one Triton kernel: ``(d_gate, d_up)``.

    Args:
        d_out, gate, up: ``[..., hidden]``, same shape, dtype and device,
            laid out as in :func:`swiglu_forward`.
        config: as in :func:`swiglu_forward`.
    Returns:
        ``d_gate = d_out * up * s * (1 + gate * (1 - s))`` and
        ``d_up = d_out * gate * s`` with ``s = sigmoid(gate)``, each
        ``[..., hidden]``, contiguous, in the inputs' dtype (fp32 math).
    Raises:
        TypeError / ValueError: see :func:`check_operands` and :func:`as_rows`.
    """
    check_operands(d_out=d_out, gate=gate, up=up)
    d_gate = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    d_up = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if gate.numel() == 0:
        return d_gate, d_up
    (dy2, g2, u2), n_rows, n_cols, strides, s_grad = _layout(d_out=d_out, gate=gate, up=up)
    _launch(_BWD_TUNED, _BWD, config, n_rows, n_cols, (dy2, g2, u2, d_gate, d_up), (*strides, s_grad))
    return d_gate, d_up


class SwiGLUFunction(torch.autograd.Function):
    """Autograd Function over the Triton forward and backward.

    Saves ``gate`` and ``up`` (no intermediate) and recomputes
    ``sigmoid(gate)`` in the backward.
    """

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return swiglu_forward(gate, up)

    @staticmethod
    def backward(ctx, d_out):
        gate, up = ctx.saved_tensors
        # Autograd may hand an expanded gradient (stride 0, e.g. after .sum()):
        # that one is materialised; a contiguous d_out is passed as is.
        if d_out.dim() and d_out.stride(-1) != 1:
            d_out = d_out.contiguous()
        return swiglu_backward(d_out, gate, up)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Differentiable SwiGLU ``SiLU(gate) * up`` on the Triton kernels.

    Shapes, dtypes and errors as in :func:`swiglu_forward`; gradients from
    :func:`swiglu_backward`.
    """
    return SwiGLUFunction.apply(gate, up)


def swiglu_decode(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Forward for decode sizes (1-64 tokens): the Triton kernel launched directly.

    Skips the autotuner's dispatch (a fixed :data:`DECODE_CONFIG`), so it can
    be captured in a CUDA graph and replayed; at these sizes the launch, not
    memory, sets the latency. Arguments, result and errors as in
    :func:`swiglu_forward`.
    """
    return swiglu_forward(gate, up, config=DECODE_CONFIG)
