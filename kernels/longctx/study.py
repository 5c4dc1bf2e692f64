"""The long-context study: causal softmax attention against Gated DeltaNet from 1K to 512K tokens.

One layer's shape, set in the config (``attention``: query heads, KV heads, head dim; ``gdn``:
query/key heads, value heads, head dim), batch ``batch``, in ``dtype``. Two phases (``phase``):

``prefill``
    The prompt of T tokens at once, ``fwd`` and ``fwdbwd`` (:mod:`kernels.core.passes`): causal
    attention (:func:`kernels.longctx.attention.causal_attention`, O(T²) work) against the chunked
    gated delta rule (the GDN study's ops, FLA's arguments, O(T) work), T over
    ``prefill.seqlens``; ``prefill.max_seqlen`` caps an implementation's lengths per pass (the
    cost of a call grows as T² for attention). Out of memory is a row with status ``oom``.
``decode``
    One new token after a context of T tokens, ``fwd``: attention of one query over a KV cache of
    T tokens (O(T) work and bytes) against one step of the gated delta rule's recurrence from a
    state of K × V per value head (constant in T: :func:`kernels.gdn.recurrent.fused_recurrent_gated_delta_rule`
    with ``initial_state``), launched from Python (``launch: stream``) and replayed from a CUDA graph
    (``launch: graph``), T over ``decode.seqlens``.

Inputs, seeded on the device: attention q [B, H, T, D], k, v [B, H_kv, T, D] N(0, 1); GDN as the
GDN study's (:func:`kernels.gdn.study.make_inputs`: q, k L2-normalised, g = logsigmoid(N(0, 1)) / 16,
beta = sigmoid(N(0, 1)) in float32; decode: an N(0, 1) / sqrt(K) float32 initial state), with the
final state returned. The fwdbwd loss is sum(o · do) (+ sum(final state · dht) for GDN) with
seeded N(0, 1) cotangents.

Correctness: before an implementation's first timed case of each (phase, pass) in a process, it
is checked at ``check_seqlen`` tokens against float64 by its own study's check: attention prefill
by :func:`kernels.flex.study.prepare` (output and gradients of batch 0 and the last KV-head group
against :mod:`kernels.flex.reference`), GDN prefill by :func:`kernels.gdn.study.prepare` (output,
final state and every gradient against the float64 chunked reference), decode here against
:func:`kernels.flex.reference.attention_reference` and
:func:`kernels.gdn.naive.naive_recurrent_gated_delta_rule` with those studies' tolerances. The
row keeps that check's error (``rel_err``) and its length (``check_seqlen``, a case field); a float64 reference at
512K tokens would need hours and terabytes, which the check at a short length avoids.

Counting (``s`` bytes per element of ``dtype``):
    attention prefill  flops 4·B·H·D·T(T+1)/2 (the causal pairs), × 3.5 for fwdbwd (the
                       FlexAttention study's); bytes (2·H + 2·H_kv)·B·T·D·s, + (4·H + 4·H_kv)·B·T·D·s
                       for fwdbwd (:func:`kernels.flex.study.min_bytes`)
    attention decode   flops 4·B·H·T·D; bytes 2·B·H_kv·T·D·s (the KV cache read) + 2·B·H·D·s
    GDN prefill        :mod:`kernels.gdn.flops` (chunked count; forward + backward for fwdbwd)
    GDN decode         flops 8·B·HV·K·V (the recurrence per token, :mod:`kernels.gdn.flops`);
                       bytes :func:`kernels.gdn.flops.gdn_fwd_bytes` of one token with the initial
                       and final state
``cache_bytes`` is what decode keeps per layer: the KV cache 2·B·H_kv·T·D·s for attention, the
state B·HV·K·V·4 (float32) for GDN. ``peak_mem_timed_bytes`` is the peak memory allocated while one
call runs (its inputs included; CUDA only), which the memory figure and slopes use: the harness's
``peak_mem_bytes`` also holds the timer's 256 MiB L2 flush buffer.
"""

from __future__ import annotations

import time

from kernels.core import correctness, harness, passes
from kernels.longctx.impls import IMPLS as REGISTRY
from kernels.longctx.impls import family

