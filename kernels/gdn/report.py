"""Figures, tables and quoted numbers of the GDN study, forward and training step (no torch).

Derived metrics (per row of the tidy table, compared within the same pass
and shape): ``tflops`` from the chunked FLOP counts of :mod:`kernels.gdn.flops`
(same count for every impl), ``speedup_vs_naive`` (naive's median / this
median; only where naive was measured), ``speedup_vs_fla`` (fla_chunk / this),
``ratio_to_flash_qla`` (this / flash_qla, > 1 means slower than FlashQLA) and
``peak_mem_gib`` (peak memory allocated while the timed call runs once,
``peak_mem_timed_bytes``, else the harness's ``peak_mem_bytes``).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from kernels import render, style

SHAPE = ["gpu", "pass", "dtype", "batch", "seqlen", "heads", "value_heads", "head_dim", "num_seqs", "varlen"]
MAIN = [(4, 8192, 16), (1, 32768, 32), (8, 4096, 16)]
BWD_MAIN = [(4, 8192, 16), (1, 32768, 32), (1, 8192, 16)]
ORDER = ["naive", "recurrent", "chunk", "fla_chunk", "fla_recurrent", "flash_qla"]


def _shape_cols(df):
    return [c for c in SHAPE if c in df.columns]


def _baseline(df: pd.DataFrame, impl: str) -> pd.Series:
    """Median of ``impl`` at each row's shape (NaN where it has none)."""
    cols = _shape_cols(df)
    base = df[df["impl"] == impl][cols + ["device_ms"]].rename(columns={"device_ms": "_base"})
    base = base.dropna(subset=["_base"]).drop_duplicates(subset=cols)
    merged = df[cols].merge(base, on=cols, how="left")
    return pd.Series(merged["_base"].to_numpy(), index=df.index)


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``speedup_vs_naive``, ``speedup_vs_fla``, ``ratio_to_flash_qla`` (and ``tflops`` if missing)."""
    df = df.copy()
    if "tflops" not in df.columns:
        df["tflops"] = df["flops"] / (df["device_ms"] * 1e-3) / 1e12
    df["speedup_vs_naive"] = _baseline(df, "naive") / df["device_ms"]
    df["speedup_vs_fla"] = _baseline(df, "fla_chunk") / df["device_ms"]
    df["ratio_to_flash_qla"] = df["device_ms"] / _baseline(df, "flash_qla")
    peak = df["peak_mem_timed_bytes"] if "peak_mem_timed_bytes" in df.columns else pd.Series(np.nan, index=df.index)
    if "peak_mem_bytes" in df.columns:
        peak = peak.fillna(df["peak_mem_bytes"])
    df["peak_mem_gib"] = pd.to_numeric(peak, errors="coerce") / 2**30
    return df


def _pass(df, pas):
    """Rows of one pass (rows without a ``pass`` column count as forward), without the
    grouped-value-attention rows (``value_heads`` set: FlashQLA's published configurations),
    whose (batch, seqlen, heads) the figures and tables here would confuse with other rows'."""
    if "value_heads" in df.columns:
        df = df[df["value_heads"].isna()]
    if "pass" not in df.columns:
        return df if pas == "fwd" else df.iloc[0:0]
    return df[df["pass"] == pas]


def _impls(df):
    present = list(dict.fromkeys(df["impl"]))
    return [i for i in ORDER if i in present] + [i for i in present if i not in ORDER]


def _sweep_rows(df):
    """Fixed-length rows of the seqlen sweep: the (batch, heads) with the most seqlens."""
    d = df[(df["varlen"] != True) & df["device_ms"].notna()]  # noqa: E712
    if d.empty:
        return d
    counts = d.groupby(["batch", "heads"])["seqlen"].nunique()
    b, h = counts.idxmax()
    return d[(d["batch"] == b) & (d["heads"] == h)]


def _label(impl: str) -> str:
    return style.label("gdn", impl)


def _time_vs_seqlen(df: pd.DataFrame, pas: str, what: str):
    from matplotlib import ticker

    fig, ax = style.figure(height=2.6)
    d = _sweep_rows(_pass(df, pas))
    pal = style.palette(_impls(df))
    for impl in _impls(d) if not d.empty else []:
        s = d[d["impl"] == impl].sort_values("seqlen")
        ax.plot(s["seqlen"], s["device_ms"], marker="o", label=_label(impl), color=pal[impl],
                linestyle="-" if len(s) >= 3 else "none")
    if not d.empty:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted(d["seqlen"].unique())
        ax.set_xticks(ticks, [str(int(t)) for t in ticks], fontsize=6)
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(f"{what}, " + style.shape(B=d["batch"].iloc[0], H=d["heads"].iloc[0], D=d["head_dim"].iloc[0]))
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("median device time (ms)")
    fig.tight_layout()
    style.legend_below(fig, [ax], ncol=3)
    return fig


def fig_time_vs_seqlen(df: pd.DataFrame):
    """Gated DeltaNet forward: median device time against sequence length per implementation
    (log-log); an implementation measured at fewer than three lengths is not joined by a line."""
    return _time_vs_seqlen(df, "fwd", "forward")


def fig_fwdbwd_time_vs_seqlen(df: pd.DataFrame):
    """Gated DeltaNet training step (forward + backward timed as one call): median device time
    against sequence length per implementation (log-log); at batch 1 and short sequences our
    step's device time holds host time (the text says why)."""
    return _time_vs_seqlen(df, "fwdbwd", "forward + backward")


def _main_rows(df, main=MAIN):
    d = df[(df["varlen"] != True) & df["device_ms"].notna()]  # noqa: E712
    keys = set(main)
    mask = np.array([(b, t, h) in keys for b, t, h in zip(d["batch"], d["seqlen"], d["heads"])], dtype=bool)
    return d[mask]


def _shape_label(d):
    return [style.shape(B=b, T=t) + "\n" + style.shape(H=h) for b, t, h in zip(d["batch"], d["seqlen"], d["heads"])]


def _fla_band(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``speedup_low`` and ``speedup_high``: FLA's 10th percentile over this row's 90th and
    FLA's 90th over this row's 10th (the spread of ``speedup_vs_fla``; NaN without quantiles)."""
    if not {"q10_ms", "q90_ms"} <= set(df.columns):
        return df.assign(speedup_low=np.nan, speedup_high=np.nan)
    cols = _shape_cols(df)
    fla = df[df["impl"] == "fla_chunk"][cols + ["q10_ms", "q90_ms"]].drop_duplicates(subset=cols)
    merged = df[cols].merge(fla.rename(columns={"q10_ms": "_f10", "q90_ms": "_f90"}), on=cols, how="left")
    return df.assign(speedup_low=merged["_f10"].to_numpy() / df["q90_ms"].to_numpy(),
                     speedup_high=merged["_f90"].to_numpy() / df["q10_ms"].to_numpy())


def _bars(ax, d, col, log=False):
    """Grouped bars of ``col`` per shape (x) and impl (colour) from rows carrying ``shape``; on a
    log axis (``log``) when the values span orders of magnitude. Speedups over FLA carry error bars
    from the quantiles (:func:`_fla_band`)."""
    impls = _impls(d)
    shapes = list(dict.fromkeys(d["shape"]))
    pal = style.palette(impls)
    width = 0.8 / max(len(impls), 1)
    for j, impl in enumerate(impls):
        rows = d[d["impl"] == impl].set_index("shape")
        rows = rows[~rows.index.duplicated()].reindex(shapes)
        s = rows[col]
        yerr = None
        if col == "speedup_vs_fla" and {"speedup_low", "speedup_high"} <= set(rows.columns):
            yerr = np.vstack([(s - rows["speedup_low"]).clip(lower=0), (rows["speedup_high"] - s).clip(lower=0)])
            yerr = None if np.isnan(yerr).all() else np.nan_to_num(yerr)
        ax.bar(np.arange(len(shapes)) + j * width, s.to_numpy(), width, label=_label(impl), color=pal[impl],
               yerr=yerr, error_kw={"elinewidth": 0.6, "capsize": 1.5})
    ax.set_xticks(np.arange(len(shapes)) + 0.4 - width / 2, shapes, fontsize=6)
    values = pd.to_numeric(d[col], errors="coerce")
    if log and (values > 0).any():
        ax.set_yscale("log")
        ax.set_ylim(values[values > 0].min() / 2, values.max() * 2)
    elif np.isfinite(values.max()) and values.max() > 0:
        ax.set_ylim(0, values.max() * 1.1)


def fig_speedup_main(df: pd.DataFrame):
    """Gated DeltaNet forward at the main shapes: speedup over FLA's chunked kernels by device
    time, per implementation (1 is FLA; log axis, the token loop runs thousands of times slower)."""
    fig, ax = style.figure(height=2.4)
    d = _main_rows(_pass(df, "fwd")).dropna(subset=["speedup_vs_fla"])
    if not d.empty:
        _bars(ax, _fla_band(d).assign(shape=_shape_label(d)), "speedup_vs_fla", log=True)
        ax.axhline(1.0, color="black", lw=0.6)
    ax.set_ylabel("speedup over FLA (log)")
    ax.set_title("forward")
    fig.tight_layout()
    style.legend_below(fig, [ax], ncol=4)
    return fig


def fig_bwd_speedup_main(df: pd.DataFrame):
    """Gated DeltaNet backward (left) and training step (right, forward + backward as one call):
    speedup over FLA's chunked kernels by device time at the backward's main shapes, per
    implementation (1 is FLA); error bars from FLA's 10th percentile over this one's 90th to FLA's
    90th over this one's 10th."""
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.6, ncols=2, sharey=True)
    for ax, (pas, what) in zip(axes, (("bwd", "backward"), ("fwdbwd", "forward + backward"))):
        d = _main_rows(_pass(df, pas), BWD_MAIN).dropna(subset=["speedup_vs_fla"])
        if not d.empty:
            _bars(ax, _fla_band(d).assign(shape=_shape_label(d)), "speedup_vs_fla")
            ax.axhline(1.0, color="black", lw=0.6)
        ax.set_title(what)
    axes[0].set_ylabel("speedup over FLA")
    fig.tight_layout()
    style.legend_below(fig, axes, ncol=4)
    return fig


def fig_peak_memory(df: pd.DataFrame):
    """Gated DeltaNet training step: peak memory (GiB) of one forward + backward call at the
    backward's main shapes, per implementation."""
    fig, ax = style.figure(height=2.4)
    d = _main_rows(_pass(df, "fwdbwd"), BWD_MAIN)
    d = d.dropna(subset=["peak_mem_gib"]) if "peak_mem_gib" in d.columns else d.iloc[0:0]
    if not d.empty:
        _bars(ax, d.assign(shape=_shape_label(d)), "peak_mem_gib")
    ax.set_ylabel("peak memory (GiB)")
    ax.set_title("forward + backward")
    fig.tight_layout()
    style.legend_below(fig, [ax], ncol=4)
    return fig


FIGURES = {"gdn_time_vs_seqlen": fig_time_vs_seqlen, "gdn_speedup_main": fig_speedup_main,
           "gdn_fwdbwd_time_vs_seqlen": fig_fwdbwd_time_vs_seqlen, "gdn_bwd_speedup_main": fig_bwd_speedup_main,
           "gdn_peak_memory": fig_peak_memory}


def table_main(df: pd.DataFrame) -> pd.DataFrame:
    """Gated DeltaNet forward: median device time (ms) per implementation at the main shapes and on
    packed sequences of varying lengths (S: number of sequences, T: their total length); n/a: not
    measured (FlashQLA ran the main shapes, the token loop the shorter sequences)."""
    d = _pass(df, "fwd")
    d = d[d["device_ms"].notna()]
    keys = set(MAIN)
    d = d[[(b, t, h) in keys or bool(v) for b, t, h, v in zip(d["batch"], d["seqlen"], d["heads"], d["varlen"])]]
    if d.empty:
        return pd.DataFrame()
    label = [style.shape(S=n, T=t, H=h) if v else style.shape(B=b, T=t, H=h)
             for b, t, h, n, v in zip(d["batch"], d["seqlen"], d["heads"], d["num_seqs"], d["varlen"])]
    t = d.assign(shape=label).pivot_table(index="shape", columns="impl", values="device_ms", aggfunc="first")
    t = t[[i for i in _impls(d) if i in t.columns]].round(3)
    t.columns = [_label(i) for i in t.columns]
    t.index.name, t.columns.name = "shape", None
    return t


def table_bwd(df: pd.DataFrame) -> pd.DataFrame:
    """Gated DeltaNet backward and training step (forward + backward): median device time (ms) per
    implementation at the backward's main shapes, with the peak memory of our chunked kernels'
    training step (GiB)."""
    d = pd.concat([_main_rows(_pass(df, p), BWD_MAIN) for p in ("bwd", "fwdbwd")])
    if d.empty:
        return pd.DataFrame()
    d = d.assign(shape=[style.shape(B=b, T=t, H=h) for b, t, h in zip(d["batch"], d["seqlen"], d["heads"])],
                 passname=d["pass"].map(style.pass_label))
    t = d.pivot_table(index=["passname", "shape"], columns="impl", values="device_ms", aggfunc="first")
    t = t[[i for i in _impls(d) if i in t.columns]].round(3)
    mem = d[(d["impl"] == "chunk") & (d["pass"] == "fwdbwd")].set_index("shape")["peak_mem_gib"]
    mem = mem[~mem.index.duplicated()]
    t["peak GiB, ours"] = [mem.get(s) if p == style.pass_label("fwdbwd") else np.nan for p, s in t.index]
    t["peak GiB, ours"] = t["peak GiB, ours"].astype(float).round(2)
    t.columns = [_label(i) if i in ORDER else i for i in t.columns]
    t.index.names, t.columns.name = ["pass", "shape"], None
    return t


def table_kernels(df: pd.DataFrame) -> pd.DataFrame:
    """Where the time goes at B4 T8192 H16: device time of each kernel of one call (µs;
    torch.profiler, L2 not flushed) per implementation and pass, longest first, with its share of
    the implementation's total; kernels under 2 % of it are summed as other."""
    return render.kernel_table(df, ORDER, study="gdn")


TABLES = {"gdn_main": table_main, "gdn_bwd": table_bwd, "gdn_kernels": table_kernels}


def _fmt(x, spec):
    return "n/a" if x is None or pd.isna(x) else format(x, spec)


def _at(df, impl, b, t, h, col="device_ms", pas="fwd"):
    d = _pass(df, pas)
    if col not in d.columns:
        return None
    s = d[(d["impl"] == impl) & (d["batch"] == b) & (d["seqlen"] == t) & (d["heads"] == h)
          & (d["varlen"] != True)][col].dropna()  # noqa: E712
    return s.iloc[0] if len(s) else None


def flash_qla_verdicts(df: pd.DataFrame) -> dict[str, str]:
    """Verdicts on FlashQLA's claim (2--3x FLA's forward, 2x its backward, on Hopper) from the
    rows that pair flash_qla with fla_chunk, per pass (:func:`kernels.render.claim_verdict` on the
    speedups over ``[2, 3]`` forward, ``[2, inf)`` backward): ``GdnFlashQlaFwdVerdict``,
    ``GdnFlashQlaBwdVerdict``."""
    out = {}
    for pas, name, high in (("fwd", "Fwd", 3.0), ("bwd", "Bwd", float("inf"))):
        d = _pass(df, pas)
        s = d[d["impl"] == "flash_qla"]["speedup_vs_fla"].dropna() if "speedup_vs_fla" in d.columns else []
        out[f"GdnFlashQla{name}Verdict"] = render.claim_verdict(list(s), 2.0, high)
    return out


#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro.
CLAIMS = {"GdnFlashQlaFwdVerdict": "FlashQLA 2–3× FLA's forward on Hopper",
          "GdnFlashQlaBwdVerdict": "FlashQLA 2× FLA's backward on Hopper"}


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text: forward times, speedups and TFLOP/s at the main
    shapes, the speedup over naive at the largest seqlen naive ran (and that
    shape); ``chunk``'s and FLA's forward on the longest packed-sequence case
    (``Gdn<Impl>VarlenMs``, ``GdnVarlenCase``); backward and forward + backward times, speedups over FLA and peak
    memory at the backward's main shapes (``Gdn<Impl>Bwd...``, ``Gdn<Impl>Fwdbwd...``);
    the forward's summed kernel time at B4 T8192 H16 (``Gdn<Impl>KernelMs...``, from
    the profiled breakdown); FlashQLA's speedups over FLA and the verdict on its
    claim (:func:`flash_qla_verdicts`); a training step's device time against its forward and backward
    timed apart (``Gdn<Impl>FwdbwdMs<shape>``, ``Gdn<Impl>FwdPlusBwdMs<shape>``); the host overhead per call (latency minus device time) at
    B4 T8192 H16 (``Gdn<Impl><Pass>HostUsBFourTEightK``, µs); the largest
    output and gradient RMSE/RMS of ``chunk`` against float64 (``GdnChunkOutErrMax``,
    ``GdnChunkGradErrMax``)."""
    m = {}
    names = {(4, 8192, 16): "BFourTEightK", (1, 32768, 32): "BOneTThirtyTwoK", (8, 4096, 16): "BEightTFourK"}
    for (b, t, h), tag in names.items():
        for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla"),
                            ("recurrent", "Recurrent")):
            m[f"Gdn{iname}Ms{tag}"] = _fmt(_at(df, impl, b, t, h), ".3f")
        m[f"GdnChunkSpeedupVsFla{tag}"] = _fmt(_at(df, "chunk", b, t, h, "speedup_vs_fla"), ".2f")
        m[f"GdnChunkRatioToFlashQla{tag}"] = _fmt(_at(df, "chunk", b, t, h, "ratio_to_flash_qla"), ".2f")
        m[f"GdnFlashQlaSpeedupVsFla{tag}"] = _fmt(_at(df, "flash_qla", b, t, h, "speedup_vs_fla"), ".2f")
        m[f"GdnChunkTflops{tag}"] = _fmt(_at(df, "chunk", b, t, h, "tflops"), ".0f")
    bnames = {(4, 8192, 16): "BFourTEightK", (1, 32768, 32): "BOneTThirtyTwoK", (1, 8192, 16): "BOneTEightK"}
    for (b, t, h), tag in bnames.items():
        for pas, pname in (("bwd", "Bwd"), ("fwdbwd", "Fwdbwd")):
            for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla")):
                m[f"Gdn{iname}{pname}Ms{tag}"] = _fmt(_at(df, impl, b, t, h, pas=pas), ".3f")
            m[f"GdnChunk{pname}SpeedupVsFla{tag}"] = _fmt(_at(df, "chunk", b, t, h, "speedup_vs_fla", pas), ".2f")
            m[f"GdnChunk{pname}RatioToFlashQla{tag}"] = _fmt(_at(df, "chunk", b, t, h, "ratio_to_flash_qla", pas),
                                                            ".2f")
            m[f"GdnFlashQla{pname}SpeedupVsFla{tag}"] = _fmt(_at(df, "flash_qla", b, t, h, "speedup_vs_fla", pas),
                                                            ".2f")
        for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla")):
            m[f"Gdn{iname}FwdbwdPeakGib{tag}"] = _fmt(_at(df, impl, b, t, h, "peak_mem_gib", "fwdbwd"), ".2f")
    m.update(flash_qla_verdicts(df))
    # A training step timed whole against its forward and backward timed apart: where the step's device
    # time is longer, the GPU idled inside it waiting for the host.
    for (b, t, h), tag in {**bnames, (1, 1024, 16): "BOneTOneK"}.items():
        for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla")):
            whole = _at(df, impl, b, t, h, pas="fwdbwd")
            parts = [_at(df, impl, b, t, h, pas=p) for p in ("fwd", "bwd")]
            apart = None if None in parts else sum(parts)
            m.setdefault(f"Gdn{iname}FwdbwdMs{tag}", _fmt(whole, ".3f"))  # the main shapes have theirs
            m[f"Gdn{iname}FwdPlusBwdMs{tag}"] = _fmt(apart, ".3f")
    for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla")):
        for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):  # latency minus device time, µs
            host = _at(df, impl, 4, 8192, 16, "host_overhead_ms", pas)
            m[f"Gdn{iname}{pname}HostUsBFourTEightK"] = _fmt(None if host is None else host * 1e3, ".0f")
    for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla")):
        cell = _at(df, impl, 4, 8192, 16, "kernels")
        total = sum(e["us"] for e in json.loads(cell)) / 1e3 if isinstance(cell, str) else None
        m[f"Gdn{iname}KernelMsBFourTEightK"] = _fmt(total, ".3f")
    grads = [c for c in df.columns if c in ("rel_err_dq", "rel_err_dk", "rel_err_dv", "rel_err_dg", "rel_err_dbeta")]
    g = df[(df["impl"] == "chunk") & (df["pass"] != "fwd")][grads]
    m["GdnChunkGradErrMax"] = _fmt(g.max().max() if len(g) and grads else None, ".4f")
    o = df.loc[df["impl"] == "chunk", "rel_err"] if "rel_err" in df.columns else pd.Series(dtype=float)
    m["GdnChunkOutErrMax"] = _fmt(o.max() if o.notna().any() else None, ".4f")
    fwd = _pass(df, "fwd")
    v = fwd[(fwd["varlen"] == True) & fwd["device_ms"].notna()]  # noqa: E712
    if len(v):  # the longest packed case, its rows of every impl
        case = v.sort_values(["seqlen", "num_seqs"]).iloc[-1]
        v = v[(v["seqlen"] == case["seqlen"]) & (v["num_seqs"] == case["num_seqs"]) & (v["heads"] == case["heads"])]
        m["GdnVarlenCase"] = f"{int(case['num_seqs'])} sequences, T{int(case['seqlen'])} H{int(case['heads'])}"
    else:
        m["GdnVarlenCase"] = "n/a"
    for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla")):
        s = v.loc[v["impl"] == impl, "device_ms"]
        m[f"Gdn{iname}VarlenMs"] = _fmt(s.iloc[0] if len(s) else None, ".3f")
    d = fwd[(fwd["impl"] == "chunk") & fwd["speedup_vs_naive"].notna()]
    if len(d):
        row = d.assign(tokens=d["batch"] * d["seqlen"] * d["heads"]).sort_values(["seqlen", "tokens"]).iloc[-1]
        m["GdnChunkSpeedupVsNaive"] = _fmt(row["speedup_vs_naive"], ".0f")
        m["GdnNaiveMaxShape"] = f"B{int(row['batch'])} T{int(row['seqlen'])} H{int(row['heads'])}"
    else:
        m["GdnChunkSpeedupVsNaive"] = m["GdnNaiveMaxShape"] = "n/a"
    return m
