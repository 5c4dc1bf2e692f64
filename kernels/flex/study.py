"""The FlexAttention study: block-sparse FlexAttention against dense causal attention.

Implementations (``impl``):

``flex``            ``torch.compile(flex_attention)``, default kernel options.
``flex_autotune``   the same compiled with ``mode="max-autotune-no-cudagraphs"``.
``flex_flash``      the same with ``kernel_options={"BACKEND": "FLASH"}``: the
                    FlashAttention-4 CuTe-DSL kernels instead of the Triton
                    template (CUDA only; needs flash-attn-4 and nvidia-cutlass-dsl).
                    Whatever the backend raises on the first call (its
                    refusals: block sizes, captured tensors that need
                    gradients, a missing package) makes the case
                    ``unsupported`` with the backend's message; out of memory
                    stays ``oom`` and a CUDA error ``error``.
``sdpa_flash``      SDPA forced to FlashAttention-2 (``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``),
``sdpa_cudnn``      ... to cuDNN, ``sdpa_efficient`` ... to the memory-efficient kernel:
                    the dense baselines, ``is_causal=True``, measured once per
                    shape with the causal mask (they have no other mask family);
                    their registry entries' ``op`` (:mod:`kernels.flex.dense`).
``sdpa_masked``     SDPA (default backend choice) with a materialised boolean N x N mask,
                    for every mask family (score_mod none only).
``naive``           ``softmax(scale·QKᵀ (fp32) + mask) V`` in plain PyTorch with the
                    score_mod applied to the materialised scores: O(N²) memory.

Passes (:mod:`kernels.core.passes`): ``fwd`` (inputs without grad), ``bwd``
(``torch.autograd.grad`` of a retained forward graph with a fixed output
gradient), ``fwdbwd`` (both).
FlexAttention's backward is not implemented on the CPU and the FA2/cuDNN
backends are CUDA kernels: those cases are ``unsupported`` there.

Counting (per case, ``s`` = bytes per element, densities from :mod:`.density`):
    flops (fwd)   = 4·B·H·N²·D·density_elements   (QKᵀ and PV on allowed pairs)
    flops (bwd)   = 2.5 × fwd (five matmuls instead of two); fwdbwd = 3.5 × fwd
    flops_blocks  = the same with density_blocks (the work on computed 128² tiles)
    bytes (fwd)   = (2·H + 2·H_kv)·B·N·D·s         (read q, k, v; write o)
    bytes (bwd)   = (4·H + 4·H_kv)·B·N·D·s         (read q, k, v, o, dO; write dq, dk, dv)
    bytes (fwdbwd)= the sum of both.
The small log-sum-exp vector is left out.

Every case is checked before timing against float64 math
(:mod:`.reference`) on batch 0 and the last KV-head group (query heads
``H - H/H_kv .. H-1``), which covers the outputs and every gradient of that
slice exactly while keeping the float64 work small at N = 32K; ``rel_err`` is
the largest RMSE/RMS over the checked tensors. The peak-memory counter is
reset after the check, so ``peak_mem_bytes`` covers the inputs, the mask and
the timed calls only.
"""

from __future__ import annotations

import itertools
import statistics
import time

from kernels.core import correctness, harness, passes
from kernels.flex import density
from kernels.flex.impls import IMPLS as REGISTRY

STUDY = "flex"
SHAPE_FIELDS = ("batch", "heads", "kv_heads", "seqlen", "head_dim", "mask", "window", "documents", "doc_dist",
                "prefix", "score_mod", "density_blocks", "density_elements")
IMPLS = tuple(REGISTRY)  # the block_mask and materialised tags and the dense baselines (is_dense) split it (a test checks)

#: Tolerance on RMSE/RMS of the output against float64; gradients get twice as much.
TOLERANCE = {"bfloat16": 0.02, "float16": 0.01, "float32": 2e-3}
PASS_FLOP_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwdbwd": 3.5}
_WINDOW_MASKS = ("window", "document_window")
_DOCUMENT_MASKS = ("document", "document_window")


