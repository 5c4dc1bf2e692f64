"""The GDN study: naive loop, fused recurrent and chunked Triton kernels, FLA, FlashQLA, FlashInfer;
forward (``fwd``), backward (``bwd``) and training step (``fwdbwd``).

Implementations (``impl``):
    naive          the token loop in PyTorch (float32), :mod:`kernels.gdn.naive`;
                   only up to ``naive_max_seqlen`` tokens, larger cases are rows
                   with status ``unsupported`` (never extrapolated).
    recurrent      :func:`kernels.gdn.recurrent.fused_recurrent_gated_delta_rule`.
    chunk          :func:`kernels.gdn.chunk.chunk_gated_delta_rule`.
    fla_chunk      ``fla.ops.gated_delta_rule.chunk_gated_delta_rule`` with
                   ``FLA_FLASH_QLA=0`` (FLA's own Triton kernels).
    fla_recurrent  ``fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule``
                   (isolated: it hit an illegal memory access on the H200).
    flash_qla      ``flash_qla.chunk_gated_delta_rule`` (TileLang, SM90+).
    flashinfer     ``flashinfer.chunk_gated_delta_rule`` (CuTe DSL, SM90+; forward only), through
                   :mod:`kernels.gdn.flashinfer` (FLA's arguments; the version it pins).

Inputs (FLA's layout, the paper's setting): q, k L2-normalised N(0, 1) and
v N(0, 1) in ``dtype``; g = logsigmoid(N(0, 1)) / 16 and beta = sigmoid(N(0, 1))
in float32; no initial state; the final state is returned and checked. A case
with ``value_heads`` (grouped value attention, GVA) gives q and k ``heads``
heads and v, g, beta, the states and o ``value_heads`` heads (a multiple of
``heads``); a case without it has as many of each.

FlashQLA's published configurations (config key ``published``, in the sweep
and its ``backward``) add their shapes for the impls listed there, on top of
the impl's other shapes (``impl_shapes`` included). Every
output is checked against the float64 chunked reference
(:func:`kernels.gdn.naive.naive_chunk_gated_delta_rule`, itself tested against
the token loop) with RMSE/RMS <= ``TOLERANCE`` for o and the final state.

Passes ``bwd`` and ``fwdbwd`` (config key ``passes``; shapes under
``backward``) run for the impls with a backward (``BWD_IMPLS``): chunk (the
Triton backward of :mod:`kernels.gdn.chunk_bwd`), fla_chunk, flash_qla and
naive (autograd through the float32 token loop, up to
``backward.naive_max_seqlen``). The loss is sum(o * do) + sum(final_state *
dht) with seeded N(0, 1) do and dht. Before timing, every gradient (dq, dk,
dv, dg, dbeta) is compared with float64 autograd of the chunked reference
(:func:`kernels.gdn.naive.reference_grads`; RMSE/RMS, the RMS in the
denominator at least ``GRAD_FLOOR``, <= ``TOLERANCE``: 0.008 for dq, dk, dv,
0.02 for dg, dbeta). Timed (:mod:`kernels.core.passes`): ``bwd`` =
``torch.autograd.grad`` of (o, final state) with the fixed do, dht on a
graph kept from one forward (``retain_graph=True``), i.e. the backward
kernels alone; ``fwdbwd`` = forward + that backward.

Rows of the main shapes marked ``profile: true`` in the config (role ``profile``) also carry ``kernels``, the device
time of each kernel of one call (:func:`kernels.core.profiling.kernel_breakdown`),
so the paper can say which kernel a gap comes from; not for ``naive``, whose
token loop launches tens of thousands of tiny kernels per call: its breakdown
would say nothing and only lengthen the job.
"""

from __future__ import annotations

import os
import sys
import time

from kernels.core import correctness, harness, passes
from kernels.gdn.impls import IMPLS as REGISTRY
from kernels.gdn.flops import gdn_bwd_bytes, gdn_bwd_flops, gdn_fwd_bytes, gdn_fwd_flops

# FLA's own kernels, not its FlashQLA dispatch (FLA >= 0.5.2 hands chunk_gated_delta_rule to
# FlashQLA when it is importable): set before FLA is imported and before the job's env block.
os.environ["FLA_FLASH_QLA"] = "0"

