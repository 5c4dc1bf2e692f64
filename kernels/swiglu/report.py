"""Figures and tables of the SwiGLU study, built on kernels.paper.report_kit: the tidy table and its
derived metrics are :mod:`kernels.swiglu.tidy`'s, the quoted numbers and the claims' verdicts
:mod:`kernels.swiglu.numbers`', which this module gives the workflow with its figures and tables.
"""

from __future__ import annotations

import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper import rows as rows_mod
from kernels.paper import style
from kernels.paper.rows import PEAK_GBPS
from kernels.swiglu.impls import IMPLS
from kernels.swiglu.numbers import CLAIM_IMPLS, CLAIM_NAMES, CLAIMS, EVIDENCE, HEADLINES, macros
from kernels.swiglu.study import PROFILE_ROLE
from kernels.swiglu.tidy import DECODE_ROLE, GEMM_MODELS, MODELS, _elementwise, _flat, _ok, _quoted, derive

#: What the workflow reads of a study's report (kernels.paper.render.report_module): its figures and
#: tables, :func:`~kernels.swiglu.tidy.derive`, and the quoted numbers and claims of :mod:`kernels.swiglu.numbers`.
__all__ = ["FIGURES", "TABLES", "PAPER_TABLES", "derive", "macros", "CLAIMS", "CLAIM_NAMES", "CLAIM_IMPLS", "EVIDENCE",
           "HEADLINES"]

#: Order of the tiers in legends and tables.
ORDER = tuple(IMPLS)


# ----------------------------------------------------------------------------
# helpers


def _impls(df: pd.DataFrame) -> list[str]:
    return kit.ordered(sorted(df["impl"].unique()), ORDER)


def _passes(df: pd.DataFrame) -> list[str]:
    present = set(df["pass"])
    return [p for p in ("fwd", "bwd", "fwdbwd") if p in present] or ["fwd"]


def _label(impl: str) -> str:
    return style.label("swiglu", impl)


def _plot(ax, line: pd.Series, **kw) -> None:
    """``line`` against its index: joined by a line where it has three or more points, else markers
    alone, as diamonds drawn larger and above the lines (a point among lines would hide behind them)."""
    if len(line) < 3:
        kw = {**kw, "linestyle": "none", "marker": "D", "markersize": 5, "zorder": 3}
    ax.plot(line.index, line.values, **kw)


# ----------------------------------------------------------------------------
# figures


#: How each implementation of the size sweep is drawn (:func:`fig_bandwidth_speedup`): marker, whether
#: it is filled, and line style, so that implementations whose values agree remain told apart by
#: shape in print; one not named here gets a filled circle and a solid line.
SWEEP_STYLES = {"eager": ("v", True, "-"), "triton": ("o", True, "-"), "seed": ("s", False, "-."),
                "liger": ("^", False, (0, (1, 1)))}
#: Octaves between the markers of two implementations at one size (:func:`fig_bandwidth_speedup`):
#: each is drawn shifted sideways by its place among them, so that equal values do not hide each other.
SHIFT_OCTAVES = 0.3


def _sweep_line(ax, line: pd.Series, impl: str, shift: float, color) -> None:
    """``line`` (a value per size) of ``impl`` in its :data:`SWEEP_STYLES`, its sizes times ``2**shift``."""
    marker, filled, linestyle = SWEEP_STYLES.get(impl, ("o", True, "-"))
    ax.plot(line.index * 2.0**shift, line.values, marker=marker, linestyle=linestyle, color=color,
            markerfacecolor=color if filled else "white", markeredgewidth=0.9, linewidth=1.0, label=_label(impl))