def takes_block_mask(impl: str) -> bool:
    """Whether ``impl`` is a FlexAttention variant, called with the case's block mask: its registry
    entry is tagged ``block_mask`` (its mode and backend: kernels.flex.ops ``MODES``, ``BACKENDS``)."""
    return "block_mask" in REGISTRY[impl].tags


def is_dense(impl: str) -> bool:
    """Whether ``impl`` is a dense causal baseline: its registry entry names an ``op(q, k, v) -> o``
    (kernels/flex/impls.py), run once per shape with the causal mask."""
    return REGISTRY[impl].op is not None


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _mask_points(spec: dict) -> list[dict]:
    """Expand one ``masks`` entry of a group (scalars or lists) into mask points with unused knobs zeroed."""
    mask = spec["mask"]
    windows = _as_list(spec.get("window", 0)) if mask in _WINDOW_MASKS else [0]
    docs = _as_list(spec.get("documents", 1)) if mask in _DOCUMENT_MASKS else [1]
    dists = _as_list(spec.get("doc_dist", "uniform")) if mask in _DOCUMENT_MASKS else ["none"]
    prefixes = _as_list(spec.get("prefix", 0)) if mask == "prefix" else [0]
    mods = _as_list(spec.get("score_mod", "none"))
    return [dict(mask=mask, window=int(w), documents=int(n), doc_dist=d, prefix=int(p), score_mod=s)
            for w, n, d, p, s in itertools.product(windows, docs, dists, prefixes, mods)]


_CAUSAL = dict(mask="causal", window=0, documents=1, doc_dist="none", prefix=0, score_mod="none")


def cases(sweep: dict, impl: str) -> list[dict]:
    """Cases of ``impl``: the union over ``sweep["groups"]`` of dtype × (batch, seqlen) × (heads, kv_heads) ×
    head_dim × pass × mask point, without duplicates.

    A group runs the impls it lists; the dense baselines run every shape of
    every group with ``dense: true`` (the default), once, with the causal
    mask. An impl absent from ``sweep["impls"]`` has no cases. Each case carries ``roles``, the
    names of the groups it comes from (in config order); the report selects rows by them.
    """
    if impl not in REGISTRY:
        raise ValueError(f"unknown impl {impl!r}; expected one of {tuple(REGISTRY)}")
    if impl not in sweep["impls"]:
        return []
    seed = int(sweep.get("seed", 0))
    out, seen = [], {}
    for group in sweep["groups"]:
        if is_dense(impl):
            if not group.get("dense", True):
                continue
            points = [_CAUSAL]
        elif impl in group["impls"]:
            points = [p for spec in group["masks"] for p in _mask_points(spec)]
        else:
            continue
        for dtype, (batch, seqlen), (heads, kv_heads), head_dim, point, pas in itertools.product(
                group["dtypes"], group["shapes"], group["heads"], group["head_dims"], points, group["passes"]):
            lengths = _lengths(point, seqlen, seed)
            d_elem, d_blk = density.densities(point["mask"], seqlen, point["window"], lengths, point["prefix"])
            case = {"pass": pas, "dtype": dtype, "batch": int(batch), "heads": int(heads),
                    "kv_heads": int(kv_heads), "seqlen": int(seqlen), "head_dim": int(head_dim), **point,
                    "density_blocks": round(d_blk, 6), "density_elements": round(d_elem, 6), "seed": seed}
            key = tuple(sorted(case.items()))
            if key in seen:
                if group["name"] not in seen[key]["roles"]:
                    seen[key]["roles"].append(group["name"])
                continue
            seen[key] = case
            case["roles"] = [group["name"]]
            out.append(case)
    return out


#: The knobs of a mask point each mask family uses (score_mod: every family).
MASK_KNOBS = {"causal": (), "window": ("window",), "document": ("documents", "doc_dist"),
              "document_window": ("documents", "doc_dist", "window"), "prefix": ("prefix",)}


