"""GDN forward: references against each other, Triton kernels against the float64 reference.

On the CPU the kernels run under TRITON_INTERPRET=1 at small shapes; the
``gpu`` tests repeat the checks at the study's shapes on CUDA.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch.nn.functional as F  # noqa: E402

from kernels.gdn.chunk import chunk_gated_delta_rule, chunk_gated_delta_rule_fwd  # noqa: E402
from kernels.gdn.naive import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule  # noqa: E402
from kernels.gdn.recurrent import fused_recurrent_gated_delta_rule  # noqa: E402
from kernels.gdn.validate import cached_per_tensor  # noqa: E402
from kernels.core.correctness import relative_rmse  # noqa: E402

TOL = 0.005
KERNELS = {"chunk": chunk_gated_delta_rule, "recurrent": fused_recurrent_gated_delta_rule}
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def gate(regime, shape, gen):
    """The four gate regimes of the issue."""
    if regime == "zero":
        return torch.zeros(shape)
    if regime == "mild":
        return F.logsigmoid(torch.randn(shape, generator=gen)) / 16
    if regime == "init":
        return -torch.rand(shape, generator=gen) * 16 * F.softplus(0.5 * torch.randn(shape, generator=gen) + 1)
    if regime == "strong":
        return F.logsigmoid(torch.rand(shape, generator=gen)) / 0.01
    raise ValueError(regime)


def inputs(B, T, H, D, regime="mild", dtype=torch.bfloat16, seed=0, h0=False, N=None, device=DEV, HV=None,
           h0_scale=1.0):
    """Seeded (q, k, v, g, beta, initial state or None): q, k of H heads, v, g, beta and the
    state of HV value heads (default H), the state N(0, h0_scale^2)."""
    gen = torch.Generator().manual_seed(seed)
    HV = HV or H
    q = F.normalize(torch.randn(B, T, H, D, generator=gen), dim=-1).to(dtype)
    k = F.normalize(torch.randn(B, T, H, D, generator=gen), dim=-1).to(dtype)
    v = torch.randn(B, T, HV, D, generator=gen).to(dtype)
    g = gate(regime, (B, T, HV), gen)
    beta = torch.sigmoid(torch.randn(B, T, HV, generator=gen))
    s = torch.randn(N or B, HV, D, D, generator=gen) * h0_scale if h0 else None
    out = [x.to(device) for x in (q, k, v, g, beta)]
    return (*out, s.to(device) if s is not None else None)


def normal_on(shape, seed, device=DEV):
    """Seeded N(0, 1) float32 of ``shape`` drawn on ``device`` by a generator of its own: the
    many-sequence tests' states (2^30 values each), not drawn by a lane's two CPU threads and then
    copied over."""
    return torch.randn(shape, generator=torch.Generator(device).manual_seed(seed), device=device)


def cu_seqlens_of(lens, device=DEV):
    """``cu_seqlens`` [len(lens) + 1] int32 on ``device`` of packed sequences of lengths ``lens`` (int64)."""
    return torch.cat([lens.new_zeros(1), lens.cumsum(0)]).to(device=device, dtype=torch.int32)


def random_cu_seqlens(n, high, seed):
    """``cu_seqlens`` of ``n`` packed sequences of seeded random lengths in [1, high)."""
    return cu_seqlens_of(torch.randint(1, high, (n,), generator=torch.Generator().manual_seed(seed)))


def packed_subset(cu, seqs):
    """The tokens of the packed sequences ``seqs`` (sorted indices into ``cu``'s N sequences) and their
    own ``cu_seqlens``: (token indices [L] int64, cu_seqlens [len(seqs) + 1] int32), on ``cu``'s device."""
    seqs = torch.as_tensor(seqs, dtype=torch.int64, device=cu.device)
    starts, ends = cu[:-1].long()[seqs], cu[1:].long()[seqs]
    tokens = torch.cat([torch.arange(s, e, device=cu.device) for s, e in zip(starts.tolist(), ends.tolist())])
    return tokens, cu_seqlens_of(ends - starts, cu.device)


def edge_sequences(n, first=32, last=224):
    """The packed sequences that the many-sequence tests compare with the float64 reference: the first
    ``first`` and the last ``last`` of ``n``, the last ones at the top of the kernels' grids (where an
    index past 2^16 would show). Every sequence is the kernels' input; the backward's reference of all
    4096 ran out of memory on an H200, holding 133 GiB."""
    return sorted(set(range(min(first, n))) | set(range(max(0, n - last), n)))


def check(fn, q, k, v, g, beta, h0, cu=None, ref=naive_recurrent_gated_delta_rule, seqs=None):
    """``fn``'s output and final state against ``ref`` (float32 inputs; relative RMSE <= TOL); with
    ``seqs``, only those packed sequences of ``cu``, the reference run on them alone."""
    o, ht = fn(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    if seqs is not None:
        tokens, cu = packed_subset(cu, seqs)
        q, k, v, g, beta, o = (x[:, tokens] for x in (q, k, v, g, beta, o))
        h0, ht = (x[seqs] if x is not None else None for x in (h0, ht))
    ro, rh = ref(q.float(), k.float(), v.float(), g, beta, initial_state=h0, output_final_state=True,
                 cu_seqlens=cu)
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert o.dtype == v.dtype and o.shape == v.shape and ht.dtype == torch.float32
    eo, eh = relative_rmse(o, ro), relative_rmse(ht, rh)
    assert eo <= TOL, f"o RMSE/RMS {eo:.4g}"
    assert eh <= TOL, f"final state RMSE/RMS {eh:.4g}"


@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_references_agree(regime):
    q, k, v, g, beta, h0 = inputs(2, 130, 2, 16, regime, torch.float32, h0=True, device="cpu")
    a = naive_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    b = naive_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert relative_rmse(a[0], b[0]) < 1e-6 and relative_rmse(a[1], b[1]) < 1e-6


def test_references_agree_on_packed_sequences_with_an_empty_one():
    """The chunked reference splits the packed sequences and stacks its chunks (an empty sequence
    keeps its initial state); its values and autograd gradients are the token loop's."""
    from kernels.gdn.naive import reference_grads

    q, k, v, g, beta, h0 = inputs(1, 70, 2, 16, "mild", torch.float32, h0=True, N=3, device="cpu")
    cu = torch.tensor([0, 5, 5, 70])
    a = naive_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    b = naive_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                                     chunk_size=16)
    assert relative_rmse(a[0], b[0]) < 1e-6 and relative_rmse(a[1], b[1]) < 1e-6
    assert torch.equal(b[1][1], h0[1])
    do, dht = torch.randn_like(v), torch.randn_like(h0)
    ga, gb = (reference_grads(q, k, v, g, beta, do, dht, initial_state=h0, cu_seqlens=cu, fn=fn)
              for fn in (naive_recurrent_gated_delta_rule, naive_chunk_gated_delta_rule))
    for name in ga:
        assert relative_rmse(ga[name], gb[name]) < 1e-6, name


@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_gate_regimes(impl, regime):
    check(KERNELS[impl], *inputs(1, 75, 1, 32, regime, h0=True))


@pytest.mark.parametrize("T", [1, 63, 64, 65])
def test_chunk_odd_lengths(T):
    check(chunk_gated_delta_rule, *inputs(2, T, 1, 32, "init", h0=T != 64))


@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
@pytest.mark.parametrize("h0", [False, True])
def test_chunk_float16_products_packed(regime, h0):
    """K = 128 with bfloat16 inputs and no initial state takes the float16-product path (W, U,
    the chunk states and V_new stored in float16), with one the float32 path: every gate
    regime, packed sequences."""
    cu = torch.tensor([0, 1, 9, 70, 150], dtype=torch.int32, device=DEV)
    check(chunk_gated_delta_rule, *inputs(1, 150, 1, 128, regime, h0=h0, N=4), cu)


def test_head_dim_64_both_kernels():
    for fn in KERNELS.values():
        check(fn, *inputs(1, 70, 1, 64, "mild", h0=True))


@pytest.mark.parametrize("impl", sorted(KERNELS))
def test_cu_seqlens_many_short(impl):
    cu = torch.tensor([0, 1, 9, 40, 40, 105, 120, 150], dtype=torch.int64, device=DEV)
    q, k, v, g, beta, h0 = inputs(1, 150, 1, 32, "mild", h0=True, N=7)
    check(KERNELS[impl], q, k, v, g, beta, h0, cu.to(torch.int32) if impl == "chunk" else cu)
    # each packed sequence equals its own call
    o, _ = KERNELS[impl](q, k, v, g, beta, initial_state=h0, cu_seqlens=cu)
    s, e = 40, 105
    o1, _ = KERNELS[impl](q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e], beta[:, s:e], initial_state=h0[4:5])
    assert torch.equal(o[:, s:e], o1)


