"""Figures, tables and quoted numbers of the long-context study.

Derived metrics (per row of the tidy table): ``family`` (attention or gdn, from the registry's
tags), ``peak_mem_gib`` (the call's own peak, ``peak_mem_timed_bytes``, else the harness's
``peak_mem_bytes``), ``cache_mib`` (decode's KV cache or GDN state) and, on GDN rows,
``speedup_vs_attention``: the fastest attention's device time at the same phase, pass, length and
launch over this row's. Slopes and crossovers: :mod:`kernels.longctx.scaling`, from the config's
``fit_min_seqlen`` up; the paper's table and macros are at the config's ``table_seqlens``
(:func:`kernels.paper.report_kit.study_config`). The figures, tables and macros read the tidy table as
the collect step derived it (:func:`derive`). Built on :mod:`kernels.paper.report_kit`.

Verdicts (the claims table's), from the slopes' 95 % intervals
(:func:`kernels.paper.report_kit.scaling_verdict`): the move from softmax to linear attention turns
O(n²) into O(n) (``LongctxLinearVerdict``: every Gated DeltaNet prefill time's slope shows power 1,
at most linear, and every attention's power 2, :func:`kernels.paper.report_kit.follows_power`; "partly
holds (k of n)" when k of the n do); FlashAttention-style kernels keep attention's memory O(N)
(``LongctxMemoryVerdict``: every attention's prefill peak-memory slope shows power 1); the slopes of
power 1 whose interval lies below 1 are named apart (:func:`sublinear`); linear attention is the faster above
:data:`OVERTAKE_SEQLEN` tokens (``LongctxOvertakeVerdict``: :func:`kernels.paper.report_kit.claim_verdict`
of our chunked kernel's ``speedup_vs_attention`` in prefill at those lengths against 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.gdn.fla_names import impl_labels
from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.longctx.impls import IMPLS
from kernels.longctx.scaling import NO_SLOPE, crossover, fit_slope
from kernels.paper.rows import ROLES

STUDY = "longctx"
#: The implementations in the order of legends and tables (their registry's).
ORDER = tuple(IMPLS)
ATTENTION = tuple(i for i, e in IMPLS.items() if "attention" in e.tags)
GDN = tuple(i for i, e in IMPLS.items() if "gdn" in e.tags)
KEYS = ["gpu", "phase", "pass", "dtype", "seqlen", "launch"]
#: The tidy table's columns that the report reads (:func:`kernels.paper.report_kit.tidy_frame`).
COLUMNS = [*KEYS, "impl", "status", "batch", "heads", "kv_heads", "value_heads", "head_dim", "bytes", "device_ms",
           "q10_ms", "q90_ms", "latency_ms", "peak_mem_bytes", "peak_mem_timed_bytes", "cache_bytes", "rel_err",
           "check_seqlen", ROLES, kit.DEVICE_REPS, "family", "peak_mem_gib", "cache_mib", "speedup_vs_attention"]
#: The context length above which the source expects linear attention to win (its "above 100K").
OVERTAKE_SEQLEN = 100_000
#: The series whose slopes are fitted: (name in macros and tables, phase, pass, column).
SERIES = (("Fwd", "prefill", "fwd", "device_ms"), ("Fwdbwd", "prefill", "fwdbwd", "device_ms"),
          ("Decode", "decode", "fwd", "device_ms"), ("Mem", "prefill", "fwd", "peak_mem_gib"))
#: Octaves between two written labels of the length axis at the least (:func:`_tick_labels`).
LABEL_OCTAVES = 2
SERIES_LABELS = {"Fwd": "prefill time", "Fwdbwd": "prefill + backward time", "Decode": "decode time",
                 "Mem": "prefill peak memory"}


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    return kit.tidy_frame(df, COLUMNS)


def _fastest_attention(df: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, phase, pass, dtype, seqlen, launch): the fastest attention row's device time
    (columns ``device_ms``, ``impl``)."""
    d = df[df["impl"].isin(ATTENTION) & df["device_ms"].notna()]
    if d.empty:
        return d[[*KEYS, "impl", "device_ms"]]
    return d.loc[d.groupby(KEYS, dropna=False)["device_ms"].idxmin(), [*KEYS, "impl", "device_ms"]]


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``family``, ``peak_mem_gib``, ``cache_mib`` and ``speedup_vs_attention`` (module docstring)."""
    df = _tidy(df).copy()
    df["family"] = df["impl"].map(lambda i: "attention" if i in ATTENTION else "gdn")
    peak = pd.to_numeric(df["peak_mem_timed_bytes"], errors="coerce").fillna(
        pd.to_numeric(df["peak_mem_bytes"], errors="coerce"))
    df["peak_mem_gib"] = peak / 2**30
    df["cache_mib"] = pd.to_numeric(df["cache_bytes"], errors="coerce") / 2**20
    fastest = _fastest_attention(df)
    base = df[KEYS].merge(fastest[[*KEYS, "device_ms"]].rename(columns={"device_ms": "_attn"}), on=KEYS, how="left")
    df["speedup_vs_attention"] = np.where(df["family"] == "gdn", base["_attn"].to_numpy() / df["device_ms"], np.nan)
    return df


def _rows(df: pd.DataFrame, phase: str, pas: str = "fwd", launch: str = "stream") -> pd.DataFrame:
    d = _tidy(df)
    return d[(d["phase"] == phase) & (d["pass"] == pas) & (d["launch"] == launch)]


def _config() -> dict:
    return kit.study_config(STUDY)


def _impls(d: pd.DataFrame) -> list[str]:
    return kit.ordered(d["impl"].dropna(), ORDER)


def _label(impl: str) -> str:
    return style.label(STUDY, impl)


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
#: colours (cuDNN, FA2, Flex, FLASH) tell apart by their markers as well.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h", "*")


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
                linestyle=linestyle or ("-" if impl in ATTENTION else "--"))


def _paired(df: pd.DataFrame, impl: str, pas: str) -> pd.DataFrame:
    """GDN ``impl``'s prefill (pass ``pas``) beside the fastest attention at each length at which
    both were timed: ``seqlen``, ``device_ms`` and the attention's, ``device_ms_attn``."""
    d = _rows(df, "prefill", pas)
    own = d[(d["impl"] == impl) & d["device_ms"].notna()][["seqlen", "device_ms"]]
    attn = _fastest_attention(d)[["seqlen", "device_ms"]]
    return own.merge(attn, on="seqlen", suffixes=("", "_attn")).sort_values("seqlen")