STUDY = "gdn"
SHAPE_FIELDS = ("batch", "seqlen", "heads", "head_dim", "num_seqs", "varlen")
IMPLS = tuple(REGISTRY)
BWD_IMPLS = tuple(name for name, impl in REGISTRY.items() if "bwd" in impl.passes)
ISOLATE = frozenset({"fla_recurrent"})
#: RMSE/RMS tolerance of each checked output against float64 (flash-linear-attention's test
#: ratios): o and the final state, and the gradients (dh0: of the initial state).
TOLERANCE = {"o": 0.005, "final_state": 0.005,
             "dq": 0.008, "dk": 0.008, "dv": 0.008, "dh0": 0.008, "dg": 0.02, "dbeta": 0.02}
#: RMS below which a reference gradient counts as zero (strong gates make dg and the initial
#: state's gradient ~1e-16, float64 rounding noise): the error is then relative to it.
GRAD_FLOOR = 1e-6


def _profiled(impl: str, case: dict) -> bool:
    return impl != "naive" and "profile" in case.get("roles", ())


def _fixed(shapes: list[dict]) -> list[dict]:
    """Fixed-length shapes from config entries ``{batch, seqlen, heads[, value_heads]}``;
    ``value_heads`` is kept only where it differs from ``heads`` (GVA), so a case with as
    many value heads as heads is the same case, and row, as one written without it."""
    return [dict(batch=s["batch"], seqlen=s["seqlen"], heads=s["heads"], num_seqs=s["batch"], varlen=False,
                 **({"value_heads": s["value_heads"]} if s.get("value_heads", s["heads"]) != s["heads"] else {}))
            for s in shapes]


def value_heads(case: dict) -> int:
    """Number of value heads of a case (``value_heads``, or ``heads`` without GVA)."""
    return case.get("value_heads", case["heads"])


def _shapes(block: dict) -> list[tuple[dict, list[str]]]:
    """(shape, roles) of a config block: ``main_shapes`` (role ``main``, and ``profile`` where the
    entry says ``profile: true``), the fixed-length ``seqlen_sweep`` (``sweep``) and the ``varlen``
    batches (``varlen``)."""
    shapes = [(s, ["main", "profile"] if e.get("profile") else ["main"])
              for e, s in zip(block["main_shapes"], _fixed(block["main_shapes"]))]
    sw = block["seqlen_sweep"]
    shapes += [(dict(batch=sw["batch"], seqlen=t, heads=sw["heads"], num_seqs=sw["batch"], varlen=False), ["sweep"])
               for t in sw["seqlens"]]
    shapes += [(dict(batch=1, seqlen=s["seqlen"], heads=s["heads"], num_seqs=s["num_seqs"], varlen=True), ["varlen"])
               for s in block.get("varlen", [])]
    return shapes


def _impl_shapes(block: dict, impl: str, key: str) -> list[tuple[dict, list[str]]]:
    """The (shape, roles) of the block's own shapes that ``impl`` runs: all of them, or those its
    ``impl_shapes`` entry lists, in its order: a shape (one of the block's, whose roles it takes)
    or a role's name (``main``, ``profile``, ``sweep``, ``varlen``: every block shape of that role,
    in the block's order).

    Raises:
        ValueError: ``'<key>impl_shapes.<impl>[<i>]: ...'`` for a listed shape the block does not
            have, or a role none of its shapes has.
    """
    listed = _shapes(block)
    only = block.get("impl_shapes", {}).get(impl)
    if only is None:
        return listed
    out = []
    for i, entry in enumerate(only):
        if isinstance(entry, str):
            found = [(s, r) for s, r in listed if entry in r]
            if not found:
                raise ValueError(f"{key}impl_shapes.{impl}[{i}]: no shape of the block has role {entry!r}")
            out += found
            continue
        shape = _fixed([entry])[0]
        roles = [r for s, r in listed if s == shape]
        if not roles:
            raise ValueError(f"{key}impl_shapes.{impl}[{i}]: {shape['batch']}x{shape['seqlen']}x{shape['heads']} "
                             "is none of the block's main_shapes, seqlen_sweep or varlen shapes")
        out.append((shape, roles[0]))
    return out