def test_packed_subset_and_edge_sequences():
    cu = torch.tensor([0, 1, 9, 40, 40, 105, 120, 150], dtype=torch.int32)
    tokens, sub = packed_subset(cu, [1, 3, 6])   # the empty sequence 3 keeps its place
    assert tokens.tolist() == list(range(1, 9)) + list(range(120, 150)) and sub.tolist() == [0, 8, 8, 38]
    assert sub.dtype == torch.int32
    assert edge_sequences(4096) == list(range(32)) + list(range(4096 - 224, 4096))
    assert edge_sequences(5, first=2, last=2) == [0, 1, 3, 4] and edge_sequences(3) == [0, 1, 2]


@pytest.mark.parametrize("impl", sorted(KERNELS))
def test_check_of_some_packed_sequences(impl):
    """The many-sequence GPU tests' check of a subset of packed sequences, with its reference on
    them alone, passes; a subset misaligned by one token with the kernel's output fails."""
    cu = torch.tensor([0, 1, 9, 40, 40, 105, 120, 150], dtype=torch.int32, device=DEV)
    args = inputs(1, 150, 1, 32, "mild", h0=True, N=7)
    check(KERNELS[impl], *args, cu, ref=naive_chunk_gated_delta_rule, seqs=[0, 3, 4, 6])

    def shifted(*a, **kw):
        o, ht = KERNELS[impl](*a, **kw)
        return o.roll(1, dims=1), ht
    with pytest.raises(AssertionError, match="o RMSE/RMS"):
        check(shifted, *args, cu, ref=naive_chunk_gated_delta_rule, seqs=[4, 6])


