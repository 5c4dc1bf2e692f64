"""Figures, tables and quoted numbers of the FlexAttention study (no torch).

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
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import ticker

from kernels import style

SHAPE = ["gpu", "dtype", "pass", "batch", "heads", "kv_heads", "seqlen", "head_dim"]
MASK_KNOBS = ["mask", "window", "documents", "doc_dist", "prefix"]
DENSE = ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient"]
MASK_LABEL = {"causal": "causal", "window": "sliding window", "document": "document packing",
              "document_window": "documents + window", "prefix": "prefix-LM"}
#: The BRIEF's reference shape: B4 H16 N8192 D128 bf16.
BASE = dict(batch=4, heads=16, kv_heads=16, seqlen=8192, head_dim=128, dtype="bfloat16")


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(np.nan, index=df.index)


def _lookup(df: pd.DataFrame, sel: pd.Series, keys: list[str], col: str = "median_ms") -> pd.Series:
    """For every row of ``df``, ``col`` of the ok row selected by ``sel`` with equal ``keys`` (NaN if none)."""
    ref = df.loc[sel & (df["status"] == "ok"), keys + [col]].drop_duplicates(keys)
    merged = df[keys].merge(ref, on=keys, how="left")
    return pd.Series(merged[col].to_numpy(), index=df.index)


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add the study's metrics (module docstring) to the tidy table."""
    df = df.copy()
    if df.empty:
        return df
    for col in ("flops_blocks", "median_ms", "density_blocks", "flops"):
        df[col] = _num(df, col)
    seconds = df["median_ms"] / 1e3
    df["tflops_elements"] = df["flops"] / seconds / 1e12
    df["tflops_blocks"] = df["flops_blocks"] / seconds / 1e12
    causal = (df["mask"] == "causal") & (df["score_mod"] == "none")
    for impl, name in (("sdpa_flash", "flash"), ("sdpa_cudnn", "cudnn")):
        df[f"speedup_vs_{name}"] = _lookup(df, causal & (df["impl"] == impl), SHAPE) / df["median_ms"]
    keys = SHAPE + ["impl", "score_mod"]
    df["speedup_vs_causal"] = _lookup(df, df["mask"] == "causal", keys) / df["median_ms"]
    causal_blocks = _lookup(df, df["mask"] == "causal", ["seqlen"], "density_blocks")
    df["ideal_ratio"] = causal_blocks / df["density_blocks"]
    df["pct_of_ideal"] = 100.0 * df["speedup_vs_causal"] / df["ideal_ratio"]
    df["slowdown_vs_plain"] = df["median_ms"] / _lookup(df, df["score_mod"] == "none",
                                                        SHAPE + ["impl"] + MASK_KNOBS)
    return df


# ----------------------------------------------------------------------------
# selections