def cases(sweep: dict, impl: str) -> list[dict]:
    """Cases of one implementation, per pass of ``sweep["passes"]``.

    ``fwd``: the main shapes, the seqlen sweep and the variable-length batches
    of ``sweep`` (keys: dtype, head_dim, main_shapes, seqlen_sweep {batch,
    heads, seqlens}, varlen [{num_seqs, seqlen, heads}], naive_max_seqlen),
    or only those of them listed for ``impl`` under ``impl_shapes`` (an anchor
    whose JIT per shape is too slow for the whole set); then the shapes of
    ``published`` ({impls, shapes, passes}: FlashQLA's configurations) when ``impl`` is
    one of its impls and the pass one of its ``passes`` (default: every pass of the block).
    ``bwd``/``fwdbwd``: the shapes of ``sweep["backward"]`` (same keys) for
    the impls in ``BWD_IMPLS`` only, or those under ``backward.impl_shapes``. The naive loop's cases beyond its
    ``naive_max_seqlen`` carry ``unsupported_reason`` and become unsupported rows.

    Each case carries ``roles``, the parts of the config it comes from, in that order: ``main``,
    ``profile``, ``sweep``, ``varlen``, ``published`` (a shape listed twice has both); the reports
    select rows by them (:func:`kernels.paper.report_kit.with_role`).

    Raises:
        ValueError: unknown impl, or an ``impl_shapes`` shape that is not one of its block's.
    """
    if impl not in REGISTRY:
        raise ValueError(f"unknown gdn impl {impl!r}; known: {tuple(REGISTRY)}")
    out, seen = [], {}
    for pas in sweep.get("passes", ["fwd"]):
        if pas != "fwd" and impl not in BWD_IMPLS:
            continue
        block, key = (sweep, "") if pas == "fwd" else (sweep["backward"], "backward.")
        published = block.get("published", {})
        runs = impl in published.get("impls", []) and pas in published.get("passes", [pas])
        extra = [(s, ["published"]) for s in _fixed(published["shapes"])] if runs else []
        for s, roles in _impl_shapes(block, impl, key) + extra:
            case = {"pass": pas, "dtype": sweep["dtype"], "head_dim": sweep["head_dim"], **s}
            ident = tuple(sorted(case.items()))
            if ident in seen:
                seen[ident]["roles"] += [r for r in roles if r not in seen[ident]["roles"]]
                continue
            seen[ident] = case
            if impl == "naive" and case["seqlen"] > block["naive_max_seqlen"]:
                case["unsupported_reason"] = (f"naive token loop limited to seqlen <= {block['naive_max_seqlen']} "
                                              "(config naive_max_seqlen); not extrapolated")
            case["roles"] = list(roles)
            out.append(case)
    return out


def check_config(section: dict) -> None:
    """Check the ``gdn`` config section beyond its schema, before any job runs: every
    ``varlen`` batch of ``sweep``, ``smoke`` and ``quick`` (and of their ``backward``) fits
    its ``num_seqs`` sequences of at least one token each in ``seqlen``
    (:func:`make_inputs`), ``published.passes`` names passes of its block only, every shape's ``value_heads`` is a multiple of its ``heads``,
    ``profile`` marks main shapes only, and every ``impl_shapes`` shape is one of its block's
    (:func:`cases`).

    Raises:
        ValueError: ``'<run>[.backward].varlen[<i>].num_seqs: what is wrong'``,
            ``'<run>[.backward].published.passes: what is wrong'``,
            ``'<run>[.backward].<list>[<i>].<key>: what is wrong'`` (value_heads, profile) or
            ``'<run>[.backward].impl_shapes.<impl>[<i>]: what is wrong'``.
    """
    for run in ("sweep", "smoke", "quick"):
        if run not in section:
            continue
        for key, block in ((run, section[run]), (f"{run}.backward", section[run].get("backward", {}))):
            allowed = ("bwd", "fwdbwd") if key.endswith(".backward") else ("fwd",)
            for pas in block.get("published", {}).get("passes", []):
                if pas not in allowed:
                    raise ValueError(f"{key}.published.passes: {pas!r} is not a pass of this block (one of {allowed})")
            for i, batch in enumerate(block.get("varlen", [])):
                if batch["num_seqs"] > batch["seqlen"]:
                    raise ValueError(f"{key}.varlen[{i}].num_seqs: {batch['num_seqs']} sequences of at least "
                                     f"one token do not fit in seqlen {batch['seqlen']}")
            lists = [("main_shapes", block.get("main_shapes", [])),
                     ("published.shapes", block.get("published", {}).get("shapes", []))]
            lists += [(f"impl_shapes.{impl}", shapes) for impl, shapes in block.get("impl_shapes", {}).items()]
            for name, shapes in lists:
                for i, shape in enumerate(shapes):
                    if isinstance(shape, str):  # an impl_shapes role, checked by cases()
                        continue
                    if value_heads(shape) % shape["heads"]:
                        raise ValueError(f"{key}.{name}[{i}].value_heads: {shape['value_heads']} is not a multiple "
                                         f"of heads {shape['heads']}")
                    if shape.get("profile") and name != "main_shapes":
                        raise ValueError(f"{key}.{name}[{i}].profile: only main_shapes entries are profiled")
        for impl in section[run]["impls"]:
            try:
                cases(section[run], impl)
            except ValueError as exc:
                raise ValueError(f"{run}.{exc}") from None