@pytest.mark.parametrize("D,with_h0", [(32, True), (128, True), (128, False)])
def test_chunk_states_for_backward(D, with_h0):
    """The stored per-chunk states are the state entering each chunk, kept in the products'
    operand dtype: float16 for 16-bit inputs with K = 128 and no initial state, float32 otherwise."""
    q, k, v, g, beta, h0 = inputs(1, 150, 1, D, "mild", h0=True)
    h0 = h0 if with_h0 else None
    o, ht, inter = chunk_gated_delta_rule_fwd(q, k, v, g.float().contiguous(), beta, D ** -0.5, h0, True,
                                              store_chunk_states=True)
    assert inter.h.shape == (3, 1, D, D) and inter.v_new.shape == (150, 1, D)
    kept = torch.float16 if D == 128 and not with_h0 else torch.float32
    assert inter.h.dtype == inter.v_new.dtype == kept
    assert torch.equal(inter.h[0], h0[0].to(kept) if with_h0 else torch.zeros_like(inter.h[0]))
    _, s128 = naive_recurrent_gated_delta_rule(q[:, :128].float(), k[:, :128].float(), v[:, :128].float(),
                                               g[:, :128], beta[:, :128], initial_state=h0,
                                               output_final_state=True)
    assert relative_rmse(inter.h[2], s128[0]) <= TOL


def test_product_dtype():
    import triton.language as tl

    from kernels.gdn.chunk import product_dtype

    assert product_dtype(torch.bfloat16, 128) == product_dtype(torch.float16, 128) == tl.float16
    assert product_dtype(torch.bfloat16, 64) == product_dtype(torch.float32, 128) == tl.float32
    assert product_dtype(torch.float16, 128, initial_state=True) == tl.float32   # any finite state


