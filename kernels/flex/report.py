"""Figures and tables of the FlexAttention study, built on kernels.paper.report_kit: the tidy table
and its derived metrics are :mod:`kernels.flex.tidy`'s, the quoted numbers and the claims' verdicts
:mod:`kernels.flex.numbers`', which this module gives the workflow with its figures and tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.lines import Line2D

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.flex.impls import IMPLS
from kernels.flex.numbers import CLAIM_IMPLS, CLAIM_NAMES, CLAIMS, EVIDENCE, HEADLINES, macros, memory_fits
from kernels.flex.tidy import (BACKENDS, MASK_KNOBS, MASK_LABEL, SCORE_MOD_LABEL, SHAPE, _base, _main_gpu, _num,
                               _ok, _ok_base, _reference, _row_model, _seqlen_series, _sparse, derive, row_cost_fit)

#: What the workflow reads of a study's report (kernels.paper.render.report_module): its figures and
#: tables, :func:`~kernels.flex.tidy.derive`, and the quoted numbers and claims of :mod:`kernels.flex.numbers`.
__all__ = ["FIGURES", "TABLES", "PAPER_TABLES", "derive", "macros", "CLAIMS", "CLAIM_NAMES", "CLAIM_IMPLS", "EVIDENCE",
           "HEADLINES"]

#: The implementations in the order of legends and tables (their registry's).
ORDER = tuple(IMPLS)
FAMILY_COLORS = dict(zip(MASK_LABEL, ["#000000", "#4C72B0", "#DD8452", "#8172B3", "#55A868"]))
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