def make_inputs(case: dict, device, seed: int = 0):
    """Seeded inputs of a case: (q, k, v, g, beta, cu_seqlens or None), drawn on ``device``.

    q, k ``[B, T, heads, D]``; v ``[B, T, HV, D]`` and g, beta ``[B, T, HV]`` with HV
    :func:`value_heads`. Variable-length cases pack ``num_seqs`` sequences of random
    lengths (at least 1, seeded on the CPU, so the same on every device) summing to
    ``seqlen`` into B = 1. The values come from ``device``'s generator: every implementation
    measured on one device sees the same inputs (drawing a long case's on the host took seconds).
    """
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, case["dtype"])
    B, T, H, D = case["batch"], case["seqlen"], case["heads"], case["head_dim"]
    HV = value_heads(case)
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    q = F.normalize(randn(B, T, H, D), dim=-1).to(dtype)
    k = F.normalize(randn(B, T, H, D), dim=-1).to(dtype)
    v = randn(B, T, HV, D).to(dtype)
    g = F.logsigmoid(randn(B, T, HV)) / 16
    beta = torch.sigmoid(randn(B, T, HV))
    cu = None
    if case.get("varlen"):
        n = case["num_seqs"]
        cuts = torch.randperm(T - 1, generator=torch.Generator().manual_seed(seed))[: n - 1] + 1
        cu = torch.cat([torch.tensor([0]), cuts.sort().values, torch.tensor([T])]).to(torch.int32).to(device)
    return q, k, v, g, beta, cu


def load_op(impl: str):
    """The op of ``impl`` (its registry's ``op``, FLA's arguments) and what the row notes of it:
    for an anchor its module and its package's version (and for an adapter its pin,
    ``anchor_requirement``). An anchor is an op outside ``kernels``,
    or a module of ``kernels`` that adapts one and pins its version (``REQUIREMENT``, a
    ``name==version`` pip requirement, and ``MODULE``, the module it calls:
    :mod:`kernels.gdn.flashinfer`); anchors run on CUDA only.

    Raises ValueError for an unknown impl, harness.Unsupported for an anchor without CUDA or for
    another version than the one its adapter pins, and ModuleNotFoundError (an ``unsupported``
    row) where the anchor is not installed.
    """
    import importlib
    from importlib import metadata

    if impl not in REGISTRY or REGISTRY[impl].op is None:
        raise ValueError(f"unknown gdn impl {impl!r}: kernels/gdn/impls.py names no op for it")
    module = REGISTRY[impl].op.partition(":")[0]
    pin = None
    if module.split(".")[0] == "kernels":
        adapter = importlib.import_module(module)
        if not hasattr(adapter, "REQUIREMENT"):
            return REGISTRY[impl].load(), {}
        pin, module = adapter.REQUIREMENT, adapter.MODULE
    import torch

    if not torch.cuda.is_available():
        raise harness.Unsupported(f"{impl} needs a CUDA GPU")
    package = importlib.import_module(module.split(".")[0])
    if pin is not None:
        dist, _, wanted = pin.partition("==")
        found = metadata.version(dist)
        if found != wanted:
            raise harness.Unsupported(f"{dist} {found} is installed; {REGISTRY[impl].op.partition(':')[0]} "
                                      f"pins {pin}")
    fn = REGISTRY[impl].load()
    if pin is None:
        return fn, {"anchor_module": fn.__module__, "anchor_version": getattr(package, "__version__", None)}
    return fn, {"anchor_module": module, "anchor_version": found, "anchor_requirement": pin}