def crossover_of(df: pd.DataFrame, impl: str, pas: str = "fwd"):
    """:func:`kernels.longctx.scaling.crossover` of GDN ``impl``'s prefill (pass ``pas``) against the
    fastest attention at each length (:func:`_paired`)."""
    m = _paired(df, impl, pas)
    return crossover(m["seqlen"], m["device_ms"], m["device_ms_attn"])


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
    style.legend_below(fig, axes, ncol=4)
    return fig


def fig_prefill(df: pd.DataFrame):
    """Prefill at long context against the prompt's length (log-log), causal softmax attention (solid)
    against Gated DeltaNet (dashed): median device time of the forward (left) and of forward + backward
    (middle; FlashInfer's GDN has no backward), and the forward's peak memory (right: inputs, outputs
    and every temporary of one call). The grey dotted line: the length from which our chunked GDN is
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
    _panel(axes[2], _rows(df, "prefill"), "peak_mem_gib", names=names)
    axes[0].set_ylabel("median device time (ms)")
    axes[2].set_title("forward, peak memory")
    axes[2].set_ylabel("GiB")
    return _finish(fig, axes)


FIGURES = {"longctx_prefill": fig_prefill}


def slopes(df: pd.DataFrame) -> dict[tuple[str, str], object]:
    """``{(series, impl): Slope}`` of every series of :data:`SERIES` and implementation measured at
    enough lengths (:func:`kernels.longctx.scaling.fit_slope` from ``fit_min_seqlen`` up)."""
    start = _config()["fit_min_seqlen"]
    out = {}
    for name, phase, pas, col in SERIES:
        d = _rows(df, phase, pas)
        d = d[d["status"] == "ok"]
        for impl in _impls(d):
            s = d[d["impl"] == impl]
            out[(name, impl)] = fit_slope(s["seqlen"], s[col], start)
    return out


def table_slopes(df: pd.DataFrame) -> pd.DataFrame:
    """Long context: fitted log-log slopes p (a cost that grows as the p-th power of the length T)
    with their 95 % confidence intervals, over the lengths from the fit's shortest (the long-context
    section states it) up: 2 is quadratic, 1 linear, 0 constant."""
    rows = [{"series": SERIES_LABELS[name], "implementation": _label(impl), "p": s.p, "low": s.low, "high": s.high,
             "lengths": s.n} for (name, impl), s in slopes(df).items() if s.n]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).set_index(["series", "implementation"]).round({"p": 2, "low": 2, "high": 2})


def _at(df, impl, phase, pas, seqlen, col="device_ms", launch="stream"):
    d = _rows(df, phase, pas, launch)
    return kit.first(d[(d["impl"] == impl) & (d["seqlen"] == seqlen)], col)


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


#: The implementations whose slopes of each series the verdicts read, those that should show
#: power 1 and those that should show 2: prefill time, Gated DeltaNet against attention
#: (``LongctxLinearVerdict``); prefill peak memory, attention alone (``LongctxMemoryVerdict``).
VERDICT_SLOPES = {"Fwd": (GDN, ATTENTION), "Mem": (ATTENTION, ())}


def _verdict_slopes(fitted: dict, series: str) -> tuple[list[tuple], list[tuple]]:
    """The 95 % intervals ``(low, high)`` of the slopes of ``series`` that should show power 1 and of
    those that should show 2 (:data:`VERDICT_SLOPES`)."""
    return tuple([(s.low, s.high) for (n, i), s in fitted.items() if n == series and i in impls and s.n]
                 for impls in VERDICT_SLOPES[series])


def verdicts(df: pd.DataFrame) -> dict[str, str]:
    """``LongctxLinearVerdict``, ``LongctxMemoryVerdict``, ``LongctxOvertakeVerdict`` (module docstring)."""
    fitted = slopes(df)
    gdn, attn = _verdict_slopes(fitted, "Fwd")
    mem, _ = _verdict_slopes(fitted, "Mem")
    d = _rows(df, "prefill")
    over = d[(d["impl"] == "chunk") & (d["seqlen"] > OVERTAKE_SEQLEN)]["speedup_vs_attention"].dropna()
    return {"LongctxLinearVerdict": kit.scaling_verdict(gdn, attn) if gdn and attn else style.MISSING,
            "LongctxMemoryVerdict": kit.scaling_verdict(mem),
            "LongctxOvertakeVerdict": kit.claim_verdict(list(over), 1.0)}


def _fitted_rows(df: pd.DataFrame, series: str, impl: str) -> pd.DataFrame:
    """The rows of ``impl`` that its slope of ``series`` is fitted from, by length: ``seqlen`` and the
    series' column, from ``fit_min_seqlen`` up (:func:`slopes`)."""
    _, phase, pas, col = next(x for x in SERIES if x[0] == series)
    d = _rows(df, phase, pas)
    d = d[(d["impl"] == impl) & (d["status"] == "ok") & (d["seqlen"] >= _config()["fit_min_seqlen"])]
    d = d[pd.to_numeric(d[col], errors="coerce") > 0]
    return d[["seqlen", col]].astype(float).sort_values("seqlen").rename(columns={col: "value"})


