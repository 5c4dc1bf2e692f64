"""The tensor-core sweep: two rules of thumb about GEMM throughput, each tested on one GPU.

``padding``
    "Pad matrix dimensions to multiples of 64/128 for tensor cores: 2-4x FLOP throughput".
    A bf16 GEMM at an aligned size against unaligned neighbours (config ``padding``: each set
    an ``aligned`` size and its ``unaligned`` neighbours, M = N = K).
``fp8``
    "BF16 / FP8 tensor cores: 2-4x FLOP throughput per clock", read as FP8 against BF16: the
    same GEMM with FP8 operands against bf16 at each size of config ``fp8`` (M = N = K).

Implementations (``impl``, registry :mod:`kernels.tensorcore.impls`), each computing
``out = a @ b.t()`` with ``a`` [M, K] and ``b`` [N, K] row-major (the layout of
``torch.nn.Linear``'s weight, and the one ``torch._scaled_mm`` takes its second operand in),
``out`` [M, N] bfloat16:

``bf16``  ``torch.matmul`` on bfloat16 operands (cuBLAS on CUDA, float32 accumulation).
``fp8``   ``torch._scaled_mm`` on float8_e4m3fn operands, each quantised with one float32
          scale per tensor (``amax / 448``, 448 the largest e4m3fn value: dynamic per-tensor
          scaling, torchao's ``tensorwise`` float8 recipe and Transformer Engine's
          ``Float8CurrentScaling``), ``b`` passed column-major as ``b.t()``, PyTorch's default
          accumulation (``use_fast_accum=False``). It needs FP8 tensor cores (compute
          capability 8.9 or newer) on CUDA, and K and N multiples of 16 there; PyTorch 2.13
          also runs it on the CPU.

Quantising is not timed: the timed call is the GEMM alone, the work whose throughput the rules
are about. Inputs: N(0, 1), seeded (:data:`SEED`), drawn in float32 and cast (bf16) or
quantised (fp8).

Cases: ``pass`` fwd, ``dtype`` (the operands': bfloat16, float8_e4m3fn), the shape fields
``m``, ``n``, ``k``, ``aligned`` (padding cases: the aligned size of their set), ``warmup_ms``
(the section's, where it gives one: :func:`kernels.core.harness.measure_case` warms up that long) and
``roles`` (``padding``, ``fp8``: the parts of the config a case comes from; a bf16 case at an FP8
size is FP8's baseline, and a padding case too where the size is in a set).

FLOPs: ``2 M N K``. Bytes: each operand read once and the output written once,
``(M K + N K) s_in + M N s_out`` (s the element size), plus the two 4-byte scales of fp8.

Checks: the output against the float64 product of the same operands (fp8: of the dequantised
quantised operands, so the check sees the GEMM's error and not the quantisation's), RMSE/RMS
below :data:`TOLERANCE` (:func:`kernels.core.correctness.check_close`).
"""

from __future__ import annotations

import torch

from kernels.core import correctness, harness
from kernels.tensorcore.impls import IMPLS as REGISTRY

STUDY = "tensorcore"
SHAPE_FIELDS = ("m", "n", "k")
IMPLS = tuple(REGISTRY)
#: The operands' dtype of each implementation (the rows' ``dtype``).
DTYPES = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}
#: RMSE/RMS tolerance of the bfloat16 output against float64: its rounding (about 2e-3 relative,
#: 8 significand bits) with room to spare; a wrong result is off by far more.
TOLERANCE = 1e-2
SEED = 0
#: The largest finite float8_e4m3fn value: a tensor's scale maps its amax there.
FP8_MAX = 448.0


# ----------------------------------------------------------------------------
# cases


def _case(dtype: str, size: int, roles: list[str], **extra) -> dict:
    return {"pass": "fwd", "dtype": dtype, "m": size, "n": size, "k": size, **extra, "roles": roles}


def cases(sweep: dict, impl: str) -> list[dict]:
    """The cases of ``impl`` in a config section (``sweep``, ``quick`` or ``smoke``).

    ``bf16``: every size of every ``padding`` set (with the set's ``aligned`` size, role
    ``padding``), and every ``fp8`` size (role ``fp8``; a size in both is one case with both
    roles). ``fp8``: every ``fp8`` size. M = N = K = size; each case gets the section's
    ``warmup_ms`` where it has one.

    Raises:
        ValueError: unknown impl.
    """
    if impl not in REGISTRY:
        raise ValueError(f"unknown tensorcore impl {impl!r}; known: {', '.join(REGISTRY)}")
    out: dict[int, dict] = {}
    if impl == "bf16":
        for group in sweep["padding"]:
            for size in (group["aligned"], *group["unaligned"]):
                out[size] = _case(DTYPES[impl], size, ["padding"], aligned=group["aligned"])
    for size in sweep["fp8"]:
        if size in out:
            out[size]["roles"].append("fp8")
        else:
            out[size] = _case(DTYPES[impl], size, ["fp8"])
    if "warmup_ms" in sweep:
        for case in out.values():
            case["warmup_ms"] = sweep["warmup_ms"]
    return list(out.values())


