"""Figures, tables and quoted numbers of the FlexAttention study, built on kernels.paper.report_kit.

Derived metrics (:func:`derive`), per row of the tidy table:

``tflops_elements`` / ``tflops_blocks``
    FLOP/s on the allowed (query, key) pairs (``flops``) and on every
    computed 128x128 tile (``flops_blocks``), in TFLOP/s.
``speedup_vs_flash`` / ``speedup_vs_cudnn``
    time of dense causal SDPA (FlashAttention-2 / cuDNN) at the same GPU,
    dtype, pass, batch, heads, kv_heads, seqlen and head_dim, over this row's.
``speedup_vs_causal``
    time of the same impl with the causal mask and the same score_mod at the
    same shape, over this row's.
``ideal_ratio`` / ``pct_of_ideal``
    blocks computed by causal / blocks computed by this mask
    (``density_blocks`` ratio at the same seqlen): the speedup a kernel whose
    time is proportional to its tiles would reach; and speedup_vs_causal as a
    percentage of it.
``slowdown_vs_plain``
    this row's time over the same impl, mask and shape without a score_mod.
``tiles_per_row``
    computed tiles per query-block row: density_blocks x ceil(N / 128).
``tile_fill``
    density_elements / density_blocks: the fraction of the computed tiles'
    elements that the mask allows (partial tiles run the mask_mod on every
    element and waste the masked ones).
``tile_cost``
    time per computed tile over flex causal's time per computed tile at the
    same shape, pass, impl and score_mod: ideal_ratio / speedup_vs_causal,
    i.e. 100 / pct_of_ideal.

The reference shape (score modifications, the causal macros) is that of the
config group ``masks`` (role, :data:`REFERENCE_GROUP`).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.lines import Line2D

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.flex.impls import IMPLS
from kernels.flex.density import BLOCK_SIZE
from kernels.paper.rows import ROLES

SHAPE = ["gpu", "dtype", "pass", "batch", "heads", "kv_heads", "seqlen", "head_dim"]
MASK_KNOBS = ["mask", "window", "documents", "doc_dist", "prefix"]
#: The implementations in the order of legends and tables (their registry's).
ORDER = tuple(IMPLS)
MASK_LABEL = {"causal": "causal", "window": "sliding window", "document": "document packing",
              "document_window": "documents + window", "prefix": "prefix-LM"}
SCORE_MOD_LABEL = {"alibi": "ALiBi", "softcap": "soft-cap (tanh)", "softcap_sigmoid": "soft-cap (sigmoid)",
                   "alibi_softcap": "ALiBi + soft-cap"}
FAMILY_COLORS = dict(zip(MASK_LABEL, ["#000000", "#4C72B0", "#DD8452", "#8172B3", "#55A868"]))
#: The FlexAttention backends whose speed and sparsity the report analyses, each against its own
#: causal rows: impl -> the prefix of its macros (the default Triton backend's ``Flex...``, the
#: FLASH backend's, FlashAttention-4's CuTe kernels, ``FlexFlash...``).
BACKENDS = {"flex": "Flex", "flex_flash": "FlexFlash"}
#: Markers of the memory figure's implementations, in turn (one that another hides is drawn over it in
#: hollow rings: :func:`kernels.paper.style.reveal_hidden`).
MEMORY_MARKERS = "osD^v<>p"
#: The implementations that the memory figure draws as one grey band, the range of their peaks at
#: each length: the dense kernels, which keep neither a mask nor the scores, and whose peaks lie
#: within a few percent of each other (as lines, their markers would hide one another).
MEMORY_BAND = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex_flash")
#: Each backend's name in the tables and figures that set the two side by side.
BACKEND_LABEL = {"flex": "Triton", "flex_flash": "FLASH"}
#: The order of passes and of backends in the tables (their rank, a sort key).
PASS_RANK = {p: i for i, p in enumerate(style.PASS_LABELS)}
BACKEND_RANK = {b: i for i, b in enumerate(BACKENDS)}
#: The config group (role) whose shape is the study's reference shape: every mask family at one shape.
REFERENCE_GROUP = "masks"
#: The config groups (roles) of the sequence-length series: forward, and forward + backward.
SEQLEN_GROUPS = ("seqlen", "seqlen_bwd")
#: The fields of a shape (the reference shape's, :func:`_reference`).
REFERENCE_FIELDS = ["batch", "heads", "kv_heads", "seqlen", "head_dim", "dtype"]
#: The columns :func:`derive` adds (the module docstring).
DERIVED = ["tflops_elements", "tflops_blocks", "speedup_vs_flash", "speedup_vs_cudnn", "speedup_vs_causal",
           "ideal_ratio", "pct_of_ideal", "tiles_per_row", "tile_fill", "tile_cost", "slowdown_vs_plain"]
#: The tidy table's columns that the figures, tables and macros select on: every selection starts at
#: :func:`_main_gpu`, which gives a table without rows these columns (:func:`kernels.paper.report_kit.tidy_frame`).
COLUMNS = [*SHAPE, *MASK_KNOBS, "impl", "status", "error", "score_mod", "device_ms", "flops", "flops_blocks",
           "density_blocks", "density_elements", ROLES, kit.DEVICE_REPS, *DERIVED]


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(np.nan, index=df.index)


def _ok_base(df: pd.DataFrame, sel: pd.Series, keys: list[str], col: str = "device_ms") -> pd.Series:
    """For every row of ``df``, ``col`` of the ok row selected by ``sel`` with equal ``keys`` (NaN if none)."""
    return kit.baseline(df, sel & (df["status"] == "ok"), keys, col)


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add the study's metrics (module docstring) to the tidy table."""
    df = df.copy()
    if df.empty:
        return df
    for col in ("flops_blocks", "device_ms", "density_blocks", "density_elements", "flops", "seqlen"):
        df[col] = _num(df, col)
    seconds = df["device_ms"] / 1e3
    df["tflops_elements"] = df["flops"] / seconds / 1e12
    df["tflops_blocks"] = df["flops_blocks"] / seconds / 1e12
    causal = (df["mask"] == "causal") & (df["score_mod"] == "none")
    for impl, name in (("sdpa_flash", "flash"), ("sdpa_cudnn", "cudnn")):
        df[f"speedup_vs_{name}"] = _ok_base(df, causal & (df["impl"] == impl), SHAPE) / df["device_ms"]
    keys = SHAPE + ["impl", "score_mod"]
    df["speedup_vs_causal"] = _ok_base(df, df["mask"] == "causal", keys) / df["device_ms"]
    causal_blocks = _ok_base(df, df["mask"] == "causal", ["seqlen"], "density_blocks")
    df["ideal_ratio"] = causal_blocks / df["density_blocks"]
    df["pct_of_ideal"] = 100.0 * df["speedup_vs_causal"] / df["ideal_ratio"]
    df["tiles_per_row"] = df["density_blocks"] * np.ceil(df["seqlen"] / BLOCK_SIZE)
    df["tile_fill"] = df["density_elements"] / df["density_blocks"]
    df["tile_cost"] = df["ideal_ratio"] / df["speedup_vs_causal"]
    df["slowdown_vs_plain"] = df["device_ms"] / _ok_base(df, df["score_mod"] == "none",
                                                        SHAPE + ["impl"] + MASK_KNOBS)
    return df