def fig_bandwidth_speedup(df: pd.DataFrame):
    """SwiGLU against size (bfloat16, rows of one hidden size), forward (left), backward (middle) and
    forward + backward (right; one call). Top: bandwidth in TB/s on the minimum bytes (forward 6,
    backward 10, forward + backward 16 bytes per element), with the same run's device copy of the
    same bytes (black dashed) and the datasheet peak (grey dotted). Bottom: speedup over eager PyTorch
    by device time (grey line at 1: eager); the copy's line is eager's time over the copy's, the gain
    of a kernel at copy bandwidth; the dotted line at 10/6 is eager's bytes over a fused forward's (10
    and 6 per element). Each implementation's markers are shifted sideways by a fraction of an octave
    so that equal values stay apart."""
    data = _flat(df)
    passes = _passes(data)
    fig, axes = style.figure(width=style.FULL_WIDTH, height=4.0, ncols=len(passes), nrows=2, squeeze=False,
                             sharex="col")
    colors = style.palette("swiglu", _impls(data))
    marked = [i for i in _impls(data) if i != "copy"]
    shifts = {impl: SHIFT_OCTAVES * (k - (len(marked) - 1) / 2) for k, impl in enumerate(marked)}
    for top, bottom, p in zip(axes[0], axes[1], passes):
        sub = data[data["pass"].eq(p)]
        for ax, col, scale in ((top, "gbps", 1e-3), (bottom, "speedup_eager", 1.0)):
            for impl in _impls(sub):
                line = sub[sub["impl"].eq(impl)].groupby("numel")[col].median().sort_index() * scale
                if impl == "copy":
                    ax.plot(line.index, line.values, color=colors[impl], linestyle="--", linewidth=1.2,
                            label="copy (same run)")
                elif col == "gbps" or impl != "eager":  # eager's speedup is 1: the grey line
                    _sweep_line(ax, line, impl, shifts[impl], colors[impl])
        for gpu in sub["gpu"].unique():
            if gpu in PEAK_GBPS:
                top.axhline(PEAK_GBPS[gpu] / 1e3, color="grey", linestyle=":", linewidth=0.9)
                top.annotate(f"{rows_mod.model_label(gpu)} datasheet", (0.02, PEAK_GBPS[gpu] / 1e3), fontsize=6,
                             xycoords=("axes fraction", "data"), va="bottom")
        bottom.axhline(1.0, color="grey", linewidth=0.8)
        if p == "fwd":
            bottom.axhline(10 / 6, color="grey", linestyle=":", linewidth=0.9)
            bottom.annotate("10/6", (0.96, 10 / 6), xycoords=("axes fraction", "data"), ha="right", va="top",
                            fontsize=6, color="0.3", bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 0.5})
        for ax in (top, bottom):
            if sub.empty:
                kit.mark_empty(ax)
            else:
                ax.set_xscale("log", base=2)
        top.set_title(style.pass_label(p))
        top.set_ylim(bottom=0)
        bottom.set_xlabel("elements")
    axes[0][0].set_ylabel("TB/s (minimum bytes)")
    axes[1][0].set_ylabel("speedup over eager")
    fig.tight_layout()
    style.legend_below(fig, list(axes.flat), ncol=6)
    return fig


def fig_decode(df: pd.DataFrame):
    """Decode sizes (1 to 64 tokens × 14336, bfloat16 forward): device time (left) and latency
    (right) launched from Python (circles, solid) and replayed from a CUDA graph (open squares,
    dashed); diamonds: measured at fewer than three sizes."""
    d = kit.with_role(_ok(df), "decode")
    d = d[d["dtype"].eq("bfloat16") & d["pass"].eq("fwd")]
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.1, ncols=2, squeeze=False)
    colors = style.palette("swiglu", _impls(d))
    for ax, (metric, title) in zip(axes[0], (("us", "device time"), ("latency_us", "latency"))):
        for impl in _impls(d):
            for launch, ls in (("stream", "-"), ("graph", "--")):
                line = (d[d["impl"].eq(impl) & d["launch"].eq(launch)].groupby("tokens")[metric]
                        .median().sort_index())
                line = line.dropna()
                if not line.empty:
                    _plot(ax, line, marker="o" if launch == "stream" else "s", linestyle=ls,
                          color=colors[impl], markerfacecolor=colors[impl] if launch == "stream" else "none",
                          label=_label(impl) + (", CUDA graph" if launch == "graph" else ""))
        if not ax.lines:
            kit.mark_empty(ax)
        else:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            style.plain_log(ax, "y")
        ax.set_title(title)
        ax.set_xlabel("tokens")
        ax.set_ylabel("median (µs)")
    fig.tight_layout()
    style.legend_below(fig, axes[0], ncol=5)
    return fig


FIGURES = {
    "swiglu_bandwidth_speedup": fig_bandwidth_speedup,
    "swiglu_decode": fig_decode,
}


# ----------------------------------------------------------------------------
# tables