def test_gva_reference_maps_value_heads_to_key_heads():
    """Grouped value attention in the reference: value head j of HV = 4 equals a call on key
    head j // 2 of H = 2 (flash-linear-attention's layout), token loop and chunked form alike."""
    q, k, v, g, beta, h0 = inputs(1, 40, 2, 16, "init", torch.float32, h0=True, HV=4, device="cpu")
    for fn in (naive_recurrent_gated_delta_rule, naive_chunk_gated_delta_rule):
        o, ht = fn(q, k, v, g, beta, initial_state=h0, output_final_state=True)
        assert o.shape == v.shape and ht.shape == h0.shape
        for j in range(4):
            i, jj = j // 2, slice(j, j + 1)
            oj, hj = fn(q[:, :, i:i + 1], k[:, :, i:i + 1], v[:, :, jj], g[:, :, jj], beta[:, :, jj],
                        initial_state=h0[:, jj], output_final_state=True)
            assert relative_rmse(o[:, :, jj], oj) < 1e-6 and relative_rmse(ht[:, jj], hj) < 1e-6


@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
def test_gva_gate_regimes(impl, regime):
    """GVA (H = 2 key heads, HV = 4 value heads) against the float64 reference, every gate regime."""
    check(KERNELS[impl], *inputs(1, 75, 2, 32, regime, h0=True, HV=4))


@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("D", [32, 128])
def test_gva_odd_lengths_packed(impl, D):
    """GVA with packed sequences of odd lengths and an initial state (D = 128: the 16-bit
    product path without a state is the next test's; here the state keeps float32 products)."""
    cu = torch.tensor([0, 1, 66, 97], dtype=torch.int32, device=DEV)
    check(KERNELS[impl], *inputs(1, 97, 1, D, "init", h0=True, N=3, HV=2), cu)


def test_gva_float16_products_no_state():
    """GVA on the float16-product path (16-bit inputs, K = 128, no initial state)."""
    q, k, v, g, beta, _ = inputs(2, 65, 2, 128, "mild", HV=4)
    check(chunk_gated_delta_rule, q, k, v, g, beta, None)


@pytest.mark.parametrize("impl", sorted(KERNELS))
def test_large_initial_state_float16(impl):
    """float16 inputs, K = 128 and an initial state of N(0, 1e5^2): finite and within the
    tolerance of the float64 reference (float16 products would give NaN; the reference's
    output reaches about 1e4, inside float16's range)."""
    check(KERNELS[impl], *inputs(1, 70, 1, 128, "mild", torch.float16, h0=True, h0_scale=1e5))


def test_grid_axes_hold_many_sequences_and_heads(monkeypatch):
    """N * HV > 65535 (16385 one-token sequences, HV = 4): every launch of the forward, the
    backward and the recurrent kernel keeps axes 1 and 2 within 65535 and axis 0 within
    2^31 - 1. The kernels are replaced by recorders (the interpreter neither enforces the
    limits nor runs 65540 programs cheaply); the GPU test runs them."""
    from kernels.gdn import chunk_bwd, chunk_fwd, recurrent

    grids = {}

    class Recorder:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            grids.setdefault(self.name, []).append(tuple(grid))
            return lambda *args, **kwargs: None

    for mod in (chunk_fwd, chunk_bwd, recurrent):
        for name in [n for n in vars(mod) if n.startswith("_") and n.endswith("_kernel")]:
            monkeypatch.setattr(mod, name, Recorder(name))
    n = 16385
    q, k, v, g, beta, _ = inputs(1, n, 1, 16, "mild", HV=4, device="cpu")
    cu = torch.arange(n + 1, dtype=torch.int32)
    fused_recurrent_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu)
    leaves = [x.requires_grad_() for x in (q, k, v, g, beta)]
    o, ht = chunk_gated_delta_rule(*leaves, cu_seqlens=cu, output_final_state=True)
    torch.autograd.grad((o.float().sum(), ht.sum()), leaves)
    assert len(grids) == 10, sorted(grids)   # 1 recurrent, 3 forward, 6 backward kernels (GVA: the group sum)
    for name, launched in grids.items():
        for grid in launched:
            assert grid[0] <= 2 ** 31 - 1 and all(x <= 65535 for x in grid[1:]), (name, grid)
    assert grids["_chunk_state_kernel"] == [(n * 4,)] and grids["_chunk_dh_kernel"] == [(n * 4,)]
    assert grids["_fused_recurrent_fwd_kernel"] == [(n * 4,)] and grids["_chunk_output_kernel"] == [(n, 4)]