def prepare(impl: str, case: dict, device) -> harness.Prepared:
    """The checked call to time for ``case["pass"]`` (fwd: :func:`_prepare_fwd`, else :func:`_prepare_bwd`)."""
    if case.get("unsupported_reason"):
        raise harness.Unsupported(case["unsupported_reason"])
    if case["pass"] == "fwd":
        return _prepare_fwd(impl, case, device)
    if impl not in BWD_IMPLS:
        raise harness.Unsupported(f"{impl} has no backward")
    return _prepare_bwd(impl, case, device)


def _prepare_fwd(impl: str, case: dict, device) -> harness.Prepared:
    """Inputs, one checked call (o and final state vs the float64 reference), the call to time.

    ``bytes``/``flops``: :mod:`kernels.gdn.flops` (minimum traffic; chunked
    FLOP count 10 C d + 6 d^2 + C^2/3 per token and head). ``extra``:
    ``rel_err`` (o), ``rel_err_state``, ``first_call_s`` (first call incl.
    JIT/autotune), ``dispatch`` for the anchors, ``peak_mem_timed_bytes``.
    """

    from kernels.gdn.naive import naive_chunk_gated_delta_rule

    fn, extra = load_op(impl)
    q, k, v, g, beta, cu = make_inputs(case, device)
    kw = dict(output_final_state=True)
    if cu is not None:
        kw["cu_seqlens"] = cu
    t0 = time.perf_counter()
    o, ht = fn(q, k, v, g, beta, scale=case["head_dim"] ** -0.5, **kw)
    harness.synchronize(device)
    extra["first_call_s"] = round(time.perf_counter() - t0, 3)
    if impl == "fla_chunk":
        extra["dispatch"] = "flash_qla" if "flash_qla" in sys.modules else "fla_triton"
    ref_o, ref_h = naive_chunk_gated_delta_rule(q.float(), k.float(), v.float(), g, beta, output_final_state=True,
                                                cu_seqlens=cu)
    extra["rel_err"], extra["rel_err_state"] = correctness.check_all(
        [(f"{impl} o", o, ref_o, TOLERANCE["o"]), (f"{impl} final state", ht, ref_h, TOLERANCE["final_state"])])
    del ref_o, ref_h, o, ht
    tokens = case["batch"] * case["seqlen"]
    d, HV = case["head_dim"], value_heads(case)
    flops = gdn_fwd_flops(tokens, HV, d, d)
    nbytes = gdn_fwd_bytes(tokens, HV, d, d, case["num_seqs"], elem_bytes=q.element_size(),
                           gate_bytes=g.element_size(), final_state=True, qk_heads=case["heads"])
    call = lambda: fn(q, k, v, g, beta, scale=d ** -0.5, **kw)  # noqa: E731
    extra["peak_mem_timed_bytes"] = harness.call_peak_bytes(call, device)
    return harness.Prepared(fn=call, bytes=nbytes, flops=flops, extra=extra, profile=_profiled(impl, case))


_REF_CACHE: dict = {}


def _reference_grads(case, q, k, v, g, beta, do, dht, cu):
    """float64 reference gradients of a shape, cached on the host (the bwd and fwdbwd
    cases of a shape, whatever their roles, share their seeded inputs; the host copy keeps them out of the
    measured peak memory)."""
    from kernels.gdn.naive import reference_grads

    key = tuple(sorted((n, x) for n, x in case.items() if n not in ("pass", "roles")))
    if key not in _REF_CACHE:
        _REF_CACHE.clear()
        ref = reference_grads(q, k, v, g, beta, do, dht, scale=case["head_dim"] ** -0.5, cu_seqlens=cu)
        _REF_CACHE[key] = {n: x.cpu() for n, x in ref.items()}
    return _REF_CACHE[key]