STUDY = "longctx"
SHAPE_FIELDS = ("phase", "batch", "seqlen", "heads", "head_dim", "launch")
IMPLS = tuple(REGISTRY)
PHASES = ("prefill", "decode")
#: The attention prefill's FLOP factor of each pass (the FlexAttention study's counting).
ATTENTION_PASS_FACTOR = {"fwd": 1.0, "fwdbwd": 3.5}
#: FLOPs of one token of the gated delta rule's recurrence per value head, in units of K·V.
RECURRENT_FLOPS_PER_KV = 8


def _shape(sweep: dict, impl: str) -> dict:
    """The layer's shape fields of ``impl``'s family: heads, head_dim and kv_heads (attention) or
    value_heads (GDN)."""
    if family(impl) == "attention":
        a = sweep["attention"]
        return {"heads": a["heads"], "kv_heads": a["kv_heads"], "head_dim": a["head_dim"]}
    g = sweep["gdn"]
    return {"heads": g["heads"], "value_heads": g["value_heads"], "head_dim": g["head_dim"]}


def cases(sweep: dict, impl: str) -> list[dict]:
    """Cases of ``impl``: for each phase its registry entry is tagged with, each of its passes
    (prefill: ``prefill.passes`` that the entry has; decode: ``fwd``, for the impls of
    ``decode.impls``, by default all) and lengths (``seqlens`` of the phase, those above
    ``prefill.max_seqlen[pass][impl]`` left out) and, in decode, each of ``decode.launches``. Each case carries ``roles``: its phase. An impl absent from
    ``sweep["impls"]`` has none.

    Raises:
        ValueError: an unknown impl.
    """
    if impl not in REGISTRY:
        raise ValueError(f"unknown longctx impl {impl!r}; known: {IMPLS}")
    if impl not in sweep["impls"]:
        return []
    entry, out = REGISTRY[impl], []
    base = {"dtype": sweep["dtype"], "batch": sweep["batch"], **_shape(sweep, impl),
            "check_seqlen": sweep["check_seqlen"]}
    if "prefill" in entry.tags:
        block = sweep["prefill"]
        for pas in [p for p in block["passes"] if p in entry.passes]:
            cap = block.get("max_seqlen", {}).get(pas, {}).get(impl)
            out += [{"phase": "prefill", "pass": pas, "seqlen": t, "launch": "stream", **base, "roles": ["prefill"]}
                    for t in block["seqlens"] if cap is None or t <= cap]
    if "decode" in entry.tags and impl in sweep.get("decode", {}).get("impls", sweep["impls"]):
        block = sweep["decode"]
        out += [{"phase": "decode", "pass": "fwd", "seqlen": t, "launch": launch, **base, "roles": ["decode"]}
                for t in block["seqlens"] for launch in block["launches"]]
    return out


def check_config(section: dict) -> None:
    """Check the ``longctx`` config section beyond its schema, before any job runs: in ``sweep``,
    ``smoke`` and ``quick``, the attention heads are a multiple of its KV heads and the GDN value
    heads of its heads, ``check_seqlen`` is at most the shortest prefill length, every
    ``prefill.max_seqlen`` entry names an impl with that pass and every ``decode.impls`` one an
    impl with a decode phase.

    Raises:
        ValueError: ``'<run>.<key>: what is wrong'``.
    """
    for run in [run for run in ("sweep", "smoke", "quick") if run in section]:
        s = section[run]
        if s["attention"]["heads"] % s["attention"]["kv_heads"]:
            raise ValueError(f"{run}.attention.kv_heads: heads {s['attention']['heads']} are not a multiple of "
                             f"kv_heads {s['attention']['kv_heads']}")
        if s["gdn"]["value_heads"] % s["gdn"]["heads"]:
            raise ValueError(f"{run}.gdn.value_heads: {s['gdn']['value_heads']} is not a multiple of heads "
                             f"{s['gdn']['heads']}")
        if s["check_seqlen"] > min(s["prefill"]["seqlens"]):
            raise ValueError(f"{run}.check_seqlen: {s['check_seqlen']} is longer than the shortest prefill length "
                             f"{min(s['prefill']['seqlens'])}")
        for pas, caps in s["prefill"].get("max_seqlen", {}).items():
            for impl in caps:
                if pas not in REGISTRY[impl].passes or "prefill" not in REGISTRY[impl].tags:
                    raise ValueError(f"{run}.prefill.max_seqlen.{pas}.{impl}: {impl} has no prefill {pas}")
        for impl in s.get("decode", {}).get("impls", []):
            if "decode" not in REGISTRY[impl].tags:
                raise ValueError(f"{run}.decode.impls: {impl} has no decode phase")