def test_too_many_value_heads_is_an_error():
    from kernels.gdn.validate import MAX_HEADS

    q, k, v, g, beta, _ = inputs(1, 1, 1, 16, "mild", HV=MAX_HEADS + 1, device="cpu")
    with pytest.raises(ValueError, match="value heads exceed"):
        chunk_gated_delta_rule(q, k, v, g, beta)


def test_l2norm_in_kernel():
    q, k, v, g, beta, _ = inputs(1, 40, 1, 32, "mild")
    a, _ = chunk_gated_delta_rule(q * 3, k * 0.5, v, g, beta, use_qk_l2norm_in_kernel=True)
    r, _ = naive_recurrent_gated_delta_rule(q.float(), k.float(), v.float(), g, beta)
    assert relative_rmse(a, r) <= TOL


def test_value_block_fills_sms_and_respects_floor(monkeypatch):
    from kernels.core import launch

    monkeypatch.setattr(launch, "interpreting", lambda: False)
    cpu = torch.device("cpu")  # 132 SMs assumed, as on an H200
    assert launch.value_block(128, 64, cpu) == 64      # 64 * 128 / 64 = 128 programs >= 132 / 2
    assert launch.value_block(128, 32, cpu) == 32      # 128 programs
    assert launch.value_block(128, 8, cpu) == 16       # narrowest block for few (sequence, head) pairs
    assert launch.value_block(128, 8, cpu, min_block=32) == 32
    assert launch.value_block(128, 512, cpu) == 64
    assert launch.value_block(16, 8, cpu, min_block=32) == 16


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
def test_gpu_gate_error_and_no_wait_for_kernels(fn):
    """On the GPU g > 0 raises when checked, and a call returns before its kernels have finished."""
    q, k, v, g, beta, _ = inputs(1, 300, 4, 128, "mild")
    with pytest.raises(ValueError, match="g is a log decay and must be <= 0; max is 0.5"):
        fn(q, k, v, torch.where(torch.arange(300, device=g.device)[None, :, None] == 3, 0.5, g), beta,
           check_gate=True)
    q, k, v, g, beta, _ = inputs(4, 8192, 16, 128, "mild")   # kernels of a millisecond or more
    fn(q, k, v, g, beta)   # compiled and tuned
    torch.cuda.synchronize()
    fn(q, k, v, g, beta)
    assert not torch.cuda.current_stream().query()


@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
def test_gate_checked_only_when_asked(fn):
    """Like FLA's ops, ours do not read g unless ``check_gate``: a positive g then runs."""
    q, k, v, g, beta, _ = inputs(1, 8, 1, 32, "mild", device="cpu")
    g = torch.where(torch.arange(8)[None, :, None] == 3, 0.5, g)
    with pytest.raises(ValueError, match="g is a log decay and must be <= 0; max is 0.5"):
        fn(q, k, v, g, beta, check_gate=True)
    o, _ = fn(q, k, v, g, beta)
    assert o.shape == v.shape


@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule,
                                naive_recurrent_gated_delta_rule])