def sublinear(df: pd.DataFrame, fitted: dict) -> dict[str, str]:
    """The slopes that the verdicts count as linear (:func:`kernels.paper.report_kit.follows_power`)
    although their interval lies wholly below 1 (:func:`kernels.paper.report_kit.below_one`), per series
    of :data:`VERDICT_SLOPES`: ``LongctxSublinear<Series>`` ("true" when there is one, the paper's
    switch ``\\ifLongctxSublinear<Series>``) and ``...Slopes``, each as "GDN FlashQLA 0.81 [0.71, 0.91]
    (0.98 between its two longest lengths, 128K and 512K)"; for prefill time, ``LongctxSublinearFwdStep``:
    where each one's time per token falls most between two neighbouring lengths of the fit ("GDN
    FlashQLA: from 35.8 ns at 16K to 19.7 ns at 64K"). ``fitted``: :func:`slopes` of ``df``."""
    out, steps = {}, []
    for series, (linear, _) in VERDICT_SLOPES.items():
        below = [impl for impl in linear if kit.below_one(fitted.get((series, impl), NO_SLOPE).high)]
        texts = []
        for impl in below:
            s, r = fitted[(series, impl)], _fitted_rows(df, series, impl)
            (t0, y0), (t1, y1) = r.iloc[-2], r.iloc[-1]
            end = np.log2(y1 / y0) / np.log2(t1 / t0)
            texts.append(f"{_label(impl)} {kit.fmt(s.p)} [{kit.fmt(s.low)}, {kit.fmt(s.high)}] "
                         f"({kit.fmt(end)} between its two longest lengths, {style.tokens(t0)} and {style.tokens(t1)})")
            if series == "Fwd":
                ns = (r["value"] * 1e6 / r["seqlen"]).to_numpy()  # ms per call -> ns per token
                i = int(np.argmax(ns[:-1] - ns[1:]))
                steps.append(f"{_label(impl)}: from {kit.fmt(ns[i], 1)} ns at {style.tokens(r['seqlen'].iloc[i])} to "
                             f"{kit.fmt(ns[i + 1], 1)} ns at {style.tokens(r['seqlen'].iloc[i + 1])}")
        out[f"LongctxSublinear{series}"] = "true" if below else "false"
        out[f"LongctxSublinear{series}Slopes"] = kit.and_list(texts) or style.MISSING
    out["LongctxSublinearFwdStep"] = "; ".join(steps) or style.MISSING
    return out