# ----------------------------------------------------------------------------
# inputs and the checks at a short length


def _attention_inputs(case: dict, seqlen_q: int, device, grad: bool):
    """Seeded q [B, H, seqlen_q, D], k, v [B, H_kv, T, D] and (grad) the cotangent of o, on ``device``:
    the FlexAttention study's (:func:`kernels.flex.study.make_inputs`, seed 0)."""
    from kernels.flex.study import make_inputs

    return make_inputs(case, device, grad, seqlen_q)


def _gdn_inputs(case: dict, seqlen: int, device):
    """Seeded GDN inputs of ``seqlen`` tokens on ``device``, the GDN study's
    (:func:`kernels.gdn.study.make_inputs`): q, k [B, T, H, K]; v [B, T, HV, V]; g, beta [B, T, HV] float32."""
    from kernels.gdn.study import make_inputs

    shape = {n: case[n] for n in ("batch", "heads", "value_heads", "head_dim", "dtype")}
    return make_inputs({**shape, "seqlen": seqlen, "varlen": False}, device)[:5]


def _initial_state(case: dict, device):
    """A seeded float32 state [B, HV, K, V], N(0, 1) / sqrt(K) (the decode step's context)."""
    import torch

    b, hv, d = case["batch"], case["value_heads"], case["head_dim"]
    gen = torch.Generator(device=device).manual_seed(1)
    return torch.randn(b, hv, d, d, generator=gen, device=device) * d ** -0.5


#: The checks run in this process: (impl, phase, pass, dtype, shape) -> the largest RMSE/RMS.
_CHECKED: dict[tuple, float] = {}


def _check_key(impl: str, case: dict) -> tuple:
    return (impl, *sorted((k, v) for k, v in case.items() if k not in ("seqlen", "launch", "roles")))


def _source_case(case: dict, seqlen: int) -> tuple[object, dict]:
    """The case of the source study (flex or gdn) of ``case``'s prefill at ``seqlen`` tokens:
    (study module, its case dict), built by that study's own ``cases``."""
    if "kv_heads" in case:
        from kernels.flex import study as flex

        group = {"name": "check", "impls": [] if flex.is_dense(case["impl"]) else [case["impl"]],
                 "dtypes": [case["dtype"]], "shapes": [[case["batch"], seqlen]],
                 "heads": [[case["heads"], case["kv_heads"]]], "head_dims": [case["head_dim"]],
                 "masks": [{"mask": "causal"}], "passes": [case["pass"]]}
        (source,) = flex.cases({"impls": [case["impl"]], "groups": [group]}, case["impl"])
        return flex, source
    from kernels.gdn import study as gdn

    shape = {"batch": case["batch"], "seqlen": seqlen, "heads": case["heads"], "value_heads": case["value_heads"]}
    sweep = {"impls": [case["impl"]], "passes": [case["pass"]], "dtype": case["dtype"], "head_dim": case["head_dim"],
             "naive_max_seqlen": seqlen, "main_shapes": [shape], "seqlen_sweep": {"batch": 1, "heads": 1, "seqlens": []},
             "backward": {"naive_max_seqlen": seqlen, "main_shapes": [shape],
                          "seqlen_sweep": {"batch": 1, "heads": 1, "seqlens": []}}}
    (source,) = gdn.cases(sweep, case["impl"])
    return gdn, source