def check_config(section: dict) -> None:
    """Check the ``flex`` config section beyond its schema, before any job runs.

    In each group of ``sweep``, ``smoke`` and ``quick``: its impls are not dense baselines
    (those of :func:`is_dense` follow the group's ``dense``); heads is a multiple of kv_heads
    in every ``heads`` pair; a mask point sets only the knobs its family uses
    (:data:`MASK_KNOBS`), and its ``documents`` and ``prefix`` are at most the
    seqlen of every shape of the group.

    Raises:
        ValueError: ``'<run>.groups[<i>].<key>: what is wrong'``.
    """
    for run in [run for run in ("sweep", "smoke", "quick") if run in section]:
        for i, group in enumerate(section[run]["groups"]):
            key = f"{run}.groups[{i}]"
            dense = [impl for impl in group["impls"] if impl in REGISTRY and is_dense(impl)]
            if dense:
                raise ValueError(f"{key}.impls: {dense[0]} is a dense baseline: it runs a group's shapes "
                                 "through the group's `dense` (true by default), not its impls")
            for heads, kv_heads in group["heads"]:
                if heads % kv_heads:
                    raise ValueError(f"{key}.heads: {heads} heads are not a multiple of {kv_heads} kv_heads")
            seqlen = min(n for _, n in group["shapes"])
            for j, spec in enumerate(group["masks"]):
                knobs = MASK_KNOBS[spec["mask"]]
                unused = sorted(set(spec) - {"mask", "score_mod", *knobs})
                if unused:
                    raise ValueError(f"{key}.masks[{j}].{unused[0]}: mask {spec['mask']} does not use "
                                     f"{unused[0]} (its knobs: {', '.join([*knobs, 'score_mod'])})")
                for knob in ("documents", "prefix"):
                    if knob in spec and max(_as_list(spec[knob])) > seqlen:
                        raise ValueError(f"{key}.masks[{j}].{knob}: {max(_as_list(spec[knob]))} is more than "
                                         f"seqlen {seqlen} of the group's shapes ({knob} <= seqlen)")


def _lengths(point: dict, seqlen: int, seed: int):
    from kernels.flex.masks import document_lengths

    if point["mask"] not in _DOCUMENT_MASKS:
        return None
    return document_lengths(seqlen, point["documents"], point["doc_dist"], seed)


def flops(case: dict, which: str = "density_elements") -> int:
    """4·B·H·N²·D·density × pass factor (see the module docstring); ``which`` names the density."""
    fwd = 4 * case["batch"] * case["heads"] * case["seqlen"] ** 2 * case["head_dim"] * case[which]
    return int(round(fwd * PASS_FLOP_FACTOR[case["pass"]]))


def min_bytes(case: dict, itemsize: int) -> int:
    """Minimum HBM traffic in bytes (see the module docstring)."""
    per_head = case["batch"] * case["seqlen"] * case["head_dim"] * itemsize
    fwd = (2 * case["heads"] + 2 * case["kv_heads"]) * per_head
    bwd = (4 * case["heads"] + 4 * case["kv_heads"]) * per_head
    return {"fwd": fwd, "bwd": bwd, "fwdbwd": fwd + bwd}[case["pass"]]