def test_errors(fn):
    q, k, v, g, beta, _ = inputs(2, 8, 1, 32, "mild", device="cpu")
    with pytest.raises(ValueError, match="q must be"):
        fn(q[0], k, v, g, beta)
    with pytest.raises(ValueError, match="v must be"):
        fn(q, k, v[:, :4], g, beta)
    with pytest.raises(ValueError, match="HV a multiple of H=2"):   # GVA: HV = 3 value heads, H = 2
        fn(q.expand(2, 8, 2, 32), k.expand(2, 8, 2, 32), v.expand(2, 8, 3, 32), g.expand(2, 8, 3),
           beta.expand(2, 8, 3))
    with pytest.raises(ValueError, match="g must be"):
        fn(q, k, v, g[..., None], beta)
    if fn is naive_recurrent_gated_delta_rule:   # the reference always checks g
        with pytest.raises(ValueError, match="g is a log decay and must be <= 0; max is 0.5"):
            fn(q, k, v, torch.where(torch.arange(8)[None, :, None] == 3, 0.5, g), beta)
    with pytest.raises(TypeError, match="share a dtype"):
        fn(q, k.float(), v, g, beta)
    with pytest.raises(TypeError, match="float16/bfloat16/float32"):
        fn(q, k, v, g.to(torch.int32), beta)
    with pytest.raises(ValueError, match="<= 0"):
        fn(q, k, v, g.abs() + 0.1, beta, **({} if fn is naive_recurrent_gated_delta_rule else {"check_gate": True}))
    with pytest.raises(ValueError, match="head dims"):
        fn(q[..., :24], k[..., :24], v, g, beta)
    with pytest.raises(ValueError, match="batch must be 1"):
        fn(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 8], dtype=torch.int32))
    q1, k1, v1, g1, b1 = (x[:1] for x in (q, k, v, g, beta))
    with pytest.raises(ValueError, match="end at T"):
        fn(q1, k1, v1, g1, b1, cu_seqlens=torch.tensor([0, 3, 7], dtype=torch.int32))
    with pytest.raises(TypeError, match="cu_seqlens"):
        fn(q1, k1, v1, g1, b1, cu_seqlens=torch.tensor([0.0, 8.0]))
    with pytest.raises(ValueError, match="initial_state must be"):
        fn(q, k, v, g, beta, initial_state=torch.zeros(1, 1, 32, 32))
    with pytest.raises(TypeError, match="initial_state"):
        fn(q, k, v, g, beta, initial_state=torch.zeros(2, 1, 32, 32, dtype=torch.float64))


def test_cached_per_tensor_identity_version_and_args():
    calls = []

    @cached_per_tensor
    def total(t, n):
        calls.append(n)
        return int(t.sum()) + n

    t = torch.tensor([0, 3, 8])
    assert total(t, 1) == total(t, 1) == 12 and len(calls) == 1
    assert total(t, 2) == 13 and len(calls) == 2                  # other arguments
    t.add_(1)                                                     # an in-place write
    assert total(t, 1) == 15 and len(calls) == 3
    assert total(t.clone(), 1) == 15 and len(calls) == 4          # equal values, another tensor
    with torch.inference_mode():
        u = torch.tensor([1])
    assert total(u, 0) == total(u, 0) == 1 and len(calls) == 6    # no version: not cached


@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
def test_cu_seqlens_changed_in_place_is_checked_again(fn):
    q, k, v, g, beta, _ = inputs(1, 8, 1, 32, "mild", device="cpu")
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    fn(q, k, v, g, beta, cu_seqlens=cu)
    cu[2] = 7
    with pytest.raises(ValueError, match="end at T=8"):
        fn(q, k, v, g, beta, cu_seqlens=cu)


# ---------------------------------------------------------------------------- GPU, study-like shapes

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fn", [chunk_gated_delta_rule, fused_recurrent_gated_delta_rule])
@pytest.mark.parametrize("packed", [False, True])
def test_gpu_repeated_call_never_synchronises(fn, packed):
    """A second call with the same inputs (and the same cu_seqlens tensor) does no
    synchronising operation: the host never waits for the GPU before enqueuing its kernels."""
    q, k, v, g, beta, _ = inputs(1, 1000, 4, 128, "mild")
    cu = torch.tensor([0, 10, 300, 301, 1000], dtype=torch.int32, device=q.device) if packed else None
    fn(q, k, v, g, beta, cu_seqlens=cu)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn(q, k, v, g, beta, cu_seqlens=cu)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