def _vs_attention(df: pd.DataFrame, impl: str, pas: str, seqlen) -> kit.Ratio:
    """``impl``'s prefill speedup over the fastest attention at ``seqlen``, with its interval
    (:func:`kernels.paper.report_kit.ratio` of the two rows' device times)."""
    d = _rows(df, "prefill", pas)
    d = d[(d["seqlen"] == seqlen) & d["device_ms"].notna()]
    attn = d[d["impl"].isin(ATTENTION)].sort_values("device_ms")
    return kit.ratio(kit.first(attn, kit.DEVICE_REPS), kit.first(d[d["impl"] == impl], kit.DEVICE_REPS))


def _headline_length() -> int:
    return _config()["table_seqlens"][-1]


#: The study's headline numbers that :func:`macros` gives, by macro, in words (the
#: reproduction appendix sets them beside the second run's).
HEADLINES = {f"LongctxSpeedupChunkFwdT{kit.size_name(_headline_length())}":
             "Gated DeltaNet prefill (ours) over the fastest attention at the longest table length, ×",
             "LongctxCrossoverChunkFwd": "length from which Gated DeltaNet prefill (ours) is the faster, tokens"}

#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro.
CLAIMS = {"LongctxLinearVerdict": "linear attention turns O(n²) into O(n)",
          "LongctxMemoryVerdict": "FlashAttention/FlexAttention: attention memory from O(N²) to O(N)",
          "LongctxOvertakeVerdict": "linear attention faster than softmax attention above 100K tokens"}

#: Each claim of :data:`CLAIMS` in a few words, by verdict macro: the label of its values in the
#: across-GPU table (:mod:`kernels.paper.uncertainty`).
CLAIM_NAMES = {"LongctxLinearVerdict": "prefill slope",
               "LongctxMemoryVerdict": "attention memory slope",
               "LongctxOvertakeVerdict": "linear against softmax"}