# ----------------------------------------------------------------------------
# selections


def _main_gpu(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of one GPU: the non-CPU GPU with most ok rows, else the CPU; with every column of
    :data:`COLUMNS`, rows or none."""
    df = kit.tidy_frame(df, COLUMNS)
    if df.empty:
        return df
    ok = df[df["status"] == "ok"]
    counts = ok["gpu"].value_counts()
    gpus = [g for g in counts.index if g != "cpu"] or list(counts.index) or list(df["gpu"].unique())
    return df[df["gpu"] == gpus[0]]


def _where(df: pd.DataFrame, **eq) -> pd.DataFrame:
    sel = pd.Series(True, index=df.index)
    for k, v in eq.items():
        if k not in df:
            return df.iloc[0:0]
        sel &= df[k] == v
    return df[sel]


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["status"] == "ok") & df["device_ms"].notna()]


def _seqlen_series(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the sequence-length series (roles :data:`SEQLEN_GROUPS`, the config groups at a
    constant batch x seqlen, causal): the x axis of the throughput and memory figures."""
    return df[kit.has_role(df, SEQLEN_GROUPS[0]) | kit.has_role(df, SEQLEN_GROUPS[1])]


def _reference(df: pd.DataFrame) -> dict | None:
    """The reference shape (:data:`REFERENCE_FIELDS`): that of the first row of the config group
    :data:`REFERENCE_GROUP` (role) in ``df``; None when ``df`` has none."""
    ref = kit.with_role(df, REFERENCE_GROUP)
    return None if ref.empty else ref.iloc[0][REFERENCE_FIELDS].to_dict()


def _at_reference(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` at the reference shape (:func:`_reference`); none without it."""
    ref = _reference(df)
    return _where(df, **ref) if ref is not None else df.iloc[0:0]


def _base(df: pd.DataFrame) -> pd.DataFrame:
    """The main GPU's rows at the reference shape (:func:`_at_reference`), or all of them if it was not measured."""
    d = _main_gpu(df)
    b = _at_reference(d)
    return b if not b.empty else d


def _sparse(df: pd.DataFrame, impl: str = "flex") -> pd.DataFrame:
    """The main GPU's ok rows of ``impl`` (a FlexAttention backend, :data:`BACKENDS`) without a
    score_mod at seqlen >= 8K, every mask but causal; refused (``unsupported``) rows are left out."""
    d = _ok(_main_gpu(df))
    return d[(d["impl"] == impl) & (d["score_mod"] == "none") & (d["seqlen"] >= 8191) & (d["mask"] != "causal")]


def _row_model(k: float, tiles_per_row, causal_tiles_per_row):
    """Tile cost when every query-block row costs ``k`` tiles on top of its tiles (causal's rows included)."""
    return (1.0 + k / tiles_per_row) / (1.0 + k / causal_tiles_per_row)


def row_cost_fit(d: pd.DataFrame) -> tuple[float, float]:
    """Least-squares fixed cost per query-block row, in tiles, and the R² of the fit on ``tile_cost``.

    Model: a row of r computed tiles takes (k + r) tile times, so the tile
    cost relative to causal (r_c = tiles_per_row x ideal_ratio tiles per
    row) is (1 + k/r) / (1 + k/r_c). k is searched on a 0.01 grid in
    [0, 32]; (nan, nan) with fewer than 3 usable rows.
    """
    cols = ["tile_cost", "tiles_per_row", "ideal_ratio"]
    g = d[cols].apply(pd.to_numeric, errors="coerce").dropna()
    if len(g := g[g["tiles_per_row"] > 0]) < 3:
        return np.nan, np.nan
    y, r = g["tile_cost"].to_numpy(), g["tiles_per_row"].to_numpy()
    ks = np.linspace(0.0, 32.0, 3201)
    sse = ((_row_model(ks[:, None], r, r * g["ideal_ratio"].to_numpy()) - y) ** 2).sum(axis=1)
    best = int(np.argmin(sse))
    sst = ((y - y.mean()) ** 2).sum()
    return float(ks[best]), float(1.0 - sse[best] / sst) if sst > 0 else np.nan


def _rank_corr(a: pd.Series, b: pd.Series) -> float:
    """Spearman's rank correlation of two aligned series (nan with fewer than 3 pairs or a constant one)."""
    ok = a.notna() & b.notna()
    if ok.sum() < 3 or a[ok].nunique() < 2 or b[ok].nunique() < 2:
        return np.nan
    return float(np.corrcoef(a[ok].rank(), b[ok].rank())[0, 1])


def _seqlen_ticks(ax, seqlens) -> None:
    """Sequence lengths as 2K, 8K, 32K ticks on a log2 x axis."""
    ax.set_xscale("log", base=2)
    ticks = sorted({int(n) for n in seqlens})
    if ticks:
        ax.set_xticks(ticks, [style.tokens(n) for n in ticks])
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())


# ----------------------------------------------------------------------------
# figures


def _mask_and_length_legends(fig, families, markers: dict, lines: list) -> None:
    """Two legends below the panels: the colour of each mask family in ``families`` and the
    reference ``lines`` (Line2D handles), and beside it the marker of each sequence length
    (``markers``: its label -> marker), so that a reader matches colour and shape separately
    instead of reading one entry per mask and length."""
    masks = [Line2D([], [], ls="", marker="o", color=FAMILY_COLORS[f], label=MASK_LABEL[f]) for f in families]
    lengths = [Line2D([], [], ls="", marker=m, color="0.4", label=n) for n, m in markers.items()]
    if masks or lines:
        fig.legend(handles=masks + lines, loc="upper right", bbox_to_anchor=(0.62, 0.0), ncol=2)
    if lengths:
        fig.legend(handles=lengths, loc="upper left", bbox_to_anchor=(0.66, 0.0), ncol=2, title="sequence length")


def fig_tflops(df: pd.DataFrame):
    """Causal attention throughput (TFLOP/s on the unmasked elements) against sequence length at
    32768 tokens per batch (H16 D128, bfloat16): FlexAttention's Triton and FLASH backends against
    SDPA's dense back ends (FA2: FlashAttention-2), SDPA with a materialised mask and PyTorch softmax
    attention (naive)."""
    d = _seqlen_series(_ok(_main_gpu(df)))
    passes = ["fwd", "fwdbwd"]
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.4, ncols=2, squeeze=False)
    impls = sorted(d["impl"].unique())
    colors = style.palette("flex", impls)
    for ax, pas in zip(axes[0], passes):
        p = d[d["pass"] == pas]
        if p.empty:
            kit.mark_empty(ax)
        for impl in impls:
            g = p[p["impl"] == impl].sort_values("seqlen")
            if not g.empty:
                ax.plot(g["seqlen"], g["tflops_elements"], marker="o", color=colors[impl],
                        label=style.label("flex", impl), linestyle="-" if len(g) >= 3 else "none")
        _seqlen_ticks(ax, p["seqlen"])
        ax.set_xlabel("sequence length (batch × length constant)")
        ax.set_ylabel("TFLOP/s (unmasked elements)")
        ax.set_title(style.pass_label(pas))
    fig.tight_layout()
    style.legend_below(fig, axes[0], ncol=7)
    return fig


def fig_memory(df: pd.DataFrame):
    """Peak device memory per sequence (one call's peak over its batch) against sequence length,
    log-log (32768 tokens per batch; crosses: out of memory), so that a materialised N × N mask or
    score matrix shows as slope 2 and what holds only the inputs, the output and their statistics as
    slope 1. The grey band spans the dense kernels (FlashAttention-2, cuDNN and memory-efficient SDPA,
    FlexAttention's FLASH backend); the legend gives each other implementation's fitted slope in the
    forward, the values the memory claim is judged by (the claims table)."""
    main = _main_gpu(df)
    slopes = memory_fits(main)
    d = _seqlen_series(main)
    d = d.assign(gib=_num(d, "peak_mem_bytes") / _num(d, "batch") / 2**30)
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.4, ncols=2, squeeze=False)
    impls = sorted(d["impl"].unique())
    colors = style.palette("flex", impls)
    banded = [i for i in MEMORY_BAND if i in impls]
    for ax, pas in zip(axes[0], ["fwd", "fwdbwd"]):
        p = d[d["pass"] == pas]
        if p.empty:
            kit.mark_empty(ax)
            continue
        top = p["gib"].max()
        band = p[p["impl"].isin(banded) & (p["status"] == "ok")]
        band = band.groupby("seqlen")["gib"].agg(["min", "max"]).dropna()
        if not band.empty:
            ax.fill_between(band.index, band["min"], band["max"], color="0.75", lw=3, zorder=1,
                            label="dense: " + kit.and_list([style.label("flex", i) for i in banded]))
        for i, impl in enumerate(impls):
            g = p[p["impl"] == impl].sort_values("seqlen")
            ok = g[(g["status"] == "ok") & g["gib"].notna()]
            if not ok.empty and impl not in banded:
                label = style.label("flex", impl)
                if impl in slopes and slopes[impl].n:
                    label += f" (slope {kit.fmt(slopes[impl].p, 2)})"
                ax.plot(ok["seqlen"], ok["gib"], color=colors[impl], marker=MEMORY_MARKERS[i % len(MEMORY_MARKERS)],
                        label=label, linestyle="-" if len(ok) >= 3 else "none", lw=0.9)
            oom = g[g["status"] == "oom"]
            if not oom.empty and np.isfinite(top):
                ax.scatter(oom["seqlen"], [top * 1.3] * len(oom), marker="x", color=colors[impl])
        _seqlen_ticks(ax, p["seqlen"])
        ax.set_yscale("log")
        style.plain_log(ax, "y")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("peak memory per sequence (GiB)")
        ax.set_title(style.pass_label(pas))
    fig.tight_layout()
    style.legend_below(fig, axes[0], ncol=4)
    return fig


def fig_tile_cost(df: pd.DataFrame):
    """Why sparse masks fall short of the ideal speedup (FlexAttention's Triton backend, every
    non-causal mask at N of 8191 and more): time per computed 128 × 128 tile over causal's (tile cost =
    100 / % of ideal; dotted: 80 % of ideal) against the tiles computed per query-block row (left:
    forward, middle: forward + backward) and the fill of the computed tiles (right; filled markers
    forward, open ones forward + backward); grey curves: one fixed cost per row worth k tiles, fitted
    (k and R² in each panel).

    That fixed cost lumps together the Q load, the softmax epilogue and O write, and the mask function
    on the row's one or two partial tiles: the data cannot separate them, because the fill falls with
    the row length too. Fill alone orders the cases less well (at the same fill the tile cost can
    differ by half). Uniform document packing sits on the fit like the sliding windows; heavy-tailed
    document lengths sit above it (their rows are uneven, which the mean row length hides). Both
    backends' cases: the table ``flex_tile_cost``."""
    d = _sparse(df)  # one marker per row length of causal (8191 and 8192 share 64 rows)
    d = d.assign(n_label=(d["seqlen"] / 1024).round().astype(int).astype(str) + "K")
    passes = ["fwd", "fwdbwd"]
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.4, ncols=3, squeeze=False)
    families = [m for m in MASK_LABEL if (d["mask"] == m).any()]
    n_labels = sorted(d["n_label"].unique(), key=lambda x: int(x[:-1]))
    markers = dict(zip(n_labels, "osD^v"))
    for ax, pas in zip(axes[0], passes):
        ax.set_title(style.pass_label(pas))
        p = d[d["pass"] == pas]
        if p.empty:
            kit.mark_empty(ax)
            continue
        for fam in families:
            for n in n_labels:
                g = p[(p["mask"] == fam) & (p["n_label"] == n)]
                ax.scatter(g["tiles_per_row"], g["tile_cost"], color=FAMILY_COLORS[fam], marker=markers[n], s=14)
        k, r2 = row_cost_fit(p)
        if np.isfinite(k):
            grid = np.geomspace(max(p["tiles_per_row"].min() * 0.8, 0.5), p["tiles_per_row"].max() * 1.2, 60)
            for n, ls in zip(n_labels, ["-", "--", ":", "-."]):
                at_n = p[p["n_label"] == n]
                if not at_n.empty:
                    causal_rows = (at_n["tiles_per_row"] * at_n["ideal_ratio"]).median()
                    ax.plot(grid, _row_model(k, grid, causal_rows), color="0.55", lw=0.8, ls=ls, zorder=0,
                            label=f"fit, N{n}")
            ax.text(0.97, 0.96, f"fit: row = {k:.1f} tiles\nR² = {r2:.2f}", transform=ax.transAxes, ha="right",
                    va="top", fontsize=8)
        ax.axhline(1.0, color="0.3", lw=0.5)
        ax.axhline(1.25, color="0.6", lw=0.7, ls=":")
        ax.set_xscale("log")
        style.plain_log(ax, "x")
        ax.set_xlabel("tiles computed per query-block row")
        ax.set_ylabel("tile cost (causal = 1)")
    ax = axes[0][2]
    ax.set_title("fill")
    if d.empty:
        kit.mark_empty(ax)
    for fam in families:
        for pas, face in zip(passes, [FAMILY_COLORS[fam], "none"]):
            g = d[(d["mask"] == fam) & (d["pass"] == pas)]
            ax.scatter(100 * g["tile_fill"], g["tile_cost"], s=14, edgecolors=FAMILY_COLORS[fam], facecolors=face)
    ax.axhline(1.0, color="0.3", lw=0.5)
    ax.axhline(1.25, color="0.6", lw=0.7, ls=":")
    ax.set_xlabel("fill of computed tiles (% allowed)")
    ax.set_ylabel("tile cost (causal = 1)")
    _mask_and_length_legends(fig, families, {f"N{n}": markers[n] for n in n_labels},
                             [Line2D([], [], color="0.55", lw=0.8, ls=ls, label=f"fit, N{n}")
                              for n, ls in zip(n_labels, ["-", "--", ":", "-."])])
    fig.tight_layout()
    return fig


FIGURES = {
    "flex_tflops": fig_tflops,
    "flex_tile_cost": fig_tile_cost,
    "flex_memory": fig_memory,
}


# ----------------------------------------------------------------------------
# tables


def _case_label(row) -> str:
    """A mask family and its setting in a few words ("window 1024", "64 docs, heavy")."""
    if row["mask"] == "causal":
        return "causal"
    if row["mask"] == "window":
        return f"window {int(row['window'])}"
    if row["mask"] == "document":
        return f"{int(row['documents'])} docs, {row['doc_dist']}"
    if row["mask"] == "document_window":
        return f"{int(row['documents'])} docs, {row['doc_dist']}, window {int(row['window'])}"
    if row["mask"] == "prefix":
        return f"prefix {int(row['prefix'])}"
    return str(row["mask"])


def table_summary(df: pd.DataFrame) -> pd.DataFrame:
    """FlexAttention per mask at sequence lengths N of 8191 and more (no score modification; every
    case the sparsity medians use, with what differs from the reference shape), for each backend
    (the default Triton one and, where timed, FLASH): tiles computed (% of all), device time,
    speedup over the backend's own causal and as a percentage of the ideal (causal's tiles over the
    mask's), and speedup over dense causal FlashAttention-2 (FA2) and cuDNN at the same shape."""
    d = _ok(_main_gpu(df))
    cols = ["pass", "backend", "N", "mask", "tiles %", "ms", "vs causal", "% ideal", "vs FA2", "vs cuDNN"]
    d = d[d["impl"].isin(BACKENDS) & (d["score_mod"] == "none") & (d["seqlen"] >= 8191)]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d = d.assign(_p=d["pass"].map(PASS_RANK), _b=d["impl"].map(BACKEND_RANK))
    d = d.sort_values(["_p", "_b", "seqlen", "head_dim", "mask", "density_blocks"])
    setting = _settings(d, _reference(_main_gpu(df)))
    out = pd.DataFrame({
        "pass": d["pass"].map(style.pass_label), "backend": d["impl"].map(BACKEND_LABEL),
        "N": d["seqlen"].astype(int), "mask": setting,
        "tiles %": (100 * d["density_blocks"]).round(1),
        "ms": d["device_ms"].round(3), "vs causal": d["speedup_vs_causal"].round(2),
        "% ideal": d["pct_of_ideal"].round(1),
        "vs FA2": d["speedup_vs_flash"].round(2), "vs cuDNN": d["speedup_vs_cudnn"].round(2)})
    return out.reset_index(drop=True)


def table_dense(df: pd.DataFrame) -> pd.DataFrame:
    """Causal attention: device time (ms) per implementation and shape (bfloat16; B batch, H query
    heads, KV key/value heads where fewer, N sequence length, D head size): FlexAttention (default,
    max-autotune and, where timed, the FLASH backend) against SDPA's FlashAttention-2, cuDNN and memory-efficient back ends, SDPA with a
    materialised mask and PyTorch softmax attention; OOM: out of memory; n/a: not measured or not
    supported. An implementation without a timed causal row has no column (the coverage table
    gives its rows' statuses)."""
    d = _main_gpu(df)
    d = d[(d["mask"] == "causal") & (d["score_mod"] == "none")]
    d = d[d["impl"].isin(d.loc[d["status"] == "ok", "impl"])]
    if d.empty:
        return pd.DataFrame(columns=["pass", "shape"])
    d = d.assign(cell=np.where(d["status"] == "ok", d["device_ms"].round(3).map("{:.3f}".format),
                               d["status"].map({"oom": "OOM"}).fillna(style.MISSING)))
    shape = [style.shape(B=b, H=h, **({"KV": kv} if kv != h else {}), N=n, D=hd)
             + ("" if dt == "bfloat16" else f" {dt}")
             for b, h, kv, n, hd, dt in zip(d["batch"], d["heads"], d["kv_heads"], d["seqlen"], d["head_dim"],
                                            d["dtype"])]
    d = d.assign(shape=shape, _p=d["pass"].map(PASS_RANK))
    t = d.pivot_table(index=["_p", "pass", "seqlen", "shape"], columns="impl", values="cell", aggfunc="first")
    t = t.reset_index().drop(columns=["seqlen", "_p"]).fillna(style.MISSING)
    order = [c for c in ORDER if c in t]
    t = t[["pass", "shape", *order]].assign(**{"pass": lambda x: x["pass"].map(style.pass_label)})
    t.columns = ["pass", "shape", *(style.label("flex", c) for c in order)]
    return t


def table_score_mods(df: pd.DataFrame) -> pd.DataFrame:
    """Cost of the score modifications at B4 H16 N8192 D128 (bfloat16, FlexAttention, each backend):
    device time, time over the same backend and mask without a modification, and the added time per
    unmasked score in picoseconds (whole GPU) for ALiBi, the soft-cap (through tanh and through a
    sigmoid) and the source's combination."""
    d = _ok(_base(df))
    cols = ["pass", "backend", "mask", "score_mod", "ms", "slowdown", "added ps / score"]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d = d[d["impl"].isin(BACKENDS) & d["mask"].isin(["causal", "window"])]
    plain = _ok_base(d, d["score_mod"] == "none", SHAPE + ["impl"] + MASK_KNOBS)
    elements = d["batch"] * d["heads"] * d["seqlen"].astype(float) ** 2 * d["density_elements"]
    added = (d["device_ms"] - plain) * 1e9 / elements
    keep = plain.notna() & (d["score_mod"] != "none")
    d, added = d[keep], added[keep]
    out = pd.DataFrame({"pass": d["pass"].map(style.pass_label), "backend": d["impl"].map(BACKEND_LABEL),
                        "mask": d.apply(_case_label, axis=1),
                        "score_mod": d["score_mod"].map(SCORE_MOD_LABEL).fillna(d["score_mod"]),
                        "ms": d["device_ms"].round(3), "slowdown": d["slowdown_vs_plain"].round(2),
                        "added ps / score": added.round(3)})
    out = out.assign(_p=d["pass"].map(PASS_RANK), _b=d["impl"].map(BACKEND_RANK))
    return out.sort_values(["_p", "_b", "mask", "score_mod"]).drop(columns=["_p", "_b"]).rename(
        columns={"score_mod": "modification"}).reset_index(drop=True)


def _shape_note(row, ref: dict | None) -> str:
    """What differs from the reference shape ``ref`` (:func:`_reference`) apart from batch and seqlen
    (e.g. "D64", "H16 KV4"); nothing without one."""
    notes = []
    if ref is None:
        return ""
    if row["heads"] != ref["heads"] or row["kv_heads"] != ref["kv_heads"]:
        notes.append(style.shape(H=row["heads"], KV=row["kv_heads"]))
    if row["head_dim"] != ref["head_dim"]:
        notes.append(style.shape(D=row["head_dim"]))
    if row["dtype"] != ref["dtype"]:
        notes.append(str(row["dtype"]))
    return ", ".join(notes)


def _settings(d: pd.DataFrame, ref: dict | None) -> pd.Series:
    """Each row's mask and setting (:func:`_case_label`) with what differs from the reference shape
    ``ref`` (:func:`_shape_note`): "window 1024, D64"."""
    return d.apply(lambda r: ", ".join(x for x in (_case_label(r), _shape_note(r, ref)) if x), axis=1)


def table_tile_cost(df: pd.DataFrame) -> pd.DataFrame:
    """Where the sparse masks lose their ideal speedup (FlexAttention, each backend, no score
    modification, N of 8191 and more): tiles computed per query-block row, fill of the computed tiles,
    percentage of the ideal speedup, tile cost (time per computed tile over the backend's own causal's
    at the same shape and pass) and the tile cost predicted by one fixed cost per query-block row,
    fitted per backend and pass."""
    cols = ["pass", "backend", "N", "mask", "tiles / row", "fill %", "% ideal", "tile cost", "fit"]
    parts = []
    for backend in BACKENDS:
        sparse = _sparse(df, backend)
        d = sparse[sparse["mask"].isin(["window", "document", "document_window"])]
        if d.empty:
            continue
        fit = pd.Series(np.nan, index=d.index)
        for _, p in sparse.groupby("pass"):
            k, _ = row_cost_fit(p)
            idx = p.index.intersection(d.index)
            rows = d.loc[idx, "tiles_per_row"]
            fit[idx] = _row_model(k, rows, rows * d.loc[idx, "ideal_ratio"])
        parts.append(d.assign(fit=fit, _b=BACKEND_RANK[backend]))
    if not parts:
        return pd.DataFrame(columns=cols)
    d = pd.concat(parts)
    d = d.assign(_p=d["pass"].map(PASS_RANK)).sort_values(
        ["_p", "_b", "tiles_per_row", "seqlen", "mask"])
    setting = _settings(d, _reference(_main_gpu(df)))
    out = pd.DataFrame({
        "pass": d["pass"].map(style.pass_label), "backend": d["impl"].map(BACKEND_LABEL),
        "N": d["seqlen"].astype(int), "mask": setting,
        "tiles / row": d["tiles_per_row"].round(1), "fill %": (100 * d["tile_fill"]).round(0),
        "% ideal": d["pct_of_ideal"].round(1), "tile cost": d["tile_cost"].round(2), "fit": d["fit"].round(2)})
    return out.reset_index(drop=True)


TABLES = {
    "flex_summary": table_summary,
    "flex_dense": table_dense,
    "flex_score_mods": table_score_mods,
    "flex_tile_cost": table_tile_cost,
}
#: The tables the paper sets (:func:`kernels.paper.render.paper_tables`): none; each of :data:`TABLES`
#: is its CSV file under results/tables/, which the text names.
PAPER_TABLES = ()


# ----------------------------------------------------------------------------
# macros


#: The study's headline numbers that :func:`macros` gives, by macro, in words (the
#: reproduction appendix sets them beside the second run's).
HEADLINES = {"FlexFwdCausalTflops": "FlexAttention causal forward, TFLOP/s",
             "FlexFwdCausalVsFlash": "the same over FlashAttention-2, ×",
             "FlexFwdCausalVsCudnn": "the same over cuDNN, ×",
             "FlexFlashFwdCausalVsCudnn": "its FLASH backend over cuDNN, ×"}
#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro (in its order).
CLAIMS = {"FlexMemoryVerdict": "FlexAttention: dense mask memory from O(N²) to O(N)",
          "FlexPrefillVerdict": "FlexAttention (Triton backend): 2–4× faster prefill",
          "FlexSparsityVerdict": "FlexAttention (Triton backend) speed follows sparsity (at least 80 % of the "
                                 "ideal speedup)",
          "FlexFlashPrefillVerdict": "FlexAttention (FLASH backend): 2–4× faster prefill",
          "FlexFlashSparsityVerdict": "FlexAttention (FLASH backend) speed follows sparsity (at least 80 % of "
                                      "the ideal speedup)"}

#: Each claim of :data:`CLAIMS` in a few words, by verdict macro: the label of its values in the
#: across-GPU table (:mod:`kernels.paper.uncertainty`).
CLAIM_NAMES = {"FlexMemoryVerdict": "mask memory slope",
               "FlexPrefillVerdict": "Triton prefill",
               "FlexSparsityVerdict": "Triton sparsity",
               "FlexFlashPrefillVerdict": "FLASH prefill",
               "FlexFlashSparsityVerdict": "FLASH sparsity"}

#: The implementations each verdict of :data:`CLAIMS` cannot be decided without, by verdict macro: on
#: a GPU where one of them has rows and none timed ok, the claim is "not testable"
#: (:func:`kernels.paper.quick.untestable`).
CLAIM_IMPLS = {"FlexMemoryVerdict": ("flex",),
               "FlexPrefillVerdict": ("flex", "sdpa_flash"),
               "FlexSparsityVerdict": ("flex",),
               "FlexFlashPrefillVerdict": ("flex_flash", "sdpa_flash"),
               "FlexFlashSparsityVerdict": ("flex_flash",)}

#: The values each verdict of :data:`CLAIMS` compares, by verdict macro: ``(macro, words)`` pairs, each
#: printed as its value, the words and its interval (:func:`kernels.paper.models.evidence_text`: each
#: GPU model's claims side by side).
EVIDENCE = {"FlexMemoryVerdict": (("FlexNaiveMemSlope", " naive"), ("FlexSdpaMaskedMemSlope", " masked SDPA"),
                                  ("FlexFlexMemSlope", " flex")),
            "FlexPrefillVerdict": (("FlexFwdCausalVsFlash", "× over FA2"), ("FlexFwdCausalVsCudnn", "× over cuDNN")),
            "FlexSparsityVerdict": (("FlexWindowFwdPctIdealMedian", " % windows"),
                                    ("FlexDocumentFwdPctIdealMedian", " % documents")),
            "FlexFlashPrefillVerdict": (("FlexFlashFwdCausalVsFlash", "× over FA2"),
                                        ("FlexFlashFwdCausalVsCudnn", "× over cuDNN")),
            "FlexFlashSparsityVerdict": (("FlexFlashWindowFwdPctIdealMedian", " % windows"),
                                         ("FlexFlashDocumentFwdPctIdealMedian", " % documents"))}
#: The passes in macro names.
PASS_NAMES = {"fwd": "Fwd", "bwd": "Bwd", "fwdbwd": "Fwdbwd"}
#: Longest quoted refusal message (characters; longer ones end in an ellipsis).
MESSAGE_CHARS = 160


def backend_macros(d: pd.DataFrame, impl: str, prefix: str) -> dict[str, str]:
    """The macros of one FlexAttention backend ``impl``, each named ``<prefix>...`` (:data:`BACKENDS`).

    ``d`` is the derived tidy table's ok rows of one GPU (refused rows are not read). At the
    reference shape: the causal time, TFLOP/s and speed over FA2 and cuDNN per pass
    (``<prefix><Pass>Causal{Ms,Tflops,VsFlash,VsCudnn}``), the sliding window 1024's forward speedup
    over the backend's own causal (``<prefix>FwdWindowThousandSpeedup``), each speedup's 95 % interval
    (``...Ci``, :func:`kernels.paper.report_kit.interval`) and the verdict on "2-4x
    faster prefill" from the causal forward over FA2 and cuDNN (``<prefix>PrefillVerdict``). At N >=
    8K: the sliding windows' and documents' percentage of the ideal speedup over the backend's own
    causal (``<prefix><Family><Pass>PctIdeal{Min,Median}``, ``...TargetMet``: cases >= 80 %; the
    median's 95 % interval, ``...PctIdealMedianCi``, :func:`kernels.paper.report_kit.median_ratio` of the
    speedups over causal as fractions of the ideal, written as percentages), the
    verdict on "speed follows sparsity" from the forward cases (``<prefix>SparsityVerdict``), the
    fixed cost per query-block row fitted to their tile costs (:func:`row_cost_fit`:
    ``<prefix><Pass>RowCost{Tiles,Rsq}``, rank correlations, mean residuals per family, the worst
    case of each family). Its compile times (cold: in the compile-ahead child where one prepared
    the case): ``<prefix>CompileSecondsMedian`` over the cases that compiled,
    ``<prefix>CasesWithoutRecompile``. Every value not measured reads n/a.
    """
    out: dict[str, str] = {}
    base = _at_reference(d)

    def reps(pas, **where):
        return kit.first(_where(base, score_mod="none", **{"pass": pas}, **where), kit.DEVICE_REPS)

    vs_dense = {}  # (pass, dense baseline): the causal case's speedup over it, with its interval
    for pas, pname in PASS_NAMES.items():
        causal = _where(base, impl=impl, mask="causal", score_mod="none", **{"pass": pas})
        out[f"{prefix}{pname}CausalMs"] = kit.fmt(kit.first(causal, "device_ms"), 3)
        out[f"{prefix}{pname}CausalVsFlash"] = kit.fmt(kit.first(causal, "speedup_vs_flash"), 2)
        out[f"{prefix}{pname}CausalVsCudnn"] = kit.fmt(kit.first(causal, "speedup_vs_cudnn"), 2)
        for other, oname in (("sdpa_flash", "Flash"), ("sdpa_cudnn", "Cudnn")):
            vs_dense[pas, other] = kit.ratio(reps(pas, impl=other, mask="causal"), kit.first(causal, kit.DEVICE_REPS))
            out[f"{prefix}{pname}CausalVs{oname}Ci"] = kit.interval(vs_dense[pas, other])
        out[f"{prefix}{pname}CausalTflops"] = kit.fmt(kit.first(causal, "tflops_elements"), 0)
    # the >= 80 % of ideal target, sliding windows and document packing at N >= 8K
    rows = d[(d["impl"] == impl) & (d["score_mod"] == "none") & (d["seqlen"] >= 8191)]
    rows = rows.assign(causal_reps=_ok_base(d, d["mask"] == "causal", SHAPE + ["impl", "score_mod"], kit.DEVICE_REPS))
    fwd_pcts: list[kit.Ratio] = []
    for fam, fname in (("window", "Window"), ("document", "Document")):
        for pas, pname in PASS_NAMES.items():
            cases = rows[(rows["mask"] == fam) & (rows["pass"] == pas)].dropna(subset=["pct_of_ideal"])
            pct = cases["pct_of_ideal"]
            out[f"{prefix}{fname}{pname}PctIdealMin"] = kit.fmt(pct.min() if len(pct) else np.nan, 0)
            out[f"{prefix}{fname}{pname}PctIdealMedian"] = kit.fmt(pct.median() if len(pct) else np.nan, 1)
            # the median's interval: the speedups over causal as fractions of their ideal, resampled
            fraction = kit.median_ratio(zip(cases["causal_reps"], cases[kit.DEVICE_REPS], 1.0 / cases["ideal_ratio"]))
            out[f"{prefix}{fname}{pname}PctIdealMedianCi"] = kit.interval(fraction, 1, scale=100.0)
            out[f"{prefix}{fname}{pname}TargetMet"] = (f"{int((pct >= 80).sum())} of {len(pct)}" if len(pct)
                                                       else style.MISSING)
            if pas == "fwd":  # each case's share of its ideal, with its interval
                fwd_pcts.extend(kit.with_intervals(pct.tolist(), [
                    kit.ratio(c, r, 100.0 / ideal)
                    for c, r, ideal in zip(cases["causal_reps"], cases[kit.DEVICE_REPS], cases["ideal_ratio"])]))
    # verdict on "speed follows sparsity": forward cases of both families at >= 80 % of the ideal
    out[f"{prefix}SparsityVerdict"] = kit.claim_verdict(fwd_pcts, 80.0)
    fwd = _where(base, impl=impl, mask="causal", score_mod="none", **{"pass": "fwd"})
    out[f"{prefix}PrefillVerdict"] = kit.claim_verdict(kit.with_intervals(
        [kit.first(fwd, "speedup_vs_flash"), kit.first(fwd, "speedup_vs_cudnn")],
        [vs_dense["fwd", other] for other in ("sdpa_flash", "sdpa_cudnn")]), 2.0, 4.0)
    w = _where(base, impl=impl, mask="window", window=1024, score_mod="none", **{"pass": "fwd"})
    out[f"{prefix}FwdWindowThousandSpeedup"] = kit.fmt(kit.first(w, "speedup_vs_causal"), 2)
    out[f"{prefix}FwdWindowThousandSpeedupCi"] = kit.interval(
        kit.ratio(reps("fwd", impl=impl, mask="causal"), kit.first(w, kit.DEVICE_REPS)))
    mine = d[d["impl"] == impl]
    # the cases that compiled in the timed job (one process, in sweep order), and their cold compile
    # seconds: in the compile-ahead child where one prepared the case (a fresh process each)
    reused = _num(mine, "recompiles")
    cold = _num(mine, "ahead_compile_s").fillna(_num(mine, "compile_s"))[reused > 0]
    out[f"{prefix}CompileSecondsMedian"] = kit.fmt(cold.median() if len(cold) else np.nan, 1)
    out[f"{prefix}CasesWithoutRecompile"] = f"{int((reused == 0).sum())} of {int(reused.notna().sum())}" \
        if reused.notna().any() else style.MISSING
    # why the sparse masks fall short: tile cost against tiles per query-block row and fill
    sparse = _sparse(d, impl)
    for pas, pname in PASS_NAMES.items():
        p = sparse[sparse["pass"] == pas]
        k, r2 = row_cost_fit(p)
        out[f"{prefix}{pname}RowCostTiles"] = kit.fmt(k, 1)
        out[f"{prefix}{pname}RowCostRsq"] = kit.fmt(r2, 3)
        out[f"{prefix}{pname}TileCostRankCorrRows"] = kit.fmt(_rank_corr(p["tile_cost"], p["tiles_per_row"]), 2)
        out[f"{prefix}{pname}TileCostRankCorrFill"] = kit.fmt(_rank_corr(p["tile_cost"], p["tile_fill"]), 2)
        per_row = p["tiles_per_row"]
        residual = p["tile_cost"] - _row_model(k, per_row, per_row * p["ideal_ratio"])
        for sel, sname in (("window", "Window"), ("uniform", "DocUniform"), ("heavy", "DocHeavy")):
            r = residual[(p["mask"] == sel) | ((p["mask"] == "document") & (p["doc_dist"] == sel))].dropna()
            out[f"{prefix}{pname}FitResidual{sname}"] = kit.fmt(r.mean() if len(r) else np.nan, 2)
        for fam, fname in (("window", "Window"), ("document", "Document")):
            f = p[p["mask"] == fam].dropna(subset=["tile_cost"])
            worst = f.loc[[f["tile_cost"].idxmax()]] if len(f) else f
            out[f"{prefix}{fname}{pname}WorstTileCost"] = kit.fmt(kit.first(worst, "tile_cost"), 2)
            out[f"{prefix}{fname}{pname}WorstTilesPerRow"] = kit.fmt(kit.first(worst, "tiles_per_row"), 1)
            out[f"{prefix}{fname}{pname}WorstFillPct"] = kit.fmt(100 * kit.first(worst, "tile_fill"), 0)
            per_row = kit.first(worst, "tiles_per_row")
            fit = _row_model(k, per_row, per_row * kit.first(worst, "ideal_ratio"))
            out[f"{prefix}{fname}{pname}WorstTileCostFit"] = kit.fmt(fit, 2)
    return out


def _refused_case(row) -> str:
    """A refused row's configuration in words: its mask family, with its score modification."""
    mask = MASK_LABEL.get(row["mask"], str(row["mask"]))
    mod = row["score_mod"]
    return mask if mod == "none" else f"{mask} with {SCORE_MOD_LABEL.get(mod, mod)}"


def _message(error, impl: str) -> str:
    """A refusal's message as the backend wrote it: the row's ``error`` without the harness's
    ``Unsupported:`` and the implementation's name in front, at most :data:`MESSAGE_CHARS`."""
    text = str(error).strip()
    for head in ("Unsupported:", f"{impl}:"):
        text = text[len(head):].strip() if text.startswith(head) else text
    return kit.clip(text, MESSAGE_CHARS)


def refusal_macros(df: pd.DataFrame, impl: str, prefix: str) -> dict[str, str]:
    """What ``impl`` refused on the main GPU (rows with status ``unsupported``), in three macros:
    ``<prefix>UnsupportedRows`` ("26 of 60": its refused rows of all its rows),
    ``<prefix>UnsupportedCases`` (each refused configuration, :func:`_refused_case`, with its number
    of rows, most first) and ``<prefix>UnsupportedErrors`` (each distinct message, :func:`_message`,
    with its number of rows, most first; escaped for LaTeX). "none" for the last two when it refused
    nothing; n/a for all three without rows of ``impl``. ``<prefix>UnsupportedText``: the paper's
    sentence on them ("It refused none of its 60 cases." or the cases and messages)."""
    d = _main_gpu(df)
    mine = d[d["impl"] == impl]
    if mine.empty:
        return {f"{prefix}Unsupported{name}": style.MISSING for name in ("Rows", "Cases", "Errors", "Text")}
    refused = mine[mine["status"] == "unsupported"]

    def counted(values: pd.Series) -> str:
        counts = values.value_counts(sort=False).sort_values(ascending=False, kind="stable")
        return "; ".join(f"{v} ({n} {'row' if n == 1 else 'rows'})" for v, n in counts.items()) or "none"

    cases = refused.apply(_refused_case, axis=1) if not refused.empty else pd.Series(dtype=str)
    errors = refused["error"].map(lambda e: _message(e, impl))
    out = {f"{prefix}UnsupportedRows": f"{len(refused)} of {len(mine)}",
           f"{prefix}UnsupportedCases": kit.escape_latex(counted(cases)),
           f"{prefix}UnsupportedErrors": kit.escape_latex(counted(errors))}
    out[f"{prefix}UnsupportedText"] = (
        f"It refused none of its {len(mine)} cases." if refused.empty else
        f"It refused {len(refused)} of its {len(mine)} cases ({out[f'{prefix}UnsupportedCases']}), each recorded "
        f"as unsupported with the backend's message ({out[f'{prefix}UnsupportedErrors']}).")
    return out


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text (``Flex...`` macros); "n/a" where not measured. Each backend of
    :data:`BACKENDS` gets :func:`backend_macros`; the FLASH backend also :func:`refusal_macros`, and
    ``FlexFlashTimed`` ("true" when it has a timed row, else "false": the paper's switch
    ``\\ifFlexFlashTimed`` leaves its numbers out of the text without one)."""
    d = _ok(_main_gpu(df))
    out: dict[str, str] = {"FlexFlashTimed": "true" if (d["impl"] == "flex_flash").any() else "false"}
    for impl, prefix in BACKENDS.items():
        out.update(backend_macros(d, impl, prefix))
    out.update(refusal_macros(df, "flex_flash", BACKENDS["flex_flash"]))
    base = _at_reference(d)
    for mod, mname in (("alibi", "Alibi"), ("softcap", "Softcap"), ("softcap_sigmoid", "SoftcapSigmoid"),
                       ("alibi_softcap", "AlibiSoftcap")):
        for (impl, prefix), (pas, pname) in itertools.product(BACKENDS.items(), PASS_NAMES.items()):
            r = _where(base, impl=impl, mask="causal", score_mod=mod, **{"pass": pas})
            out[f"{prefix}{pname}{mname}Slowdown"] = kit.fmt(kit.first(r, "slowdown_vs_plain"), 2)
    # memory: largest seqlen each materialised baseline ran, and its memory over flex's there
    causal = _where(d, mask="causal", score_mod="none", **{"pass": "fwd"})
    for impl, iname in (("naive", "Naive"), ("sdpa_masked", "SdpaMasked")):
        r = causal[causal["impl"] == impl]
        out[f"Flex{iname}MaxSeqlen"] = str(int(r["seqlen"].max())) if not r.empty else "n/a"
        both = r.merge(causal[causal["impl"] == "flex"], on=SHAPE, suffixes=("", "_flex")).sort_values("seqlen")
        ratio = np.nan
        if not both.empty:
            ratio = (_num(both, "peak_mem_bytes") / _num(both, "peak_mem_bytes_flex")).iloc[-1]
        out[f"Flex{iname}MemOverFlex"] = kit.fmt(ratio, 1)
    out.update(memory_slopes(d))
    return out


#: The implementations whose memory slope the memory claim judges, by their macros' name part:
#: the two that materialise the N x N scores or mask, and flex.
MEMORY_SLOPED = {"naive": "Naive", "sdpa_masked": "SdpaMasked", "flex": "Flex"}


def memory_fits(d: pd.DataFrame) -> dict:
    """Each of :data:`MEMORY_SLOPED`'s log-log slope of peak memory per sequence (peak over batch)
    against N, in the causal forward of the sequence-length series (a constant batch x N), with its
    95 % interval (:class:`kernels.longctx.scaling.Slope`, :func:`~kernels.longctx.scaling.fit_slope`),
    by implementation."""
    from kernels.longctx.scaling import fit_slope

    rows = _where(_seqlen_series(d), mask="causal", score_mod="none", **{"pass": "fwd"})
    return {impl: fit_slope(rows.loc[rows["impl"] == impl, "seqlen"],
                            (_num(rows, "peak_mem_bytes") / _num(rows, "batch"))[rows["impl"] == impl])
            for impl in MEMORY_SLOPED}


def memory_slopes(d: pd.DataFrame) -> dict[str, str]:
    """O(N²) against O(N) memory: the log-log slope of each implementation's peak memory per
    sequence against N (:func:`memory_fits`), with its 95 % interval:
    ``Flex<Impl>MemSlope``, ``...Low``, ``...High`` of naive attention (``Naive``), materialised-mask
    SDPA (``SdpaMasked``) and flex (``Flex``); an attention whose memory holds the N x N scores or mask has slope 2, one that holds only
    the inputs, the output and their statistics slope 1. ``FlexMemoryVerdict``:
    :func:`kernels.paper.report_kit.scaling_verdict`, flex's slope against 1 and the two
    materialised baselines' against 2."""
    out, fitted = {}, memory_fits(d)
    for impl, iname in MEMORY_SLOPED.items():
        s = fitted[impl]
        for end, value in (("", s.p), ("Low", s.low), ("High", s.high)):
            out[f"Flex{iname}MemSlope{end}"] = kit.fmt(value, 2)
    out["FlexMemoryVerdict"] = kit.scaling_verdict(
        [(fitted["flex"].low, fitted["flex"].high)] if fitted["flex"].n else [],
        [(s.low, s.high) for impl, s in fitted.items() if impl != "flex" and s.n])
    return out