def _main_gpu(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of one GPU: the non-CPU GPU with most ok rows, else the CPU."""
    if df.empty or "gpu" not in df:
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
    return df[(df["status"] == "ok") & df["median_ms"].notna()] if not df.empty else df


def _base(df: pd.DataFrame) -> pd.DataFrame:
    """The main GPU's rows at the BRIEF's shape (B4 H16 N8192 D128 bf16), or all of them if it was not measured."""
    d = _main_gpu(df)
    b = _where(d, **BASE)
    return b if not b.empty else d


def _plain_log(ax, axis: str = "both") -> None:
    """Plain numbers (0.2, 1, 4) on log axes instead of powers of ten."""
    fmt = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for a in ([ax.xaxis, ax.yaxis] if axis == "both" else [getattr(ax, f"{axis}axis")]):
        a.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.set_major_formatter(fmt)
        a.set_minor_formatter(ticker.NullFormatter())


def _seqlen_ticks(ax, seqlens) -> None:
    """Sequence lengths as 2K, 8K, 32K ticks on a log2 x axis."""
    ax.set_xscale("log", base=2)
    ticks = sorted({int(n) for n in seqlens})
    if ticks:
        ax.set_xticks(ticks, [f"{n / 1024:g}K" if n >= 1024 else str(n) for n in ticks])
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def _empty(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)


# ----------------------------------------------------------------------------
# figures


def fig_speedup_density(df: pd.DataFrame):
    """FlexAttention speedup over flex causal against the tiles it computes (as a fraction of causal's
    tiles), per mask family, forward and forward+backward, seqlen >= 8K; the line is the ideal
    (time proportional to tiles)."""
    d = _ok(_main_gpu(df))
    d = d[(d["impl"] == "flex") & (d["score_mod"] == "none") & (d["seqlen"] >= 8191)] if not d.empty else d
    passes = [p for p in ("fwd", "fwdbwd", "bwd") if not d.empty and (d["pass"] == p).any()] or ["fwd"]
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.6, ncols=len(passes), squeeze=False)
    families = [m for m in MASK_LABEL if not d.empty and (d["mask"] == m).any()]
    colors = dict(zip(MASK_LABEL, ["#000000", "#4C72B0", "#DD8452", "#8172B3", "#55A868"]))
    for ax, pas in zip(axes[0], passes):
        p = d[d["pass"] == pas] if not d.empty else d
        if p.empty or p["ideal_ratio"].isna().all():
            _empty(ax)
            continue
        x = 1.0 / p["ideal_ratio"]
        grid = np.geomspace(max(x.min() * 0.8, 1e-3), 1.05, 50)
        ax.plot(grid, 1.0 / grid, color="0.5", lw=0.8, ls="--", label="ideal")
        ax.plot(grid, 0.8 / grid, color="0.7", lw=0.6, ls=":", label="80 % of ideal")
        for fam in families:
            f = p[p["mask"] == fam]
            for n, marker in zip(sorted(f["seqlen"].unique()), "osD^v"):
                g = f[f["seqlen"] == n]
                ax.scatter(1.0 / g["ideal_ratio"], g["speedup_vs_causal"], color=colors[fam], marker=marker, s=14,
                           label=f"{MASK_LABEL[fam]}, N={n}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(ax)
        ax.set_xlabel("tiles computed / causal's tiles")
        ax.set_ylabel("speedup over flex causal")
        ax.set_title(pas)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4)
    fig.tight_layout()
    return fig


def fig_tflops(df: pd.DataFrame):
    """Causal attention throughput against sequence length at 32K tokens per batch (H16 D128 bf16):
    FlexAttention against the dense SDPA backends and the materialised-mask baselines, TFLOP/s on the
    unmasked elements; forward and forward+backward."""
    d = _ok(_main_gpu(df))
    if not d.empty:
        d = d[(d["mask"] == "causal") & (d["score_mod"] == "none") & (d["heads"] == 16) & (d["kv_heads"] == 16)
              & (d["head_dim"] == 128) & (d["dtype"] == "bfloat16")]
        tokens = d["batch"] * d["seqlen"]
        d = d[tokens == tokens.max()] if not d.empty else d
    passes = ["fwd", "fwdbwd"]
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.4, ncols=2, squeeze=False)
    impls = sorted(d["impl"].unique()) if not d.empty else []
    colors = style.palette(impls)
    for ax, pas in zip(axes[0], passes):
        p = d[d["pass"] == pas] if not d.empty else d
        if p.empty:
            _empty(ax)
        for impl in impls:
            g = p[p["impl"] == impl].sort_values("seqlen")
            if not g.empty:
                ax.plot(g["seqlen"], g["tflops_elements"], marker="o", color=colors[impl], label=impl)
        _seqlen_ticks(ax, p["seqlen"] if not p.empty else [])
        ax.set_xlabel("sequence length (batch x seqlen constant)")
        ax.set_ylabel("TFLOP/s (unmasked elements)")
        ax.set_title(pas)
    if impls:
        axes[0][1].legend(loc="best", ncol=2)
    fig.tight_layout()
    return fig


def fig_memory(df: pd.DataFrame):
    """Peak device memory of causal attention against sequence length (32K tokens per batch): the
    materialised mask of SDPA and naive attention grows as N², FlexAttention's block mask as N;
    crosses mark out-of-memory runs."""
    d = _main_gpu(df)
    if not d.empty:
        d = d[(d["mask"] == "causal") & (d["score_mod"] == "none") & (d["heads"] == 16) & (d["kv_heads"] == 16)
              & (d["head_dim"] == 128) & (d["dtype"] == "bfloat16")]
        tokens = d["batch"] * d["seqlen"]
        d = d[tokens == tokens.max()] if not d.empty else d
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.4, ncols=2, squeeze=False)
    impls = sorted(d["impl"].unique()) if not d.empty else []
    colors = style.palette(impls)
    for ax, pas in zip(axes[0], ["fwd", "fwdbwd"]):
        p = d[d["pass"] == pas] if not d.empty else d
        if p.empty:
            _empty(ax)
            continue
        top = _num(p, "peak_mem_bytes").max() / 2**30
        for impl in impls:
            g = p[p["impl"] == impl].sort_values("seqlen")
            ok = g[(g["status"] == "ok") & _num(g, "peak_mem_bytes").notna()]
            if not ok.empty:
                ax.plot(ok["seqlen"], _num(ok, "peak_mem_bytes") / 2**30, marker="o", color=colors[impl], label=impl)
            oom = g[g["status"] == "oom"]
            if not oom.empty and np.isfinite(top):
                ax.scatter(oom["seqlen"], [top * 1.3] * len(oom), marker="x", color=colors[impl])
        _seqlen_ticks(ax, p["seqlen"])
        ax.set_yscale("log")
        _plain_log(ax, "y")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("peak memory (GiB)")
        ax.set_title(pas)
    if impls:
        axes[0][0].legend(loc="best", ncol=2)
    fig.tight_layout()
    return fig


def fig_score_mods(df: pd.DataFrame):
    """Cost of the score mods at the BRIEF's shape (B4 H16 N8192 D128 bf16, flex, causal): time over the
    same mask without a score_mod, for ALiBi alone, the soft-cap alone (through tanh, and the same
    function through a sigmoid) and the source's combination; forward and forward+backward."""
    d = _ok(_base(df))
    d = d[(d["impl"] == "flex") & (d["score_mod"] != "none")] if not d.empty else d
    fig, ax = style.figure(height=2.2)
    if d.empty:
        _empty(ax)
        return fig
    d = d.assign(label=d["mask"].map(MASK_LABEL).fillna(d["mask"]) + ", " + d["pass"])
    order = ["alibi", "softcap", "softcap_sigmoid", "alibi_softcap"]
    labels = sorted(d["label"].unique())
    width = 0.8 / max(1, len(labels))
    for i, lab in enumerate(labels):
        g = d[d["label"] == lab].set_index("score_mod").reindex(order)
        ax.bar(np.arange(len(order)) + i * width, g["slowdown_vs_plain"], width=width, label=lab)
    ax.axhline(1.0, color="0.4", lw=0.6)
    ax.set_xticks(np.arange(len(order)) + width * (len(labels) - 1) / 2,
                  ["ALiBi", "soft-cap\n(tanh)", "soft-cap\n(sigmoid)", "ALiBi +\nsoft-cap"])
    ax.set_ylabel("time / time without score_mod")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


FIGURES = {
    "flex_speedup_density": fig_speedup_density,
    "flex_tflops": fig_tflops,
    "flex_memory": fig_memory,
    "flex_score_mods": fig_score_mods,
}


# ----------------------------------------------------------------------------
# tables


def _knob_label(row) -> str:
    if row["mask"] == "window":
        return f"w={int(row['window'])}"
    if row["mask"] == "document":
        return f"{int(row['documents'])} {row['doc_dist']}"
    if row["mask"] == "document_window":
        return f"{int(row['documents'])} {row['doc_dist']}, w={int(row['window'])}"
    if row["mask"] == "prefix":
        return f"p={int(row['prefix'])}"
    return ""


def table_summary(df: pd.DataFrame) -> pd.DataFrame:
    """FlexAttention per mask family at seqlen >= 8K (flex, no score_mod): tiles computed, time, speedup
    over flex causal against the ideal ratio of tiles, TFLOP/s on unmasked elements and on computed
    tiles, and speedup over dense causal FlashAttention-2 and cuDNN at the same shape."""
    d = _ok(_main_gpu(df))
    cols = ["pass", "N", "mask", "setting", "tiles %", "ms", "vs causal", "ideal", "% ideal",
            "TFLOP/s elem.", "TFLOP/s tiles", "vs FA2", "vs cuDNN"]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d = d[(d["impl"] == "flex") & (d["score_mod"] == "none") & (d["seqlen"] >= 8191) & (d["heads"] == 16)
          & (d["kv_heads"] == 16) & (d["head_dim"] == 128) & (d["dtype"] == "bfloat16")]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d = d.sort_values(["pass", "seqlen", "mask", "density_blocks"])
    out = pd.DataFrame({
        "pass": d["pass"], "N": d["seqlen"].astype(int), "mask": d["mask"].map(MASK_LABEL),
        "setting": d.apply(_knob_label, axis=1), "tiles %": (100 * d["density_blocks"]).round(1),
        "ms": d["median_ms"].round(3), "vs causal": d["speedup_vs_causal"].round(2),
        "ideal": d["ideal_ratio"].round(2), "% ideal": d["pct_of_ideal"].round(0),
        "TFLOP/s elem.": d["tflops_elements"].round(0), "TFLOP/s tiles": d["tflops_blocks"].round(0),
        "vs FA2": d["speedup_vs_flash"].round(2), "vs cuDNN": d["speedup_vs_cudnn"].round(2)})
    return out.reset_index(drop=True)


def table_dense(df: pd.DataFrame) -> pd.DataFrame:
    """Causal attention time (ms) per implementation and shape (bf16 unless stated): FlexAttention
    (default and max-autotune) against SDPA's FlashAttention-2, cuDNN and memory-efficient backends and
    the materialised-mask baselines; oom: out of memory, n/s: not supported."""
    d = _main_gpu(df)
    if d.empty:
        return pd.DataFrame(columns=["pass", "shape"])
    d = d[(d["mask"] == "causal") & (d["score_mod"] == "none")]
    if d.empty:
        return pd.DataFrame(columns=["pass", "shape"])
    d = d.assign(cell=np.where(d["status"] == "ok", d["median_ms"].round(3).map("{:.3f}".format),
                               d["status"].map({"unsupported": "n/s"}).fillna(d["status"])))
    shape = ("B" + d["batch"].astype(int).astype(str) + " H" + d["heads"].astype(int).astype(str) + "/"
             + d["kv_heads"].astype(int).astype(str) + " N" + d["seqlen"].astype(int).astype(str) + " D"
             + d["head_dim"].astype(int).astype(str) + np.where(d["dtype"] == "bfloat16", "", " " + d["dtype"]))
    t = d.assign(shape=shape).pivot_table(index=["pass", "seqlen", "shape"], columns="impl", values="cell",
                                          aggfunc="first")
    t = t.reset_index().drop(columns="seqlen").fillna("")
    order = [c for c in ["flex", "flex_autotune", *DENSE, "sdpa_masked", "naive"] if c in t]
    t = t[["pass", "shape", *order]]
    t.columns.name = None
    return t


def table_score_mods(df: pd.DataFrame) -> pd.DataFrame:
    """Score-mod cost at B4 H16 N8192 D128 bf16 (flex): time, time over the same mask without a
    score_mod, and the added time per unmasked score in picoseconds (whole GPU) for ALiBi, the soft-cap
    (through tanh and through a sigmoid) and the source's combination."""
    d = _ok(_base(df))
    cols = ["pass", "mask", "score_mod", "ms", "slowdown", "added ps / score"]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d = d[(d["impl"] == "flex") & d["mask"].isin(["causal", "window"])]
    plain = _lookup(d, d["score_mod"] == "none", SHAPE + ["impl"] + MASK_KNOBS)
    elements = d["batch"] * d["heads"] * d["seqlen"].astype(float) ** 2 * d["density_elements"]
    added = (d["median_ms"] - plain) * 1e9 / elements
    keep = plain.notna() & (d["score_mod"] != "none")
    d, added = d[keep], added[keep]
    out = pd.DataFrame({"pass": d["pass"], "mask": d["mask"].map(MASK_LABEL) + d.apply(
        lambda r: f" w={int(r['window'])}" if r["mask"] == "window" else "", axis=1),
        "score_mod": d["score_mod"], "ms": d["median_ms"].round(3),
        "slowdown": d["slowdown_vs_plain"].round(2), "added ps / score": added.round(3)})
    return out.sort_values(["pass", "mask", "score_mod"]).reset_index(drop=True)


TABLES = {
    "flex_summary": table_summary,
    "flex_dense": table_dense,
    "flex_score_mods": table_score_mods,
}


# ----------------------------------------------------------------------------
# macros


def _fmt(value, digits: int = 2) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if not np.isfinite(v) else f"{v:.{digits}f}"


def _one(d: pd.DataFrame, col: str):
    return d[col].iloc[0] if not d.empty and col in d else np.nan


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text (``Flex...`` macros); "n/a" where not measured."""
    out: dict[str, str] = {}
    d = _ok(_main_gpu(df)) if not df.empty else df
    base = _where(d, **BASE) if not d.empty else d
    names = {"fwd": "Fwd", "fwdbwd": "Fwdbwd"}
    for pas, pname in names.items():
        causal = _where(base, impl="flex", mask="causal", score_mod="none", **{"pass": pas})
        out[f"Flex{pname}CausalMs"] = _fmt(_one(causal, "median_ms"), 3)
        out[f"Flex{pname}CausalVsFlash"] = _fmt(_one(causal, "speedup_vs_flash"))
        out[f"Flex{pname}CausalVsCudnn"] = _fmt(_one(causal, "speedup_vs_cudnn"))
        out[f"Flex{pname}CausalTflops"] = _fmt(_one(causal, "tflops_elements"), 0)
    # the >= 80 % of ideal target, sliding windows and document packing at N >= 8K, flex forward
    flex = d[(d["impl"] == "flex") & (d["score_mod"] == "none") & (d["seqlen"] >= 8191)] if not d.empty else d
    for fam, fname in (("window", "Window"), ("document", "Document")):
        for pas, pname in names.items():
            f = flex[(flex["mask"] == fam) & (flex["pass"] == pas)] if not flex.empty else flex
            pct = f["pct_of_ideal"].dropna() if not f.empty else pd.Series(dtype=float)
            out[f"Flex{fname}{pname}PctIdealMin"] = _fmt(pct.min() if len(pct) else np.nan, 0)
            out[f"Flex{fname}{pname}PctIdealMedian"] = _fmt(pct.median() if len(pct) else np.nan, 0)
            out[f"Flex{fname}{pname}TargetMet"] = (f"{int((pct >= 80).sum())} of {len(pct)}" if len(pct) else "n/a")
    for mod, mname in (("alibi", "Alibi"), ("softcap", "Softcap"), ("softcap_sigmoid", "SoftcapSigmoid"),
                       ("alibi_softcap", "AlibiSoftcap")):
        for pas, pname in names.items():
            r = _where(base, impl="flex", mask="causal", score_mod=mod, **{"pass": pas})
            out[f"Flex{pname}{mname}Slowdown"] = _fmt(_one(r, "slowdown_vs_plain"))
    w = _where(base, impl="flex", mask="window", window=1024, score_mod="none", **{"pass": "fwd"})
    out["FlexFwdWindowThousandSpeedup"] = _fmt(_one(w, "speedup_vs_causal"))
    # memory: largest seqlen each materialised baseline ran, and its memory over flex's there
    causal = _where(d, mask="causal", score_mod="none", **{"pass": "fwd"}) if not d.empty else d
    for impl, iname in (("naive", "Naive"), ("sdpa_masked", "SdpaMasked")):
        r = causal[causal["impl"] == impl] if not causal.empty else causal
        out[f"Flex{iname}MaxSeqlen"] = str(int(r["seqlen"].max())) if not r.empty else "n/a"
        both = r.merge(causal[causal["impl"] == "flex"], on=SHAPE, suffixes=("", "_flex")) if not r.empty else r
        both = both.sort_values("seqlen") if not both.empty else both
        ratio = np.nan
        if not both.empty:
            ratio = (_num(both, "peak_mem_bytes") / _num(both, "peak_mem_bytes_flex")).iloc[-1]
        out[f"Flex{iname}MemOverFlex"] = _fmt(ratio, 1)
    flexrows = d[d["impl"] == "flex"] if not d.empty else d
    comp = _num(flexrows, "compile_s")[_num(flexrows, "recompiles") > 0] if not flexrows.empty else pd.Series()
    out["FlexCompileSecondsMedian"] = _fmt(comp.median() if len(comp) else np.nan, 1)
    reused = _num(flexrows, "recompiles") if not flexrows.empty else pd.Series(dtype=float)
    out["FlexCasesWithoutRecompile"] = f"{int((reused == 0).sum())} of {int(reused.notna().sum())}" \
        if reused.notna().any() else "n/a"
    return out