#: The implementations each verdict of :data:`CLAIMS` cannot be decided without, by verdict macro: on
#: a GPU where one of them has rows and none timed ok, the claim is "not testable"
#: (:func:`kernels.paper.quick.untestable`).
CLAIM_IMPLS = {"LongctxLinearVerdict": ("chunk", "sdpa_cudnn"),
               "LongctxMemoryVerdict": ("sdpa_cudnn",),
               "LongctxOvertakeVerdict": ("chunk", "sdpa_cudnn")}

#: The values each verdict of :data:`CLAIMS` compares, by verdict macro: ``(macro, words)`` pairs, each
#: printed as its value, the words and its interval (:func:`kernels.paper.models.evidence_text`: each
#: GPU model's claims side by side).
EVIDENCE = {"LongctxLinearVerdict": tuple((f"LongctxSlope{kit.camel(i)}Fwd", f" {_label(i)}") for i in (*GDN, *ATTENTION)
                                           if "prefill" in IMPLS[i].tags),
            "LongctxMemoryVerdict": tuple((f"LongctxSlope{kit.camel(i)}Mem", f" {_label(i)}") for i in ATTENTION
                                          if "prefill" in IMPLS[i].tags),
            "LongctxOvertakeVerdict": ((next(iter(HEADLINES)), f"× at {style.tokens(_headline_length())} tokens"),
                                       ("LongctxCrossoverChunkFwd", " tokens and up faster"))}


def _cross_text(cross, end: float, d: pd.DataFrame) -> str:
    if np.isfinite(end):
        return style.tokens(end)
    lengths = d["seqlen"].dropna()
    if lengths.empty:
        return style.MISSING
    return f"below {style.tokens(lengths.min())}" if cross.where == "below" else f"above {style.tokens(lengths.max())}"


def _bracket(df: pd.DataFrame, impl: str, pas: str, at: float) -> tuple[float, float]:
    """The measured lengths on either side of a crossover at ``at`` tokens (GDN ``impl``'s prefill
    against the fastest attention, pass ``pas``): the longest length at or below it and the shortest
    above it at which both were timed, between which :func:`crossover_of` interpolates; NaN where
    there is none."""
    if not np.isfinite(at):
        return np.nan, np.nan
    both = list(_paired(df, impl, pas)["seqlen"])
    below, above = [t for t in both if t <= at], [t for t in both if t > at]
    return (below[-1] if below else np.nan), (above[0] if above else np.nan)


def crossover_texts(df: pd.DataFrame, impl: str, pas: str = "fwd") -> tuple[str, str]:
    """:func:`crossover_bounds` as the paper quotes them, computed once: the interval ``[L, H]``
    (``[below 1K, 2K]`` where no length is wholly slower, ``[8K, above 512K]`` where the longest is not
    wholly faster) and the same in words, for the sentences that quote the crossover without its
    interpolated length ("between 8K and 16K", "at most 2K", "beyond 8K");
    :data:`~kernels.paper.style.MISSING` for both without a length with a finite interval."""
    bounds = crossover_bounds(df, impl, pas)
    if bounds is None:
        return style.MISSING, style.MISSING
    (low, high), lengths = bounds, list(_paired(df, impl, pas)["seqlen"])
    first, last = style.tokens(lengths[0]), style.tokens(lengths[-1])
    interval = (f"[{style.tokens(low) if np.isfinite(low) else f'below {first}'}, "
                f"{style.tokens(high) if np.isfinite(high) else f'above {last}'}]")
    if np.isfinite(high):
        words = f"between {style.tokens(low)} and {style.tokens(high)}" if np.isfinite(low) else f"at most {style.tokens(high)}"
    else:
        words = f"beyond {style.tokens(low) if np.isfinite(low) else last}"
    return interval, words


