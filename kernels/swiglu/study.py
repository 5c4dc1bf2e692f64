"""The SwiGLU sweep: every tier, forward and backward, decode to prefill.

Implementations (``impl``):

``eager``       ``F.silu(gate) * up`` (two kernels, one intermediate); on
                ``gemm`` rows cuBLAS ``x @ W`` then the eager activation.
``compile``     ``torch.compile(mode="max-autotune")`` of the eager formula
                (CUDA graphs on); ``compile_no_cudagraphs``: mode
                ``max-autotune-no-cudagraphs``. One fresh compile per case
                (``torch._dynamo.reset``, ``dynamic=False``); ``compile_s``
                (first call, cold: inductor caches disabled) and
                ``recompiles`` go in the row. On the CPU both use mode ``default`` (``compile_mode``).
``triton``      ours, autotuned (:mod:`kernels.swiglu.elementwise`).
``decode``      ours with a fixed config and no autotuner dispatch
                (:func:`~kernels.swiglu.elementwise.swiglu_decode`).
``seed``        the source's kernel as published (stores fp16).
``liger``       Liger-Kernel's ``LigerSiLUMulFunction`` (absent -> unsupported).
``gemm_fused``  SwiGLU in the matmul epilogue (:mod:`kernels.swiglu.gemm`), weights
                packed once by ``pack_gate_up`` outside the timed call.
``matmul``      cuBLAS ``x @ [W_gate | W_up]`` + our Triton activation on
                the strided halves: the baseline of ``gemm_fused``.
``copy``        ``dst.copy_(src)`` moving the same bytes as the case's pass:
                the bandwidth line of the same run.

Row fields: ``series`` (grid|flat|decode|spot|gemm, the config group),
``launch`` (``stream``: launched from Python each repetition; ``graph``:
replayed from a CUDA graph captured once; both timed by
:mod:`kernels.core.timing` with the L2 flushed before each repetition, so their
device times agree and their latencies show what the graph saves), and the
shape fields:

``tokens``   rows of ``gate``/``up`` (``x`` rows for gemm rows);
``hidden``   columns (the FFN hidden size; ``N`` of the gemm);
``numel``    ``tokens * hidden`` elements of ``gate`` (= of the output);
``gemm_in``  model dimension ``K`` of ``x @ W`` on gemm rows, 0 otherwise.

Flat sizes (``series: flat``) are ``numel = 2**k`` laid out as
``[2**k / hidden, hidden]`` with one fixed ``hidden`` from the config.

Minimum bytes (``s`` = element size, ``n = numel``): fwd ``3 n s`` (gate,
up read; out written), bwd ``5 n s`` (d_out, gate, up read; d_gate, d_up
written), fwdbwd ``8 n s``; gemm ``(tokens*gemm_in + gemm_in*2*hidden +
tokens*hidden) s``. FLOPs: 0 for the elementwise op (bandwidth-bound);
``2 * tokens * gemm_in * 2 * hidden`` for the gemm (activation not counted).

Checks: every output against the fp32 reference (:mod:`kernels.swiglu.reference`)
on the same seeded inputs, RMSE/RMS below ``TOLERANCE[dtype]``; the seed's fp16
output is upcast for the comparison and its dtype recorded (``out_dtype``).
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext

import torch

from kernels.core import correctness, harness, passes
from kernels.swiglu.impls import IMPLS as REGISTRY
from kernels.swiglu.reference import swiglu_backward_reference, swiglu_eager, swiglu_reference

STUDY = "swiglu"
SHAPE_FIELDS = ("tokens", "hidden", "numel", "gemm_in")
IMPLS = tuple(REGISTRY)
#: Implementations measured with ``launch: graph`` (others skip graph launches): tag ``graph``.
GRAPH_IMPLS = frozenset(n for n, e in REGISTRY.items() if "graph" in e.tags)
#: Implementations of gemm rows (gemm_in > 0), and those only of gemm rows: tags ``gemm``, ``gemm_only``.
GEMM_ONLY = frozenset(n for n, e in REGISTRY.items() if "gemm_only" in e.tags)
GEMM_IMPLS = GEMM_ONLY | {n for n, e in REGISTRY.items() if "gemm" in e.tags}
COMPILE_MODES = {"compile": "max-autotune", "compile_no_cudagraphs": "max-autotune-no-cudagraphs"}
#: RMSE/RMS tolerance per dtype (a few units of the dtype's rounding).
TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-5}
#: Tensors moved per element by each pass (reads + writes).
TENSORS_PER_PASS = {"fwd": 3, "bwd": 5, "fwdbwd": 8}
SEED = 0
#: The role (config ``roles``) of the cases whose rows also carry a per-kernel breakdown.
PROFILE_ROLE = "profile"


# ----------------------------------------------------------------------------
# cases


def _shapes(group: dict) -> list[dict]:
    if "shapes" in group:
        return [{"tokens": s["tokens"], "hidden": s["hidden"], "numel": s["tokens"] * s["hidden"],
                 "gemm_in": s.get("gemm_in", 0)} for s in group["shapes"]]
    out = []
    for hidden in group["hidden"]:
        if "numel_log2" in group:
            for k in group["numel_log2"]:
                if (2**k) % hidden:
                    raise ValueError(f"numel_log2: 2**{k} elements is not a whole number of rows of {hidden}")
                out.append({"tokens": 2**k // hidden, "hidden": hidden, "numel": 2**k, "gemm_in": 0})
        else:
            out += [{"tokens": t, "hidden": hidden, "numel": t * hidden, "gemm_in": 0} for t in group["tokens"]]
    return out


def cases(sweep: dict, impl: str) -> list[dict]:
    """The cases of ``impl``: the union of the config groups listing it.

    Each group (``sweep["groups"]``) crosses its ``dtypes``, ``passes``,
    shapes and ``launch`` modes (a group's ``warmup_ms`` goes into each of its
    cases: :func:`kernels.core.harness.measure_case` warms up that long); passes other than fwd are skipped for
    impls whose registry entry has the forward alone, and graph launches for impls outside
    :data:`GRAPH_IMPLS`. A case repeated by two groups is kept once, with the first group's
    ``series``. Each case carries ``roles``: the series of the groups it comes from (in config
    order), then each name of ``sweep["roles"]`` whose selector (case fields and their values)
    it matches: ``profile`` (:data:`PROFILE_ROLE`: its rows carry a per-kernel breakdown) and the
    shapes the paper's text quotes.

    Raises:
        ValueError: unknown impl, a gemm-only impl in a group without
            ``gemm_in`` shapes, or a flat size that is not whole rows (the
            latter two as ``'<key>: what is wrong'``, the group's key).
    """
    if impl not in REGISTRY:
        raise ValueError(f"unknown swiglu impl {impl!r}; known: {', '.join(REGISTRY)}")
    fwd_only = REGISTRY[impl].passes == ("fwd",)
    out, seen = [], {}
    for group in sweep["groups"]:
        if impl not in group["impls"]:
            continue
        for shape in _shapes(group):
            is_gemm = shape["gemm_in"] > 0
            if (is_gemm and impl not in GEMM_IMPLS) or (not is_gemm and impl in GEMM_ONLY):
                raise ValueError(f"impls: impl {impl!r} in series {group['series']!r} "
                                 f"{'cannot run' if is_gemm else 'needs'} gemm_in shapes")
            for dtype in group["dtypes"]:
                for p in group["passes"]:
                    if p != "fwd" and (fwd_only or shape["gemm_in"]):
                        continue
                    for launch in group.get("launch", ["stream"]):
                        if launch == "graph" and impl not in GRAPH_IMPLS:
                            continue
                        case = {"series": group["series"], "pass": p, "dtype": dtype, "launch": launch, **shape}
                        if "warmup_ms" in group:
                            case["warmup_ms"] = group["warmup_ms"]
                        key = tuple(v for k, v in sorted(case.items()) if k != "series")
                        if key in seen:
                            if group["series"] not in seen[key]["roles"]:
                                seen[key]["roles"].append(group["series"])
                            continue
                        seen[key] = case
                        case["roles"] = [group["series"]]
                        out.append(case)
    for role, selector in sweep.get("roles", {}).items():
        for case in out:
            if all(case.get(field) == value for field, value in selector.items()):
                case["roles"].append(role)
    return out


def check_config(section: dict) -> None:
    """Check the ``swiglu`` config section beyond its schema, before any job runs.

    In each group of each run (``sweep``, ``quick``, ``smoke``): ``numel_log2`` goes with one
    ``hidden`` (the flat series holds it fixed), and :func:`cases` accepts
    every impl the group lists (gemm-only impls need ``shapes`` with
    ``gemm_in``, only gemm impls run them; flat sizes are whole rows). Each of the run's
    ``roles`` is no series name and selects at least one case.

    Raises:
        ValueError: ``'<run>.groups[<i>].<key>: what is wrong'`` or ``'<run>.roles.<role>: ...'``.
    """
    for run in ("sweep", "quick", "smoke"):
        if run not in section:
            continue
        groups = section[run]["groups"]
        for role, selector in section[run].get("roles", {}).items():
            if role in {g["series"] for g in groups}:
                raise ValueError(f"{run}.roles.{role}: a role cannot be named like a series")
            if not any(all(c.get(f) == v for f, v in selector.items())
                       for impl in section[run]["impls"] for c in cases({"groups": groups}, impl)):
                raise ValueError(f"{run}.roles.{role}: {selector} selects no case of the run")
        for i, group in enumerate(groups):
            key = f"{run}.groups[{i}]"
            if "numel_log2" in group and len(group["hidden"]) != 1:
                raise ValueError(f"{key}.hidden: numel_log2 takes one hidden size (the flat series "
                                 f"holds it fixed), got {group['hidden']}")
            for impl in group["impls"]:
                try:
                    cases({"groups": [group]}, impl)
                except ValueError as exc:
                    raise ValueError(f"{key}.{exc}") from None


# ----------------------------------------------------------------------------
# implementations


def _forward_fn(impl: str, device: torch.device):
    """The forward callable of an elementwise impl, plus extra row fields: the compiled tiers
    here, every other the ``op`` of its registry entry (an anchor not installed raises ImportError:
    an ``unsupported`` row)."""
    if impl in COMPILE_MODES:
        mode = COMPILE_MODES[impl] if device.type == "cuda" else "default"
        torch._dynamo.reset()
        compiled = torch.compile(swiglu_eager, mode=mode, dynamic=False, fullgraph=True)
        if mode == "max-autotune":  # CUDA-graph trees: mark each call as a new step
            def fn(gate, up):
                torch.compiler.cudagraph_mark_step_begin()
                return compiled(gate, up)
            return fn, {"compile_mode": mode}
        return compiled, {"compile_mode": mode}
    if REGISTRY[impl].op is None:
        raise harness.Unsupported(f"impl {impl!r} has no elementwise forward (kernels/swiglu/impls.py names no op)")
    return REGISTRY[impl].load(), {}


def _tuned_config(impl: str) -> str | None:
    """'BLOCK_SIZE/num_warps' the autotuner chose for the last triton launches."""
    if impl != "triton":
        return None
    from kernels.swiglu.elementwise import last_tuned

    return "; ".join(f"{name} {block}/{warps}" for name, (block, warps) in sorted(last_tuned().items())) or None


def _randn(shape, dtype, device, gen, scale=1.0):
    return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * scale).to(dtype)


def _prepare_copy(case: dict, dtype, device) -> harness.Prepared:
    size = torch.empty((), dtype=dtype).element_size()
    n_copy = math.ceil(TENSORS_PER_PASS[case["pass"]] * case["numel"] / 2)
    gen = torch.Generator(device=device).manual_seed(SEED)
    src = _randn((n_copy,), dtype, device, gen)
    dst = torch.empty_like(src)
    dst.copy_(src)
    err = correctness.check_close("copy", dst, src, 0.0)
    return harness.Prepared(fn=lambda: dst.copy_(src), bytes=2 * n_copy * size, flops=0,
                            extra={"rel_err": err, "out_dtype": str(dst.dtype).replace("torch.", "")})


def _prepare_gemm(impl: str, case: dict, dtype, device) -> harness.Prepared:
    from kernels.swiglu.gemm import pack_gate_up, swiglu_gemm, swiglu_matmul

    m, k, n = case["tokens"], case["gemm_in"], case["hidden"]
    gen = torch.Generator(device=device).manual_seed(SEED)
    x = _randn((m, k), dtype, device, gen)
    w = _randn((k, 2 * n), dtype, device, gen, scale=k ** -0.5)
    packed = pack_gate_up(*w.chunk(2, dim=-1)) if impl == "gemm_fused" else None  # once, like a load-time layout
    fns = {"gemm_fused": lambda: swiglu_gemm(x, packed),
           "matmul": lambda: swiglu_matmul(x, w),
           "eager": lambda: swiglu_eager(*(x @ w).chunk(2, dim=-1))}
    if impl not in fns:
        raise harness.Unsupported(f"impl {impl!r} has no gemm variant")
    fn = fns[impl]
    out = fn()
    ref = swiglu_reference(*(x.float() @ w.float()).chunk(2, dim=-1))
    err = correctness.check_close(f"{impl} gemm out", out, ref, TOLERANCE[case["dtype"]])
    size = x.element_size()
    return harness.Prepared(fn=fn, bytes=(m * k + k * 2 * n + m * n) * size, flops=2 * m * k * 2 * n,
                            extra={"rel_err": err, "out_dtype": str(out.dtype).replace("torch.", "")})


def _first_call(impl: str, p: str, forward, gate, up, d_out):
    """Run one pass of an elementwise impl; return (call to time, {output name: tensor}).

    The call is :func:`kernels.core.passes.timed_pass` of ``forward(gate, up)``
    (``triton``: of its autograd Function for fwdbwd, of our Triton backward
    kernel itself for bwd); other impls' backward is autograd of ``forward``.
    """
    if impl == "triton" and p != "fwd":
        from kernels.swiglu.elementwise import swiglu, swiglu_backward
        if p == "bwd":
            call = passes.timed_pass(p, None, backward=lambda: swiglu_backward(d_out, gate, up))
            d_gate, d_up = call()
            return call, {"d_gate": d_gate, "d_up": d_up}
        forward = swiglu

    def fwd():
        return forward(gate, up)

    if p == "fwd":
        return passes.timed_pass(p, fwd), {"out": fwd()}
    gate.requires_grad_(True)
    up.requires_grad_(True)
    out = fwd()
    call = passes.timed_pass(p, fwd, (gate, up), d_out, outputs=out)
    if p == "bwd":
        d_gate, d_up = call()
        return call, {"d_gate": d_gate, "d_up": d_up}
    d_gate, d_up = torch.autograd.grad(out, (gate, up), d_out)
    return call, {"out": out, "d_gate": d_gate, "d_up": d_up}


def prepare(impl: str, case: dict, device: torch.device) -> harness.Prepared:
    """Build seeded inputs on ``device``, run ``impl`` once, check it, return the call to time.

    Raises:
        harness.Unsupported: graph launch off CUDA; an impl without this
            pass or series; Liger not installed (ImportError).
        correctness.Mismatch: output or gradients beyond ``TOLERANCE[dtype]``.
    """
    dtype = getattr(torch, case["dtype"])
    if case["launch"] == "graph" and device.type != "cuda":
        raise harness.Unsupported("CUDA-graph replay needs a CUDA device")
    if case["gemm_in"]:
        return _prepare_gemm(impl, case, dtype, device)
    if impl == "copy":
        return _prepare_copy(case, dtype, device)
    p, tol = case["pass"], TOLERANCE[case["dtype"]]
    if p != "fwd" and REGISTRY[impl].passes == ("fwd",):
        raise harness.Unsupported(f"impl {impl!r} has no backward")
    shape = (case["tokens"], case["hidden"])
    gen = torch.Generator(device=device).manual_seed(SEED)
    gate, up = _randn(shape, dtype, device, gen), _randn(shape, dtype, device, gen)
    n_bytes = TENSORS_PER_PASS[p] * gate.numel() * gate.element_size()
    forward, extra = _forward_fn(impl, device)

    d_out = _randn(shape, dtype, device, gen) if p != "fwd" else None
    refs = {"out": swiglu_reference(gate, up)} if p != "bwd" else {}
    if d_out is not None:  # before Liger's backward overwrites gate/up with the gradients
        refs["d_gate"], refs["d_up"] = swiglu_backward_reference(d_out, gate, up)
    # compile_s is a cold compile: no inductor cache from an earlier case or run.
    cold = torch._inductor.config.patch(force_disable_caches=True) if impl in COMPILE_MODES else nullcontext()
    from torch._dynamo.utils import counters
    graphs_before = counters["stats"]["unique_graphs"]
    if impl == "triton":  # the row's `tuned` names this case's picks alone
        from kernels.swiglu.elementwise import clear_last_tuned

        clear_last_tuned()
    with cold:
        t0 = time.perf_counter()
        fn, results = _first_call(impl, p, forward, gate, up, d_out)
        setup = time.perf_counter() - t0
    err = max(correctness.check_all([(f"{impl} {name} ({results[name].dtype})", results[name], ref, tol)
                                     for name, ref in refs.items()]))
    out = results.get("out", results.get("d_gate"))
    extra.update(rel_err=err, out_dtype=str(out.dtype).replace("torch.", ""))
    if impl in COMPILE_MODES:
        fn()  # a second call: a guard failure here would show as a recompile
        graphs = counters["stats"]["unique_graphs"] - graphs_before
        extra.update(compile_s=round(setup, 3), recompiles=max(0, graphs - 1))
    if (cfg := _tuned_config(impl)) is not None:
        extra["tuned"] = cfg
    profile = PROFILE_ROLE in case.get("roles", ())
    return harness.Prepared(fn=fn, bytes=n_bytes, flops=0, extra=extra, cuda_graph=case["launch"] == "graph",
                            profile=profile)
