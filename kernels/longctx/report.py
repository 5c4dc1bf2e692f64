"""Figures and tables of the long-context study, built on kernels.paper.report_kit: the tidy table,
its derived metrics, slopes and crossovers are :mod:`kernels.longctx.tidy`'s, the quoted numbers and
the claims' verdicts :mod:`kernels.longctx.numbers`', which this module gives the workflow with its
figures and tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.gdn.fla_names import impl_labels
from kernels.paper import style
from kernels.longctx.numbers import CLAIM_IMPLS, CLAIM_NAMES, CLAIMS, EVIDENCE, HEADLINES, macros
from kernels.longctx.tidy import (ATTENTION, ORDER, STUDY, _at, _config, _impls, _label, _rows, _tidy, crossover_bounds,
                                  crossover_of, derive, slopes)

#: What the workflow reads of a study's report (kernels.paper.render.report_module): its figures and
#: tables, :func:`~kernels.longctx.tidy.derive`, and the quoted numbers and claims of
#: :mod:`kernels.longctx.numbers`.
__all__ = ["FIGURES", "TABLES", "PAPER_TABLES", "derive", "macros", "CLAIMS", "CLAIM_NAMES", "CLAIM_IMPLS", "EVIDENCE",
           "HEADLINES"]

#: Octaves between two written labels of the length axis at the least (:func:`_tick_labels`).
LABEL_OCTAVES = 2
SERIES_LABELS = {"Fwd": "prefill time", "Fwdbwd": "prefill + backward time", "Decode": "decode time",
                 "Mem": "prefill peak memory"}


def _tick_labels(ticks: list) -> list[str]:
    """Labels of the length ticks ``ticks`` (ascending): a length is written where it lies at least
    :data:`LABEL_OCTAVES` octaves above the last one written, and the longest always (the one written
    before it left blank where that is closer), so that no two labels run into each other in a
    narrow panel."""
    shown = []
    for i, t in enumerate(ticks):
        if not shown or t >= 2**LABEL_OCTAVES * ticks[shown[-1]]:
            shown.append(i)
    if shown and shown[-1] != len(ticks) - 1:
        if len(shown) > 1:
            shown.pop()  # closer to the longest than LABEL_OCTAVES
        shown.append(len(ticks) - 1)
    return [style.tokens(t) if i in shown else "" for i, t in enumerate(ticks)]


def _log_axes(ax, d: pd.DataFrame) -> None:
    from matplotlib import ticker

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    style.plain_log(ax, "y")
    ticks = sorted(d["seqlen"].dropna().unique())
    if ticks:
        ax.set_xticks(ticks, _tick_labels(ticks), fontsize=6)
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def _names(d: pd.DataFrame) -> dict[str, str]:
    """The display name of each implementation of rows ``d`` (:func:`_label`); FLA's says where its
    backward rows among them ran TileLang (:func:`kernels.gdn.fla_names.fla_label`)."""
    return impl_labels(d, _impls(d), _label)


#: One marker per implementation, by its place in the registry (:data:`ORDER`): the attentions' warm
#: colours (cuDNN, FA2, Flex, FLASH) tell apart by their markers as well; attention's are filled,
#: Gated DeltaNet's hollow.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h", "*")
#: Least distance (points) between two values written beside the lines' ends (:func:`_end_labels`):
#: a line of their 6-point type.
LABEL_GAP_PT = 7.0


def _lines(ax, d: pd.DataFrame, col: str, scale: float = 1.0, linestyle: str | None = None, label: bool = True,
           names: dict[str, str] | None = None):
    pal = style.palette(STUDY, _impls(d))
    names = names or _names(d)
    for impl in _impls(d):
        s = d[(d["impl"] == impl) & d[col].notna()].sort_values("seqlen")
        if s.empty:
            continue
        marker = MARKERS[ORDER.index(impl) % len(MARKERS)] if impl in ORDER else "o"
        ax.plot(s["seqlen"], s[col] * scale, marker=marker, color=pal[impl], label=names[impl] if label else None,
                linestyle=linestyle or ("-" if impl in ATTENTION else "--"),
                markerfacecolor=pal[impl] if impl in ATTENTION else "white")


def _spread(y: list[float], gap: float) -> list[float]:
    """Positions for labels at ascending heights ``y`` at least ``gap`` apart: each run of labels that
    would lie closer is spaced by ``gap`` around the mean of its heights (runs merge until none
    overlaps)."""
    runs: list[list[float]] = []
    for value in y:
        runs.append([value])
        while len(runs) > 1 and _placed(runs[-2], gap)[-1] + gap > _placed(runs[-1], gap)[0]:
            runs[-2:] = [runs[-2] + runs[-1]]
    return [p for run in runs for p in _placed(run, gap)]


def _placed(run: list[float], gap: float) -> list[float]:
    """The heights of a run of labels (:func:`_spread`): ``gap`` apart, centred on their mean."""
    centre = float(np.mean(run))
    return [centre + (i - (len(run) - 1) / 2) * gap for i in range(len(run))]


def _end_labels(ax, d: pd.DataFrame, col: str) -> list:
    """Write the value of ``col`` at the longest length of ``d`` beside each line's end there (one
    decimal, in its line's colour), right of the panel, in ascending order; returns them for
    :func:`_space_labels`, which moves them apart once the panels are laid out."""
    end = d["seqlen"].max()
    at = d[d["seqlen"].eq(end)].groupby("impl")[col].median().dropna().sort_values()
    pal = style.palette(STUDY, _impls(d))
    return [ax.annotate(f"{v:.1f}", (end, v), xytext=(5, 0), textcoords="offset points", ha="left", va="center",
                        fontsize=6, color=pal[impl], annotation_clip=False) for impl, v in at.items()]


def _space_labels(ax, labels: list) -> None:
    """Move ``labels`` (:func:`_end_labels`) apart where their values lie closer on the page than
    :data:`LABEL_GAP_PT`: that far apart around their mean (:func:`_spread`). Call it once the figure
    is laid out (its panels' size sets the distances)."""
    y = [ax.transData.transform(label.xy)[1] * 72.0 / ax.figure.dpi for label in labels]
    for label, y0, y1 in zip(labels, y, _spread(y, LABEL_GAP_PT)):
        label.xyann = (label.xyann[0], y1 - y0)


def _panel(ax, d: pd.DataFrame, col: str, scale: float = 1.0, **lines) -> None:
    """Lines of ``col`` (times ``scale``) against the length on log-log axes, from the rows of ``d``
    that have it (none: the panel stays empty)."""
    d = d[d[col].notna()]
    if not d.empty:
        _lines(ax, d, col, scale, **lines)
        _log_axes(ax, d)


def _finish(fig, axes):
    for ax in axes:
        ax.set_xlabel("sequence length (tokens)")
    fig.tight_layout()
    style.legend_below(fig, axes, ncol=4, reveal=False)
    return fig


def fig_prefill(df: pd.DataFrame):
    """Prefill at long context against the prompt's length (log-log), causal softmax attention (solid,
    filled markers) against Gated DeltaNet (dashed, hollow markers): median device time of the forward
    (left) and of forward + backward (middle; FlashInfer's GDN has no backward), and the forward's peak
    memory (right: inputs, outputs and every temporary of one call; beside the lines' ends, each one's
    peak at the longest length in GiB, moved apart where they lie close). The grey dotted line: the length from which our chunked GDN is
    faster than the fastest attention (interpolated, written beside it); shaded grey: the measured
    lengths between which it lies given the speedups' 95 % bootstrap intervals (the interval the text
    quotes)."""
    fig, axes = style.figure(width=style.FULL_WIDTH, height=2.6, ncols=3)
    prefill = _tidy(df)[lambda d: (d["phase"] == "prefill") & (d["launch"] == "stream")]
    names = _names(prefill)  # one legend for the panels: FLA's name says what its backward ran
    for ax, (pas, what) in zip(axes, (("fwd", "forward"), ("fwdbwd", "forward + backward"))):
        d = _rows(df, "prefill", pas)
        d = d[d["device_ms"].notna()]
        if d.empty:
            ax.set_title(what)
            continue
        _lines(ax, d, "device_ms", names=names)
        _log_axes(ax, d)
        cross = crossover_of(df, "chunk", pas)
        if cross.where == "inside":
            ax.axvline(cross.seqlen, color="0.4", lw=0.8, ls=":")
            bounds = crossover_bounds(df, "chunk", pas)
            if bounds is not None:
                low = bounds[0] if np.isfinite(bounds[0]) else d["seqlen"].min()
                high = bounds[1] if np.isfinite(bounds[1]) else d["seqlen"].max()
                ax.axvspan(low, high, color="0.85", alpha=0.5, lw=0)
            ax.text(cross.seqlen, 0.03, f" GDN faster from {style.tokens(cross.seqlen)}",
                    transform=ax.get_xaxis_transform(), ha="left", va="bottom", fontsize=6, color="0.3")
        ax.set_title(what)
    memory = _rows(df, "prefill")
    _panel(axes[2], memory, "peak_mem_gib", names=names)
    labels = _end_labels(axes[2], memory[memory["peak_mem_gib"].notna()], "peak_mem_gib")
    axes[0].set_ylabel("median device time (ms)")
    axes[2].set_title("forward, peak memory")
    axes[2].set_ylabel("GiB")
    _finish(fig, axes)  # the layout leaves room for the labels right of the panel
    _space_labels(axes[2], labels)
    return fig


FIGURES = {"longctx_prefill": fig_prefill}


def table_slopes(df: pd.DataFrame) -> pd.DataFrame:
    """Long context: fitted log-log slopes p (a cost that grows as the p-th power of the length T)
    with their 95 % confidence intervals, over the lengths from the fit's shortest (the long-context
    section states it) up: 2 is quadratic, 1 linear, 0 constant."""
    rows = [{"series": SERIES_LABELS[name], "implementation": _label(impl), "p": s.p, "low": s.low, "high": s.high,
             "lengths": s.n} for (name, impl), s in slopes(df).items() if s.n]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).set_index(["series", "implementation"]).round({"p": 2, "low": 2, "high": 2})