def crossover_bounds(df: pd.DataFrame, impl: str, pas: str = "fwd") -> tuple[float, float] | None:
    """The measured lengths between which GDN ``impl``'s prefill (pass ``pas``) overtakes the fastest
    attention, given the speedups' intervals, as ``(L, H)`` (tokens; NaN where a bound is not within
    the lengths measured). At each length at which both were timed (:func:`_paired`), the speedup over the fastest attention
    there has its :data:`~kernels.paper.report_kit.LEVEL` interval (:func:`_vs_attention`); H is the
    shortest length from which every interval lies wholly above 1 (``impl`` faster at H and at every
    longer length), NaN where the longest's does not; L is the longest length shorter than H whose
    interval lies wholly below 1 (``impl`` slower), NaN where none does. Between L and H the
    intervals hold 1 or do not stay above it, so the length from which ``impl`` is the faster lies
    between them, wherever :func:`crossover_of` interpolates it. None without a length with a
    finite interval."""
    lengths = list(_paired(df, impl, pas)["seqlen"])
    speedups = [_vs_attention(df, impl, pas, t) for t in lengths]
    if not any(np.isfinite(r.low) and np.isfinite(r.high) for r in speedups):
        return None
    first = len(lengths)  # the index of H: from it on, every interval above 1
    while first and speedups[first - 1].low > 1.0:
        first -= 1
    slower = [t for t, r in zip(lengths[:first], speedups[:first]) if r.high < 1.0]
    return (float(slower[-1]) if slower else np.nan), (float(lengths[first]) if first < len(lengths) else np.nan)


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text: each implementation's slope of each series with its interval
    (``LongctxSlope<Impl><Series>``, ``...Low``, ``...High``); where our and the other GDN kernels
    overtake the fastest attention in prefill (``LongctxCrossover<Impl><Pass>``, in K tokens, ``...Between``, the measured lengths it is interpolated between,
    :func:`_bracket`, and ``...Ci``, those between which it lies given the speedups' 95 % intervals,
    and ``...Span``, the same in words: :func:`crossover_texts`); at each table length (``T<size>``, :func:`kernels.paper.report_kit.size_name`)
    the prefill times (``LongctxMs<Impl><Pass>T...``, ms), the prefill forward's peak memory
    (``LongctxPeakGib<Impl>T...``, GiB: the ``peak_mem_gib`` of :func:`derive`) and the bytes of its
    inputs and outputs (``LongctxIoGib<Impl>T...``, GiB: the row's ``bytes``, the least the call reads
    and writes), the decode step (``LongctxDecodeUs<Impl>T...``, device time; its latency launched
    from Python, ``LongctxDecodeLatencyUs<Impl>T...``, and replayed from a CUDA graph,
    ``LongctxDecodeGraphLatencyUs<Impl>T...``, µs), decode's memory (``LongctxCacheMib<Impl>T...``)
    and the GDN speedups over the fastest attention (``LongctxSpeedup<Impl><Pass>T...``, and ``...Ci`` their
    95 % intervals, :func:`kernels.paper.report_kit.interval`) with the attentions timed there, of
    which it is the fastest (``LongctxAttentions<Pass>T...``, their labels); the layer's
    shapes (``LongctxAttentionShape``, ``LongctxGdnShape``), the lengths (``LongctxSeqlenRange``,
    ``LongctxFitMin``, ``LongctxCheckSeqlen``), the largest check error (``LongctxErrMax``),
    ``LongctxMeasured`` ("true" when a row was timed, else "false": the paper's switch
    ``\\ifLongctxMeasured``), the :func:`verdicts` and the slopes below 1 that they count as linear
    (:func:`sublinear`)."""
    cfg = _config()
    d = _tidy(df)
    m = {}
    fitted = slopes(d)
    for (series, phase, pas, _), impl in [(x, i) for x in SERIES for i in ORDER
                                          if x[1] in IMPLS[i].tags and x[2] in IMPLS[i].passes]:
        s = fitted.get((series, impl), NO_SLOPE)
        for end, value in (("", s.p), ("Low", s.low), ("High", s.high)):  # + 0.0: no "-0.00"
            m[f"LongctxSlope{kit.camel(impl)}{series}{end}"] = kit.fmt(round(value, 2) + 0.0 if s.n else None, 2)
    for impl in GDN:
        if "prefill" not in IMPLS[impl].tags:
            continue
        for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):
            rows = _rows(d, "prefill", pas)
            cross = crossover_of(d, impl, pas)
            name = f"LongctxCrossover{kit.camel(impl)}{pname}"
            m[name] = _cross_text(cross, cross.seqlen, rows) if cross.where != "none" else style.MISSING
            m[name + "Ci"], m[name + "Span"] = (crossover_texts(d, impl, pas) if cross.where != "none"
                                                 else (style.MISSING, style.MISSING))
            lo, hi = _bracket(d, impl, pas, cross.seqlen)
            m[name + "Between"] = f"{style.tokens(lo)} and {style.tokens(hi)}" if np.isfinite(hi) else style.MISSING
    for t in cfg["table_seqlens"]:
        tag = f"T{kit.size_name(t)}"
        for impl in ORDER:
            c = kit.camel(impl)
            for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):
                m[f"LongctxMs{c}{pname}{tag}"] = kit.fmt(_at(d, impl, "prefill", pas, t), 3)
                if impl in GDN:
                    m[f"LongctxSpeedup{c}{pname}{tag}"] = kit.fmt(_at(d, impl, "prefill", pas, t,
                                                                      "speedup_vs_attention"), 1)
                    m[f"LongctxSpeedup{c}{pname}{tag}Ci"] = kit.interval(_vs_attention(d, impl, pas, t), 1)
            m[f"LongctxDecodeUs{c}{tag}"] = kit.fmt(_at(d, impl, "decode", "fwd", t) * 1e3, 1)
            m[f"LongctxDecodeLatencyUs{c}{tag}"] = kit.fmt(_at(d, impl, "decode", "fwd", t, "latency_ms") * 1e3, 1)
            m[f"LongctxDecodeGraphLatencyUs{c}{tag}"] = kit.fmt(
                _at(d, impl, "decode", "fwd", t, "latency_ms", "graph") * 1e3, 1)
            if "prefill" in IMPLS[impl].tags:
                m[f"LongctxPeakGib{c}{tag}"] = kit.fmt(_at(d, impl, "prefill", "fwd", t, "peak_mem_gib"), 1)
                m[f"LongctxIoGib{c}{tag}"] = kit.fmt(
                    pd.to_numeric(_at(d, impl, "prefill", "fwd", t, "bytes"), errors="coerce") / 2**30, 1)
            m[f"LongctxCacheMib{c}{tag}"] = kit.fmt(_at(d, impl, "decode", "fwd", t, "cache_mib"), 1)
        for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):
            rows = _rows(d, "prefill", pas)
            timed = set(rows.loc[rows["impl"].isin(ATTENTION) & (rows["seqlen"] == t) & rows["device_ms"].notna(),
                                 "impl"])
            m[f"LongctxAttentions{pname}{tag}"] = (kit.and_list([_label(i) for i in ORDER if i in timed])
                                                     or style.MISSING)
    a, g = cfg["attention"], cfg["gdn"]
    m["LongctxAttentionShape"] = style.shape(B=cfg["batch"], H=a["heads"], KV=a["kv_heads"], D=a["head_dim"])
    m["LongctxGdnShape"] = style.shape(B=cfg["batch"], H=g["heads"], HV=g["value_heads"], D=g["head_dim"])
    lengths = cfg["prefill"]["seqlens"]
    m["LongctxSeqlenRange"] = f"{style.tokens(min(lengths))}--{style.tokens(max(lengths))}"
    m["LongctxFitMin"] = style.tokens(cfg["fit_min_seqlen"])
    m["LongctxCheckSeqlen"] = str(int(cfg["check_seqlen"]))
    m["LongctxMeasured"] = "true" if (d["status"] == "ok").any() else "false"
    err = pd.to_numeric(d.loc[d["status"] == "ok", "rel_err"], errors="coerce")
    m["LongctxErrMax"] = kit.fmt(err.max() if err.notna().any() else None, 4)
    m.update(verdicts(d))
    m.update(sublinear(d, fitted))
    return m