def _timed_builds(build, device, reps: int = 3) -> tuple[object, float, float]:
    """Build once (compiling if needed), then ``reps`` more times; return (result, first s, median ms)."""
    t0 = time.perf_counter()
    result = build()
    harness.synchronize(device)
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        result = build()
        harness.synchronize(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return result, first, statistics.median(times)


def _unique_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _attention_fn(impl: str, case: dict, mask_mod, score_mod, device, extra: dict):
    """The callable ``attn(q, k, v)`` of ``impl``; fills ``extra`` with mask-build time."""
    import torch
    import torch.nn.functional as F

    gqa = case["heads"] != case["kv_heads"]
    n = case["seqlen"]
    if takes_block_mask(impl):
        from kernels.flex import ops

        block_mask, first, extra["mask_build_ms"] = _timed_builds(
            lambda: ops.build_block_mask(mask_mod, n, device), device)
        extra["mask_compile_s"] = round(first, 3)
        return lambda q, k, v: ops.attention(q, k, v, block_mask, score_mod, mode=ops.MODES[impl],
                                             backend=ops.BACKENDS[impl])
    if is_dense(impl):
        return REGISTRY[impl].load()
    idx = torch.arange(n, device=device)
    zero = torch.zeros((), dtype=torch.int64, device=device)
    keep, _, extra["mask_build_ms"] = _timed_builds(
        lambda: torch.as_tensor(mask_mod(zero, zero, idx[:, None], idx[None, :]), device=device).expand(n, n)
        .contiguous(), device)
    if impl == "sdpa_masked":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=gqa)
    b_idx = torch.arange(case["batch"], device=device)[:, None, None, None]
    h_idx = torch.arange(case["heads"], device=device)[None, :, None, None]
    group = case["heads"] // case["kv_heads"]

    def naive(q, k, v):
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        s = (q @ k.transpose(-2, -1)).float() * q.shape[-1] ** -0.5
        if score_mod is not None:
            s = score_mod(s, b_idx, h_idx, idx[:, None], idx[None, :])
        return torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).to(q.dtype) @ v

    return naive


def _is_missing_backend(exc: BaseException) -> bool:
    msg = str(exc)
    return isinstance(exc, RuntimeError) and ("No available kernel" in msg or "No viable backend" in msg)


def backend_message(exc: BaseException) -> str:
    """``'<type>: <first line>'`` of the innermost exception under the compiler's wrappers
    (``inner_exception`` of Dynamo's BackendCompilerFailed / InductorError, then ``__cause__``):
    the message of the code that refused the case, at most 500 characters."""
    while getattr(exc, "inner_exception", None) is not None or exc.__cause__ is not None:
        exc = getattr(exc, "inner_exception", None) or exc.__cause__
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]


def make_inputs(case: dict, device, grad: bool, seqlen_q: int | None = None):
    """Seeded N(0, 1) attention inputs in the case's dtype on ``device`` (its generator, seeded
    with the case's ``seed``, default 0): q ``[B, heads, seqlen_q, D]`` (``seqlen_q`` default: the
    case's ``seqlen``), k and v ``[B, kv_heads, seqlen, D]``, and with ``grad`` the cotangent of the
    output, shaped as q (else None)."""
    import torch

    dtype = getattr(torch, case["dtype"])
    b, h, hkv, n, d = (case[f] for f in ("batch", "heads", "kv_heads", "seqlen", "head_dim"))
    nq = n if seqlen_q is None else seqlen_q
    gen = torch.Generator(device=device).manual_seed(int(case.get("seed", 0)))
    q = torch.randn(b, h, nq, d, generator=gen, device=device, dtype=dtype)
    k = torch.randn(b, hkv, n, d, generator=gen, device=device, dtype=dtype)
    v = torch.randn(b, hkv, n, d, generator=gen, device=device, dtype=dtype)
    dout = torch.randn(b, h, nq, d, generator=gen, device=device, dtype=dtype) if grad else None
    return q, k, v, dout