def table_main(df: pd.DataFrame) -> pd.DataFrame:
    """Long context, at the lengths of the column heads: prefill forward and forward + backward
    (median device time, ms), one decode step after that many tokens (median device time, µs) and
    what decode keeps per layer (the KV cache or the GDN state, MiB), per implementation timed at
    one of these lengths at least (the others stop earlier: config key max_seqlen). n/a: not timed
    at that length (max_seqlen), or a pass or phase the implementation does not run (FlashInfer's
    GDN has no backward; decode: attention and our recurrent kernel only)."""
    d = _tidy(df)
    d = d[d["device_ms"].notna()]
    if d.empty:
        return pd.DataFrame()
    out, names = {}, _names(d)
    for t in _config()["table_seqlens"]:
        for name, get in (("prefill ms", lambda i: _at(d, i, "prefill", "fwd", t)),
                          ("fwd+bwd ms", lambda i: _at(d, i, "prefill", "fwdbwd", t)),
                          ("decode µs", lambda i: _at(d, i, "decode", "fwd", t) * 1e3),
                          ("cache MiB", lambda i: _at(d, i, "decode", "fwd", t, "cache_mib"))):
            out[(f"T = {style.tokens(t)}", name)] = {names[i]: get(i) for i in _impls(d)}
    t = pd.DataFrame(out).astype(float).dropna(how="all")
    t.columns = pd.MultiIndex.from_tuples(t.columns)
    t.index.name = "implementation"
    return t.round(3)


TABLES = {"longctx_table": table_main, "longctx_slopes": table_slopes}
#: The tables set in the paper: none (the text quotes their numbers; both are CSV files, results/tables/).
PAPER_TABLES = ()