#: The GEMM tier's rows: ``eager`` there is cuBLAS followed by eager PyTorch's activation.
GEMM_LABELS = {"eager": "cuBLAS + eager act.", "matmul": _label("matmul")}


def _gemm_shape(t, k, n) -> str:
    """``tokens × K to 2 × n``: the GEMM's N is gate and up side by side, twice the FFN's
    intermediate size ``n``."""
    return f"{int(t)} × {int(k)} to 2 × {int(n)}"


def table_model_shapes(df: pd.DataFrame) -> pd.DataFrame:
    """SwiGLU at model shapes (bfloat16, launched per call): median device time (µs) per
    implementation, for 16 (decode) and 8192 (prefill) tokens at each model's FFN hidden size;
    n/a: not measured (the source kernel has no backward, the fixed-configuration launch ran at one
    width's decode sizes only and torch.compile at the shapes of its own group in the study's config)."""
    d = _elementwise(df)
    tokens = [_quoted(role)["tokens"] for role in (DECODE_ROLE, PROFILE_ROLE)]
    d = d[d["tokens"].isin(tokens) & d["hidden"].isin(list(MODELS))]
    if d.empty:
        return pd.DataFrame()
    d = d.assign(shape=[f"{MODELS[int(h)]}, {int(t)} × {int(h)}" for t, h in zip(d["tokens"], d["hidden"])],
                 passname=d["pass"].map(style.pass_label))
    order = d.assign(_p=d["pass"].map(list(style.PASS_LABELS).index)).sort_values(
        ["_p", "hidden", "tokens"])[["passname", "shape"]].drop_duplicates()
    table = d.pivot_table(index=["passname", "shape"], columns="impl", values="us", aggfunc="median")
    table = table.reindex(index=pd.MultiIndex.from_frame(order),
                          columns=[i for i in _impls(d) if i in table.columns and i != "copy"])
    table.index.names = ["pass", "model, tokens × hidden"]
    table.columns = [_label(i) for i in table.columns]
    return table.round(1)


def table_gemm(df: pd.DataFrame) -> pd.DataFrame:
    """Gate/up projection with SwiGLU (bfloat16): median device time (ms) and TFLOP/s of SwiGLU fused
    into our matmul's epilogue against cuBLAS followed by our Triton activation or eager PyTorch's
    (each row timed after its own warm-up), and the fused call's speedup over cuBLAS with our
    activation."""
    d = _ok(df)
    d = d[d["gemm_in"].astype(float) > 0]
    if d.empty:
        return pd.DataFrame()
    d = d.assign(shape=[f"{GEMM_MODELS.get((int(k), int(n)), 'other')}, {_gemm_shape(t, k, n)}"
                        for t, k, n in zip(d["tokens"], d["gemm_in"], d["hidden"])])
    ms = d.pivot_table(index="shape", columns="impl", values="device_ms", aggfunc="median")
    tf = d.pivot_table(index="shape", columns="impl", values="tflops", aggfunc="median")
    impls = [i for i in _impls(d) if i in ms.columns]
    table = pd.concat({"ms": ms[impls].round(3), "TFLOP/s": tf[impls].round(0)}, axis=1)
    table.columns = pd.MultiIndex.from_tuples([(unit, GEMM_LABELS.get(impl, _label(impl)))
                                               for unit, impl in table.columns])
    if {"gemm_fused", "matmul"} <= set(impls):
        table[("speedup", "fused")] = (ms["matmul"] / ms["gemm_fused"]).round(2)
    table.index.name = "model, M × K to N (gate and up: 2 × intermediate)"
    return table.reindex(list(dict.fromkeys(d.sort_values("gemm_in")["shape"])))


def table_kernels(df: pd.DataFrame) -> pd.DataFrame:
    """Where the time goes at 8192 × 14336 (bfloat16): device time of each kernel of one call (µs;
    torch.profiler, L2 not flushed) per implementation and pass, with its share of the
    implementation's total; kernels under 2 % of it are summed as other."""
    return kit.kernel_table(df, ORDER, study="swiglu")


TABLES = {"swiglu_model_shapes": table_model_shapes, "swiglu_gemm": table_gemm, "swiglu_kernels": table_kernels}
#: The tables the paper sets: none (each is results/tables/<name>.csv, which the paper names).
PAPER_TABLES = ()