def prepare(impl: str, case: dict, device) -> harness.Prepared:
    """Build seeded inputs on ``device``, run ``impl`` once, check it against float64, return the timed call.

    Raises harness.Unsupported where the impl cannot run the case here,
    correctness.Mismatch when it is wrong, ValueError for a case that makes no
    sense (a dense baseline with a non-causal mask, an unknown impl).
    """
    import torch

    from kernels.flex import masks, reference, score_mods

    if impl not in REGISTRY:
        raise ValueError(f"unknown impl {impl!r}; expected one of {tuple(REGISTRY)}")
    pas, grad = case["pass"], case["pass"] != "fwd"
    if is_dense(impl) and (case["mask"] != "causal" or case["score_mod"] != "none"):
        raise ValueError(f"{impl} is a dense causal baseline; got mask={case['mask']}, score_mod={case['score_mod']}")
    if impl == "flex_flash":
        from kernels.flex import ops

        missing = ops.flash_backend_missing()
        if missing:
            raise harness.Unsupported(f"flex_flash: {missing}")
        if device.type != "cuda":
            raise harness.Unsupported("flex_flash: FlexAttention's FLASH backend runs on CUDA only (on the CPU "
                                      "FlexAttention ignores BACKEND and lowers to its C++ kernel)")
    if takes_block_mask(impl) and grad and device.type != "cuda":
        raise harness.Unsupported("FlexAttention backward is not implemented on the CPU (NotImplementedError)")
    if impl in ("sdpa_flash", "sdpa_cudnn") and device.type != "cuda":
        raise harness.Unsupported(f"{impl}: the FlashAttention-2 and cuDNN SDPA backends are CUDA kernels")
    if impl == "sdpa_masked" and case["score_mod"] != "none":
        raise harness.Unsupported("SDPA takes a boolean mask only here; score mods need flex or naive")

    b, h, hkv, n, d = (case[f] for f in ("batch", "heads", "kv_heads", "seqlen", "head_dim"))
    if h % hkv:
        raise ValueError(f"heads={h} is not a multiple of kv_heads={hkv}")
    q, k, v, dout = make_inputs(case, device, grad)
    lengths = _lengths(case, n, int(case.get("seed", 0)))
    inline = impl == "flex_flash"  # its CuTe lowering refuses captured 0-d tensors (kernels.flex.masks)
    mask_mod = masks.mask_mod_for(case["mask"], n, case["window"], lengths, case["prefix"], device, inline)
    score_mod = score_mods.score_mod_for(case["score_mod"], h, device, inline=inline)

    extra = {"flops_blocks": flops(case, "density_blocks")}
    graphs0 = _unique_graphs()
    attn = _attention_fn(impl, case, mask_mod, score_mod, device, extra)
    if grad:
        q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    t0 = time.perf_counter()
    try:
        out = attn(q, k, v)
        got = (out,) + (torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) if grad else ())
        harness.synchronize(device)
    except Exception as exc:
        crashed = isinstance(exc, torch.OutOfMemoryError) or any(
            s in str(exc) for s in ("out of memory", "CUDA error"))  # oom rows, and errors, not refusals
        if impl == "flex_flash" and not crashed:
            raise harness.Unsupported(f"flex_flash: {backend_message(exc)}") from exc
        if _is_missing_backend(exc):
            raise harness.Unsupported(f"{impl}: {exc}".splitlines()[0][:300]) from exc
        raise
    if takes_block_mask(impl):
        extra["compile_s"] = round(time.perf_counter() - t0, 3)
        extra["recompiles"] = _unique_graphs() - graphs0

    # float64 check on batch 0 and the last KV-head group
    g = h // hkv
    hs, ks = slice(h - g, h), slice(hkv - 1, hkv)
    args = (q[:1, hs], k[:1, ks], v[:1, ks])
    if grad:
        want = reference.attention_reference_grads(*args, dout[:1, hs], mask_mod, score_mod, head_offset=h - g)
        got = (got[0][:1, hs], got[1][:1, hs], got[2][:1, ks], got[3][:1, ks])
        names = ("out", "dq", "dk", "dv")
    else:
        want, got, names = (reference.attention_reference(*args, mask_mod, score_mod, head_offset=h - g),), \
            (got[0][:1, hs],), ("out",)
    tol = TOLERANCE[case["dtype"]]
    extra["rel_err"] = max(correctness.check_all([(f"{impl} {name}", x, y, tol if name == "out" else 2 * tol)
                                                  for name, x, y in zip(names, got, want)]))
    del want, got
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()

    fn = passes.timed_pass(pas, lambda: attn(q, k, v), (q, k, v), dout, outputs=out)
    del out   # kept by the bwd call alone
    return harness.Prepared(fn=fn, bytes=min_bytes(case, q.element_size()), flops=flops(case), extra=extra)