def _prepare_bwd(impl: str, case: dict, device) -> harness.Prepared:
    """Backward (``bwd``) or forward + backward (``fwdbwd``), checked gradient by gradient.

    Runs forward and backward once (``first_call_s``, JIT and autotune
    included), compares dq, dk, dv, dg, dbeta with the float64 reference
    (``rel_err_<grad>``; ``rel_err`` = the largest of the five), runs the backward again and
    records whether the gradients are bitwise equal (``deterministic``).
    ``dispatch`` (fla_chunk): which of flash_qla and tilelang were imported
    once FLA ran forward and backward (FLA routes its gated backward to
    TileLang where Triton miscompiles it), else ``fla_triton``.
    ``flops``: :func:`kernels.gdn.flops.gdn_bwd_flops` (plus the forward's for
    fwdbwd); ``bytes``: :func:`kernels.gdn.flops.gdn_bwd_bytes`.
    """
    import torch

    fn, extra = load_op(impl)
    q, k, v, g, beta, cu = make_inputs(case, device)
    gen = torch.Generator(device=device).manual_seed(1)
    B, T, H, d = case["batch"], case["seqlen"], case["heads"], case["head_dim"]
    HV = value_heads(case)
    do = torch.randn(B, T, HV, d, generator=gen, device=device).to(v.dtype)
    dht = torch.randn(case["num_seqs"], HV, d, d, generator=gen, device=device)
    leaves = [x.requires_grad_() for x in (q, k, v, g, beta)]
    kw = dict(output_final_state=True)
    if cu is not None:
        kw["cu_seqlens"] = cu

    def forward():
        o, ht = fn(q, k, v, g, beta, scale=d ** -0.5, **kw)
        return [o, ht] if ht is not None and ht.requires_grad else [o]

    t0 = time.perf_counter()
    outs = forward()
    cots = [do, dht][:len(outs)]
    backward = passes.timed_pass("bwd", forward, leaves, cots, outputs=outs, allow_unused=True)
    got = backward()
    harness.synchronize(device)
    extra["first_call_s"] = round(time.perf_counter() - t0, 3)
    extra["final_state_grad"] = len(outs) == 2
    if impl == "fla_chunk":
        loaded = [m for m in ("flash_qla", "tilelang") if m in sys.modules]
        extra["dispatch"] = "+".join(loaded) if loaded else "fla_triton"
    ref = _reference_grads(case, q, k, v, g, beta, do, dht if len(outs) == 2 else None, cu)
    names = ("dq", "dk", "dv", "dg", "dbeta")
    for name, x in zip(names, got):
        if x is None:
            raise correctness.Mismatch(f"{impl} returned no gradient {name}")
    errs = correctness.check_all([(f"{impl} {n}", x, ref[n], TOLERANCE[n]) for n, x in zip(names, got)],
                                 floor=GRAD_FLOOR)
    extra.update({f"rel_err_{n}": e for n, e in zip(names, errs)})
    extra["rel_err"] = max(errs)
    again = backward()
    extra["deterministic"] = all(torch.equal(a, b) for a, b in zip(got, again))
    del got, again, ref
    tokens = B * T
    flops = gdn_bwd_flops(tokens, HV, d, d)
    fwdbwd = case["pass"] == "fwdbwd"
    if fwdbwd:
        flops += gdn_fwd_flops(tokens, HV, d, d)
        del outs, backward   # the checked run's graph, freed before timing
        call = passes.timed_pass("fwdbwd", forward, leaves, cots, allow_unused=True)
    else:
        call = backward
    nbytes = gdn_bwd_bytes(tokens, HV, d, d, case["num_seqs"], elem_bytes=q.element_size(),
                           gate_bytes=g.element_size(), with_forward=fwdbwd, final_state_grad=extra["final_state_grad"],
                           qk_heads=H)
    extra["peak_mem_timed_bytes"] = harness.call_peak_bytes(call, device)
    return harness.Prepared(fn=call, bytes=nbytes, flops=flops, extra=extra, profile=_profiled(impl, case))