def _check_decode(impl: str, case: dict, seqlen: int, device) -> float:
    """One decode step at a context of ``seqlen`` tokens against float64; the largest RMSE/RMS.

    Raises correctness.Mismatch beyond the tolerance of the implementation's study.
    """

    if family(impl) == "attention":
        from kernels.flex import reference
        from kernels.flex.study import TOLERANCE
        from kernels.longctx.attention import causal_attention

        q, k, v, _ = _attention_inputs({**case, "seqlen": seqlen}, 1, device, grad=False)
        out = causal_attention(impl, q, k, v)
        return correctness.check_close(f"{impl} decode o", out, reference.attention_reference(q, k, v),
                                       TOLERANCE[case["dtype"]])
    from kernels.gdn.naive import naive_recurrent_gated_delta_rule
    from kernels.gdn.study import TOLERANCE, load_op

    fn, _ = load_op(impl)
    q, k, v, g, beta = _gdn_inputs(case, 1, device)
    h0 = _initial_state(case, device)
    o, ht = fn(q, k, v, g, beta, scale=case["head_dim"] ** -0.5, initial_state=h0, output_final_state=True)
    ref_o, ref_h = naive_recurrent_gated_delta_rule(*(x.double() for x in (q, k, v, g, beta)),
                                                    initial_state=h0.double(), output_final_state=True)
    return max(correctness.check_all([(f"{impl} decode o", o, ref_o, TOLERANCE["o"]),
                                      (f"{impl} decode final state", ht, ref_h, TOLERANCE["final_state"])]))


def check(impl: str, case: dict, seqlen: int, device) -> float:
    """The check of ``impl`` on ``case`` at ``seqlen`` tokens (module docstring), once per
    (impl, phase, pass, dtype, shape) in a process: the largest RMSE/RMS against float64.

    Raises:
        correctness.Mismatch: an output or gradient beyond its tolerance.
        harness.Unsupported: the source study cannot run the implementation here.
    """
    key = _check_key(impl, case)
    if key not in _CHECKED:
        if case["phase"] == "decode":
            _CHECKED[key] = _check_decode(impl, case, seqlen, device)
        else:
            source, short = _source_case({**case, "impl": impl}, seqlen)
            prepared = source.prepare(impl, short, device)
            harness.synchronize(device)
            _CHECKED[key] = float(prepared.extra["rel_err"])
            del prepared
    return _CHECKED[key]


# ----------------------------------------------------------------------------
# the timed calls


def _attention_call(impl: str, case: dict, device):
    """(timed call, flops, bytes) of attention ``impl`` on ``case``."""
    from kernels.flex.study import min_bytes
    from kernels.longctx.attention import causal_attention

    b, h, hkv, t, d = (case[f] for f in ("batch", "heads", "kv_heads", "seqlen", "head_dim"))
    prefill, grad = case["phase"] == "prefill", case["pass"] == "fwdbwd"
    q, k, v, dout = _attention_inputs(case, t if prefill else 1, device, grad)
    s = q.element_size()
    if prefill:
        flops = 4 * b * h * d * t * (t + 1) // 2 * ATTENTION_PASS_FACTOR[case["pass"]]
        nbytes = min_bytes(case, s)
    else:
        flops, nbytes = 4 * b * h * t * d, 2 * b * hkv * t * d * s + 2 * b * h * d * s
    if grad:
        q, k, v = (x.requires_grad_() for x in (q, k, v))
    fn = passes.timed_pass(case["pass"], lambda: causal_attention(impl, q, k, v), (q, k, v), dout)
    return fn, int(flops), int(nbytes)