def check_config(section: dict) -> None:
    """Check the ``tensorcore`` config section beyond its schema, before any job runs: in each run
    (``sweep``, ``quick``, ``smoke``), every size of the ``padding`` sets is in one set once (an
    aligned size is compared with its own neighbours only).

    Raises:
        ValueError: ``'<run>.padding[<i>]: size <n> is already in padding[<j>]'``.
    """
    for run in ("sweep", "quick", "smoke"):
        seen = {}
        for i, group in enumerate(section.get(run, {}).get("padding", [])):
            for size in (group["aligned"], *group["unaligned"]):
                if size in seen:
                    raise ValueError(f"{run}.padding[{i}]: size {size} is already in padding[{seen[size]}] "
                                     f"(each size belongs to one set)")
                seen[size] = i


# ----------------------------------------------------------------------------
# implementations


def quantise_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (any shape, float32) as float8_e4m3fn with one float32 scale for the whole tensor.

    Returns ``(q, scale)``: ``q`` of ``x``'s shape and dtype float8_e4m3fn, ``x / scale`` rounded
    (clamped to +-448), and ``scale`` a 0-d float32 tensor, ``amax(|x|) / 448`` (1 for an
    all-zero ``x``), so that ``q * scale`` approximates ``x``: the dequantising scale
    ``torch._scaled_mm`` takes. Dynamic per-tensor scaling, as torchao's ``tensorwise`` float8
    recipe and Transformer Engine's ``Float8CurrentScaling`` scale.
    """
    amax = x.abs().amax().float()
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    q = (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def _require_fp8(device: torch.device) -> None:
    """Raise :class:`kernels.core.harness.Unsupported` on a CUDA GPU without FP8 tensor cores (compute
    capability below 8.9: Ada and Hopper have them)."""
    if device.type != "cuda":
        return
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        raise harness.Unsupported(f"FP8 tensor cores need compute capability 8.9 or newer; "
                                  f"{torch.cuda.get_device_name(device)} has {major}.{minor}")


def _first_call(fn):
    """``fn()`` (the first fp8 GEMM), a RuntimeError of ``torch._scaled_mm`` as
    :class:`kernels.core.harness.Unsupported` (a size or device it does not take); out of memory stays
    out of memory."""
    try:
        return fn()
    except torch.OutOfMemoryError:
        raise
    except RuntimeError as exc:
        raise harness.Unsupported(f"torch._scaled_mm cannot run this case here: {exc}") from None


def prepare(impl: str, case: dict, device: torch.device) -> harness.Prepared:
    """Build seeded N(0, 1) operands on ``device``, run ``impl`` once, check it against float64,
    return the GEMM to time (``out = a @ b.t()``, a [M, K], b [N, K], out [M, N] bfloat16).

    Raises:
        ValueError: unknown impl.
        harness.Unsupported: fp8 on a GPU without FP8 tensor cores, or a case ``torch._scaled_mm``
            refuses (K or N not a multiple of 16 on CUDA).
        correctness.Mismatch: RMSE/RMS of the output against float64 above :data:`TOLERANCE`.
    """
    if impl not in REGISTRY:
        raise ValueError(f"unknown tensorcore impl {impl!r}; known: {', '.join(REGISTRY)}")
    if impl == "fp8":
        _require_fp8(device)
    m, n, k = case["m"], case["n"], case["k"]
    gen = torch.Generator(device=device).manual_seed(SEED)
    a = torch.randn((m, k), generator=gen, device=device)
    b = torch.randn((n, k), generator=gen, device=device)
    if impl == "bf16":
        a, b = a.bfloat16(), b.bfloat16()

        def fn():
            return torch.matmul(a, b.t())

        out = fn()
        ref = a.double() @ b.double().t()
        n_bytes = (m * k + n * k) * 2 + m * n * 2
    else:
        (a8, scale_a), (b8, scale_b) = quantise_fp8(a), quantise_fp8(b)

        def fn():
            return torch._scaled_mm(a8, b8.t(), scale_a, scale_b, out_dtype=torch.bfloat16)

        out = _first_call(fn)
        ref = (a8.double() * scale_a.double()) @ (b8.double() * scale_b.double()).t()
        n_bytes = (m * k + n * k) * 1 + m * n * 2 + 2 * 4
    err = correctness.check_close(f"{impl} out ({out.dtype})", out, ref, TOLERANCE)
    return harness.Prepared(fn=fn, bytes=n_bytes, flops=2 * m * n * k, extra={"rel_err": err})