@pytest.mark.parametrize("T", [1, 63, 64, 65, 75, 300, 1000])
@pytest.mark.parametrize("h0", [False, True])
def test_gpu_regimes_lengths(impl, regime, T, h0):
    """K = 128: float16 products without an initial state, float32 with one."""
    check(KERNELS[impl], *inputs(2, T, 4, 128, regime, h0=h0), ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_varlen(impl, D):
    cu = random_cu_seqlens(40, 300, seed=1)
    T = int(cu[-1])
    check(KERNELS[impl], *inputs(1, T, 4, D, "init", h0=True, N=40), cu, ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
# gpu_memory(gib=X): X GiB reserved at the peak (gpu_peak_gib rounded up to the next GiB; on an H100 80 GB at 72f7c01,
# within 0.6 GiB of an H200's at 33868e9): the shares it holds in `pytest -m gpu -n 8` (tests/gpu_lanes.py)
@pytest.mark.parametrize("B,T,H", [(4, 8192, 16), pytest.param(1, 32768, 32, marks=pytest.mark.gpu_memory(gib=18))])
def test_gpu_chunk_study_shapes(B, T, H):
    for regime in ("mild", "strong"):
        check(chunk_gated_delta_rule, *inputs(B, T, H, 128, regime), ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("regime", ["zero", "mild", "init", "strong"])
@pytest.mark.parametrize("T", [1, 65, 1000])
@pytest.mark.parametrize("h0", [False, True])
def test_gpu_gva_regimes_lengths(impl, regime, T, h0):
    """GVA (H = 4, HV = 8) at K = 128: float16 products without a state, float32 with one."""
    check(KERNELS[impl], *inputs(2, T, 4, 128, regime, h0=h0, HV=8), ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_gva_varlen(impl, D):
    cu = random_cu_seqlens(40, 300, seed=1)
    check(KERNELS[impl], *inputs(1, int(cu[-1]), 4, D, "init", h0=True, N=40, HV=16), cu,
          ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl", sorted(KERNELS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_large_initial_state(impl, dtype, D):
    """An initial state of N(0, 1e5^2): finite outputs close to the reference (the issue's case)."""
    check(KERNELS[impl], *inputs(2, 1000, 4, D, "mild", dtype, h0=True, h0_scale=1e5),
          ref=naive_chunk_gated_delta_rule)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("impl,N,H,HV", [pytest.param(impl, N, H, HV, marks=pytest.mark.gpu_memory(gib=gib))
                                          for impl, N, H, HV, gib in (("chunk", 2048, 32, 32, 23),
                                                                      ("chunk", 4096, 8, 16, 22),
                                                                      ("recurrent", 2048, 32, 32, 13),
                                                                      ("recurrent", 4096, 8, 16, 12))])
def test_gpu_many_sequences_grid(impl, N, H, HV):
    """N * HV >= 65536 packed sequences x value heads (2047 was the old limit at H = 32), the
    sequences of :func:`edge_sequences` compared. Each case holds the lanes' shares of its peak
    (``gpu_memory``): the chunk kernel at 4096 x 16 failed the teardown's check of a lane's share of
    memory in eight lanes on an H200 (its initial and final states alone are 4 GiB each; its chunk
    states float32, as with any initial state), the recurrent one's on an H100."""
    cu = random_cu_seqlens(N, 100, seed=2)
    q, k, v, g, beta, _ = inputs(1, int(cu[-1]), H, 128, "mild", HV=HV)
    check(KERNELS[impl], q, k, v, g, beta, normal_on((N, HV, 128, 128), seed=3), cu,
          ref=naive_chunk_gated_delta_rule, seqs=edge_sequences(N))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("B,T,H,HV", [(4, 8192, 16, 16),
                                       pytest.param(1, 32768, 16, 32, marks=pytest.mark.gpu_memory(gib=18)),
                                       pytest.param(4, 8192, 16, 64, marks=pytest.mark.gpu_memory(gib=24)),
                                       (1, 32768, 2, 8)])
def test_gpu_chunk_flash_qla_shapes(B, T, H, HV):
    """FlashQLA's published forward shapes (h_qk / h_v)."""
    for regime in ("mild", "strong"):
        check(chunk_gated_delta_rule, *inputs(B, T, H, 128, regime, HV=HV), ref=naive_chunk_gated_delta_rule)