def _gdn_call(impl: str, case: dict, device, extra: dict):
    """(timed call, flops, bytes) of GDN ``impl`` on ``case``; the anchor's module and version into ``extra``."""
    import torch

    from kernels.gdn.flops import gdn_bwd_bytes, gdn_bwd_flops, gdn_fwd_bytes, gdn_fwd_flops
    from kernels.gdn.study import load_op

    fn, anchor = load_op(impl)
    extra.update(anchor)
    b, h, hv, t, d = (case[f] for f in ("batch", "heads", "value_heads", "seqlen", "head_dim"))
    scale = d ** -0.5
    if case["phase"] == "decode":
        q, k, v, g, beta = _gdn_inputs(case, 1, device)
        h0 = _initial_state(case, device)
        nbytes = gdn_fwd_bytes(b, hv, d, d, b, elem_bytes=q.element_size(), gate_bytes=g.element_size(),
                               initial_state=True, final_state=True, qk_heads=h)
        call = lambda: fn(q, k, v, g, beta, scale=scale, initial_state=h0, output_final_state=True)  # noqa: E731
        return call, RECURRENT_FLOPS_PER_KV * b * hv * d * d, nbytes
    q, k, v, g, beta = _gdn_inputs(case, t, device)
    s, gate = q.element_size(), g.element_size()
    if case["pass"] == "fwd":
        call = lambda: fn(q, k, v, g, beta, scale=scale, output_final_state=True)  # noqa: E731
        return call, gdn_fwd_flops(b * t, hv, d, d), gdn_fwd_bytes(b * t, hv, d, d, b, elem_bytes=s, gate_bytes=gate,
                                                                   final_state=True, qk_heads=h)
    gen = torch.Generator(device=device).manual_seed(1)
    do = torch.randn(b, t, hv, d, generator=gen, device=device).to(v.dtype)
    dht = torch.randn(b, hv, d, d, generator=gen, device=device)
    leaves = [x.requires_grad_() for x in (q, k, v, g, beta)]

    def forward():  # the final state's cotangent too, where it carries a gradient (as the GDN study)
        o, ht = fn(q, k, v, g, beta, scale=scale, output_final_state=True)
        return [o, ht] if ht is not None and ht.requires_grad else [o]

    with_state = len(forward()) == 2
    call = passes.timed_pass("fwdbwd", forward, leaves, [do, dht][:1 + with_state], allow_unused=True)
    flops = gdn_fwd_flops(b * t, hv, d, d) + gdn_bwd_flops(b * t, hv, d, d)
    nbytes = gdn_bwd_bytes(b * t, hv, d, d, b, elem_bytes=s, gate_bytes=gate, with_forward=True,
                           final_state_grad=with_state, qk_heads=h)
    return call, flops, nbytes


def cache_bytes(case: dict) -> int:
    """Bytes decode keeps per layer after ``case["seqlen"]`` tokens: the KV cache
    2·B·H_kv·T·D·s in ``case["dtype"]`` (attention) or the float32 state B·HV·K·V·4 (GDN)."""
    import torch

    if "kv_heads" in case:
        itemsize = getattr(torch, case["dtype"]).itemsize
        return 2 * case["batch"] * case["kv_heads"] * case["seqlen"] * case["head_dim"] * itemsize
    return case["batch"] * case["value_heads"] * case["head_dim"] ** 2 * 4


def prepare(impl: str, case: dict, device) -> harness.Prepared:
    """Check ``impl`` at ``check_seqlen`` tokens (:func:`check`), build ``case``'s inputs on
    ``device``, run the call once (``first_call_s``: compilation and autotuning included) and
    return it to time (replayed from a CUDA graph for ``launch: graph``).

    Raises:
        harness.Unsupported: where the implementation cannot run the case here (CUDA kernels and
            graphs off CUDA, FlexAttention's backward on the CPU, a missing anchor).
        correctness.Mismatch: the check fails.
        ValueError: an unknown impl or phase.
    """
    import torch

    if impl not in REGISTRY:
        raise ValueError(f"unknown longctx impl {impl!r}; known: {IMPLS}")
    if case["phase"] not in PHASES or case["phase"] not in REGISTRY[impl].tags:
        raise ValueError(f"{impl} has no phase {case['phase']!r} (its tags: {sorted(REGISTRY[impl].tags)})")
    if case["launch"] == "graph" and device.type != "cuda":
        raise harness.Unsupported("CUDA graphs need a CUDA device")
    if impl in ("sdpa_cudnn", "sdpa_flash", "flex_flash") and device.type != "cuda":
        raise harness.Unsupported(f"{impl}: a CUDA kernel")
    if impl in ("flex", "flex_flash") and case["pass"] != "fwd" and device.type != "cuda":
        raise harness.Unsupported("FlexAttention backward is not implemented on the CPU (NotImplementedError)")
    extra = {"rel_err": check(impl, case, case["check_seqlen"], device), "cache_bytes": cache_bytes(case)}
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if family(impl) == "attention":
        fn, flops, nbytes = _attention_call(impl, case, device)
    else:
        fn, flops, nbytes = _gdn_call(impl, case, device, extra)
    harness.synchronize(device)
    t0 = time.perf_counter()
    fn()
    harness.synchronize(device)
    extra["first_call_s"] = round(time.perf_counter() - t0, 3)
    peak = harness.call_peak_bytes(fn, device)  # resets the peak counter: the harness's counts from here
    if peak is not None:
        extra["peak_mem_timed_bytes"] = peak
    return harness.Prepared(fn=fn, bytes=nbytes, flops=flops, extra=extra, cuda_graph=case["launch"] == "graph")
