"""Figures, tables and quoted numbers of the GDN study, forward and training step.

Derived metrics (per row of the tidy table, compared within the same pass
and shape): ``tflops`` from the chunked FLOP counts of :mod:`kernels.gdn.flops`
(same count for every impl), ``speedup_vs_naive`` (naive's median / this
median; only where naive was measured), ``speedup_vs_fla`` (fla_chunk / this),
``ratio_to_flash_qla`` (this / flash_qla, > 1 means slower than FlashQLA), ``ratio_to_flashinfer``
(this / flashinfer, alike) and
``peak_mem_gib`` (peak memory allocated while the timed call runs once,
``peak_mem_timed_bytes``, else the harness's ``peak_mem_bytes``).

The main-shape table takes the rows of role ``main`` (the config's
``main_shapes``, forward and backward; :func:`kernels.paper.report_kit.with_role`); the
macros are named after the config's shapes (:func:`paper_shapes`). Built on
:mod:`kernels.paper.report_kit`.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from matplotlib import ticker

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.gdn.fla_names import impl_labels, ran_tilelang
from kernels.gdn.impls import IMPLS
from kernels.paper.rows import ROLES

SHAPE = ["gpu", "pass", "dtype", "batch", "seqlen", "heads", "value_heads", "head_dim", "num_seqs", "varlen"]
#: The implementations in the order of legends and tables (their registry's).
ORDER = tuple(IMPLS)
#: The relative errors of the gradients against float64 (rows of the backward passes).
GRAD_ERRORS = ["rel_err_dq", "rel_err_dk", "rel_err_dv", "rel_err_dg", "rel_err_dbeta"]
#: The metrics :func:`derive` adds.
DERIVED = ["speedup_vs_naive", "speedup_vs_fla", "ratio_to_flash_qla", "ratio_to_flashinfer", "peak_mem_gib"]
#: The tidy table's columns that the report reads: a table without them (the tidy CSV of a study
#: without rows, read back) gets them all NaN (:func:`kernels.paper.report_kit.tidy_frame`).
COLUMNS = [*SHAPE, "impl", "status", "device_ms", "q10_ms", "q90_ms", "flops", "tflops", "peak_mem_timed_bytes",
           "peak_mem_bytes", "host_overhead_ms", "timing_enqueue_us", "kernels", "rel_err", *GRAD_ERRORS, "dispatch",
           ROLES, kit.DEVICE_REPS, *DERIVED]


def _speedup_base(df: pd.DataFrame, impl: str) -> pd.Series:
    """Median of ``impl`` at each row's shape (NaN where it has none)."""
    return kit.baseline(df, df["impl"] == impl, SHAPE)


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every column of :data:`COLUMNS`; rows without a ``pass`` count as forward. A
    derived table (every column there, every pass set) comes back as it is, uncopied: each
    selection of the figures, tables and macros calls this."""
    df = kit.tidy_frame(df, COLUMNS)
    return df.assign(**{"pass": df["pass"].fillna("fwd")}) if df["pass"].isna().any() else df


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``speedup_vs_naive``, ``speedup_vs_fla``, ``ratio_to_flash_qla``, ``ratio_to_flashinfer``,
    ``peak_mem_gib`` (and ``tflops`` where it is missing)."""
    df = _tidy(df).copy()
    df["tflops"] = df["tflops"].fillna(df["flops"] / (df["device_ms"] * 1e-3) / 1e12)
    df["speedup_vs_naive"] = _speedup_base(df, "naive") / df["device_ms"]
    df["speedup_vs_fla"] = _speedup_base(df, "fla_chunk") / df["device_ms"]
    df["ratio_to_flash_qla"] = df["device_ms"] / _speedup_base(df, "flash_qla")
    df["ratio_to_flashinfer"] = df["device_ms"] / _speedup_base(df, "flashinfer")
    peak = df["peak_mem_timed_bytes"].fillna(df["peak_mem_bytes"])
    df["peak_mem_gib"] = pd.to_numeric(peak, errors="coerce") / 2**30
    return df


def _pass(df, pas):
    """Rows of one pass, without the grouped-value-attention rows (``value_heads`` set: FlashQLA's
    published configurations), whose (batch, seqlen, heads) the figures and tables here would
    confuse with other rows'."""
    df = _tidy(df)
    return df[df["value_heads"].isna() & (df["pass"] == pas)]


def _impls(df):
    return kit.ordered(_tidy(df)["impl"], ORDER)


def _sweep_rows(df):
    """Fixed-length rows against sequence length: the seqlen sweep's (role ``sweep``) and the main
    shapes' (role ``main``) at the sweep's batch and heads (its first row's)."""
    d = df[df["device_ms"].notna() & (kit.has_role(df, "sweep") | kit.has_role(df, "main"))]
    sweep = kit.with_role(d, "sweep")
    if sweep.empty:
        return sweep
    return d[(d["batch"] == sweep["batch"].iloc[0]) & (d["heads"] == sweep["heads"].iloc[0])]


def _label(impl: str) -> str:
    return style.label("gdn", impl)


def _labels(d: pd.DataFrame) -> dict[str, str]:
    """The display name of each implementation of rows ``d`` in a legend or a table's columns
    (:func:`_label`; FLA's: :func:`kernels.gdn.fla_names.fla_label`)."""
    return impl_labels(d, _impls(d), _label)


def fig_time_vs_seqlen(df: pd.DataFrame):
    """Gated DeltaNet forward: median device time against sequence length per implementation
    (log-log); an implementation measured at fewer than three lengths is not joined by a line, and
    FlashQLA, timed at the main shapes only (its JIT compiles every new shape anew), has none of these.

    The rows: :func:`_sweep_rows`. Where fewer than three lengths were measured, grouped bars per
    length (linear axis) instead, which a line would not show as a trend."""
    fig, ax = style.figure(height=2.6)
    d = _sweep_rows(_pass(df, "fwd"))
    pal = style.palette("gdn", _impls(df))
    lengths = sorted(d["seqlen"].unique())
    labels = _labels(d)
    if 0 < len(lengths) < 3:
        bars = d.sort_values("seqlen").assign(length=lambda x: [f"T{int(t)}" for t in x["seqlen"]])
        kit.grouped_bars(ax, bars, "device_ms", "length", _impls(d), pal, labels)
    elif lengths:
        for impl in _impls(d):
            s = d[d["impl"] == impl].sort_values("seqlen")
            ax.plot(s["seqlen"], s["device_ms"], marker="o", label=labels[impl], color=pal[impl],
                    linestyle="-" if len(s) >= 3 else "none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [style.tokens(t) for t in lengths], fontsize=6)
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        style.plain_log(ax, "y")
    if not d.empty:
        ax.set_title("forward, " + style.shape(B=d["batch"].iloc[0], H=d["heads"].iloc[0], D=d["head_dim"].iloc[0]))
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("median device time (ms)")
    fig.tight_layout()
    style.legend_below(fig, [ax], ncol=3)
    return fig


def _main_rows(df):
    """The timed rows of the config's main shapes (role ``main``: the forward's ``main_shapes`` on
    fwd rows, the backward's on bwd and fwdbwd rows)."""
    return kit.with_role(df[df["device_ms"].notna()], "main")


FIGURES = {"gdn_time_vs_seqlen": fig_time_vs_seqlen}


def table_main(df: pd.DataFrame) -> pd.DataFrame:
    """Gated DeltaNet: median device time (ms) per implementation at the main shapes, forward (also on
    packed sequences of varying lengths; S: number of sequences, T: their total length), backward and
    training step (forward + backward as one call); n/a: not measured (FlashQLA ran the main shapes
    only, its backward at the first two; FlashInfer has no backward)."""
    fwd = _pass(df, "fwd")
    fwd = fwd[fwd["device_ms"].notna() & (kit.has_role(fwd, "main") | kit.has_role(fwd, "varlen"))]
    d = pd.concat([fwd, *(_main_rows(_pass(df, p)) for p in ("bwd", "fwdbwd"))])
    if d.empty:
        return pd.DataFrame()
    label = [style.shape(S=n, T=t, H=h) if pd.notna(v) and bool(v) else style.shape(B=b, T=t, H=h)
             for b, t, h, n, v in zip(d["batch"], d["seqlen"], d["heads"], d["num_seqs"], d["varlen"])]
    d = d.assign(shape=label, rank=d["pass"].map({p: i for i, p in enumerate(style.PASS_LABELS)}),
                 passname=d["pass"].map(style.pass_label))
    t = d.pivot_table(index=["rank", "passname", "shape"], columns="impl", values="device_ms", aggfunc="first")
    t = t[[i for i in _impls(d) if i in t.columns]].round(3).droplevel("rank")
    labels = _labels(d)
    t.columns = [labels[i] for i in t.columns]
    t.index.names, t.columns.name = ["pass", "shape"], None
    return t


def table_kernels(df: pd.DataFrame) -> pd.DataFrame:
    """Where the time goes at B4 T8192 H16: device time of each kernel of one call (µs;
    torch.profiler, L2 not flushed) per implementation and pass, longest first, with its share of
    the implementation's total; kernels under 2 % of it are summed as other."""
    t = kit.kernel_table(df, ORDER, study="gdn")
    if t.empty:
        return t
    # FLA's name in each pass's block from the rows that the breakdown of that block comes from (_labels)
    rows = _tidy(df)
    rows = rows[rows["kernels"].notna() & (rows["status"] == "ok")]
    names = {style.pass_label(p): _labels(rows[rows["pass"] == p]).get("fla_chunk") for p in rows["pass"].unique()}
    index = t.index.to_frame(index=False)
    fla = index["implementation"] == _label("fla_chunk")
    index.loc[fla, "implementation"] = [names.get(p) or n for p, n in zip(index.loc[fla, "pass"],
                                                                         index.loc[fla, "implementation"])]
    t.index = pd.MultiIndex.from_frame(index)
    return t


def _published_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of FlashQLA's published configurations (role ``published``), keyed like
    :data:`kernels.gdn.published.TIMES`: a ``config`` tuple (pass, heads, value_heads, batch, seqlen)."""
    df = _tidy(df)
    d = kit.with_role(df[df["device_ms"].notna()], "published")
    return d.assign(config=[(p, int(h), int(v), int(b), int(t)) for p, h, v, b, t in
                            zip(d["pass"], d["heads"], d["value_heads"].fillna(d["heads"]), d["batch"], d["seqlen"])])


def _configured_published() -> set[tuple]:
    """The (pass, heads, value_heads, batch, seqlen) of the sweep's published configurations
    (config key ``gdn.sweep.published``, forward, and its backward's)."""
    sweep = kit.study_config("gdn")
    out = set()
    for pas, block in (("fwd", sweep), ("bwd", sweep["backward"])):
        for s in block.get("published", {}).get("shapes", []):
            out.add((pas, s["heads"], s.get("value_heads", s["heads"]), s["batch"], s["seqlen"]))
    return out


#: This run's times in :func:`table_published` at a main shape (the table of the main shapes gives them).
MAIN_SHAPE = "main"


def table_published(df: pd.DataFrame) -> pd.DataFrame:
    """FlashQLA's published H200 times (ms; FlashQLA, FLA and FlashInfer in its repository's
    benchmark file at commit 6e5d2ea, timed from CUDA graphs with an initial state, with torch 2.9.1,
    FLA 0.5.1, FlashInfer 0.6.13 and TileLang 0.1.9; FlashInfer's forward only) beside this run's
    median device times at the same configurations (query/key heads / value heads, B sequences x T
    tokens; here B batches without an initial state, which FlashInfer's adapter packs as B
    sequences), and FLA's time over FlashQLA's in each; main: one of the main shapes, whose times here
    the table of the main shapes gives; n/a: not measured (here) or not published (FlashInfer has no
    backward)."""
    # the configurations: the sweep's (config key gdn.sweep.published), of those published.TIMES holds
    from kernels.gdn import published

    d = _published_rows(df)
    configured = _configured_published()
    rows, main = [], []  # main: whether each configuration is a main shape
    for (pas, h, hv, b, t), theirs in published.TIMES.items():
        if (pas, h, hv, b, t) not in configured:
            continue
        mine = d[d["config"].isin([(pas, h, hv, b, t)])]
        main.append(len(mine) > 0 and bool(kit.has_role(mine, "main").all()))
        ours = mine.set_index("impl")["device_ms"]
        ours = ours[~ours.index.duplicated()]
        got = {i: ours.get(i, np.nan) for i in ("chunk", "fla_chunk", "flash_qla", "flashinfer")}
        rows.append({"pass": style.pass_label(pas), "configuration": f"{h}/{hv}, {b} × {t}",
                     "FlashQLA, published": theirs["flash_qla"], "FLA, published": theirs["fla_chunk"],
                     "FLA/FlashQLA, published": theirs["fla_chunk"] / theirs["flash_qla"],
                     "FlashInfer, published": theirs.get("flashinfer", np.nan),
                     "FlashQLA": got["flash_qla"], "FLA": got["fla_chunk"],
                     "FLA/FlashQLA": got["fla_chunk"] / got["flash_qla"], "FlashInfer": got["flashinfer"],
                     _label("chunk"): got["chunk"]})
    t = pd.DataFrame(rows).set_index(["pass", "configuration"]).astype(float).round(3)
    ratios = [c for c in t.columns if c.startswith("FLA/FlashQLA")]
    t[ratios] = t[ratios].round(2)
    here = ["FlashQLA", "FLA", "FlashInfer", _label("chunk")]
    t[here] = t[here].astype(object)
    t.loc[main, here] = MAIN_SHAPE
    return t


def published_verdicts(df: pd.DataFrame) -> dict[str, str]:
    """FlashQLA's claimed speedups over FLA (:data:`kernels.gdn.published.CLAIMED`) at its own
    configurations, per pass, from this run's rows and from its published times:
    ``GdnPublishedFwdVerdict`` / ``GdnPublishedBwdVerdict`` (:func:`kernels.paper.report_kit.claim_verdict`
    on the measured speedups of the configurations measured here), ``GdnPublished<Pass>Speedups``
    (those speedups, ``1.9--2.8``, and ``...Ci`` their intervals, :func:`kernels.paper.report_kit.interval`) and
    ``GdnPublished<Pass>SpeedupsTheirs`` (the published ones at
    the same configurations), ``GdnPublished<Pass>Configs`` (how many); our chunked kernels' speedup
    over FLA there, ``GdnPublished<Pass>OursVsFla`` and its ``...Ci``; FlashQLA's and FLA's device
    time here over their published time, the range over both passes' configurations of batch B
    (``GdnPublishedFlashQlaVsTheirsB<B in words>``, ``GdnPublishedFlaVsTheirsB<B>``)."""
    from kernels.gdn import published

    t = table_published(df)
    rows = _published_rows(df)
    compared = set(published.TIMES) & _configured_published()  # the configurations of table_published
    out = {}
    for pas, name in (("fwd", "Fwd"), ("bwd", "Bwd")):
        p = t[t.index.get_level_values("pass") == style.pass_label(pas)]
        measured = p["FLA/FlashQLA"].dropna()
        theirs = p.loc[measured.index, "FLA/FlashQLA, published"]
        low, high = published.CLAIMED[pas]
        out[f"GdnPublished{name}Verdict"] = kit.claim_verdict(list(measured), low, high)
        out[f"GdnPublished{name}Speedups"] = kit.span(measured)
        mine = rows[rows["config"].isin([c for c in compared if c[0] == pas])]
        out[f"GdnPublished{name}SpeedupsCi"] = kit.interval(
            kit.ratios(mine[mine["impl"].eq("fla_chunk")], mine[mine["impl"].eq("flash_qla")], ["config"]))
        out[f"GdnPublished{name}SpeedupsTheirs"] = kit.span(theirs)
        out[f"GdnPublished{name}Configs"] = str(len(measured))
        ours = kit.ratios(mine[mine["impl"].eq("fla_chunk")], mine[mine["impl"].eq("chunk")], ["config"])
        out[f"GdnPublished{name}OursVsFla"] = kit.span(kit.values(ours))
        out[f"GdnPublished{name}OursVsFlaCi"] = kit.interval(ours)
    # each anchor's time here over its published time, by the configurations' batch (both passes)
    mine = rows[rows["config"].isin(compared)]
    for impl, iname in (("flash_qla", "FlashQla"), ("fla_chunk", "Fla"), ("flashinfer", "FlashInfer")):
        d = mine[mine["impl"].eq(impl)].drop_duplicates("config")
        here_vs_theirs = d["device_ms"] / [published.TIMES[c][impl] for c in d["config"]]
        for b in sorted({c[3] for c in compared}):
            out[f"GdnPublished{iname}VsTheirsB{kit.words(b)}"] = kit.span(here_vs_theirs[d["batch"].eq(b)])
    return out


TABLES = {"gdn_main": table_main, "gdn_kernels": table_kernels, "gdn_published": table_published}
#: The tables the paper sets (:func:`kernels.paper.render.paper_tables`); the kernel breakdown is its
#: CSV file under results/tables/ alone, which the text names.
PAPER_TABLES = ("gdn_main", "gdn_published")


def _at(df, impl, b, t, h, col="device_ms", pas="fwd"):
    d = _pass(df, pas)
    s = d[(d["impl"] == impl) & (d["batch"] == b) & (d["seqlen"] == t) & (d["heads"] == h)
          & (d["varlen"] != True)][col].dropna()  # noqa: E712
    return s.iloc[0] if len(s) else None


def _vs_fla(df, impl, b, t, h, pas="fwd") -> kit.Ratio:
    """``impl``'s speedup over FLA's chunked kernels at a shape, with its interval
    (:func:`kernels.paper.report_kit.ratio` of the two rows' device times)."""
    return kit.ratio(_at(df, "fla_chunk", b, t, h, kit.DEVICE_REPS, pas), _at(df, impl, b, t, h, kit.DEVICE_REPS, pas))


def flash_qla_verdicts(df: pd.DataFrame) -> dict[str, str]:
    """Verdicts on FlashQLA's claim (2--3x FLA's forward, 2x its backward, on Hopper) from the
    rows that pair flash_qla with fla_chunk, per pass (:func:`kernels.paper.report_kit.claim_verdict` on the
    speedups over ``[2, 3]`` forward, ``[2, inf)`` backward): ``GdnFlashQlaFwdVerdict``,
    ``GdnFlashQlaBwdVerdict``."""
    out = {}
    for pas, name, high in (("fwd", "Fwd", 3.0), ("bwd", "Bwd", float("inf"))):
        d = _pass(df, pas)
        fla = kit.baseline(d, d["impl"] == "fla_chunk", SHAPE, kit.DEVICE_REPS)
        mine = d[(d["impl"] == "flash_qla") & d["speedup_vs_fla"].notna()]
        # each speedup with its interval: a value on the claimed line is neither a pass nor a miss
        s = kit.with_intervals(mine["speedup_vs_fla"].tolist(),
                               [kit.ratio(fla[i], mine.at[i, kit.DEVICE_REPS]) for i in mine.index])
        out[f"GdnFlashQla{name}Verdict"] = kit.claim_verdict(s, 2.0, high)
    return out


def fla_backward_dispatch(df: pd.DataFrame) -> dict[str, str]:
    """``GdnFlaBwdTileLang``: "true" when every timed backward row of FLA (passes ``bwd`` and
    ``fwdbwd``) records TileLang among the modules its call loaded (the row's ``dispatch``; FLA runs
    its gated ``chunk_bwd_dqkwg`` in TileLang on Hopper with Triton 3.4 to 3.7.0, FLA issue 640),
    else "false": the paper's switch ``\\ifGdnFlaBwdTileLang``."""
    rows = _tidy(df)
    return {"GdnFlaBwdTileLang": "true" if ran_tilelang(rows[(rows["impl"] == "fla_chunk") & (rows["pass"] != "fwd")])
            else "false"}


#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro.
CLAIMS = {"GdnFlashQlaFwdVerdict": "FlashQLA 2–3× FLA's forward on Hopper",
          "GdnFlashQlaBwdVerdict": "FlashQLA 2× FLA's backward on Hopper",
          "GdnPublishedFwdVerdict": "FlashQLA 2–3× FLA's forward at its own configurations",
          "GdnPublishedBwdVerdict": "FlashQLA 2× FLA's backward at its own configurations"}

#: Each claim of :data:`CLAIMS` in a few words, by verdict macro: the label of its values in the
#: across-GPU table (:mod:`kernels.paper.uncertainty`).
CLAIM_NAMES = {"GdnFlashQlaFwdVerdict": "FlashQLA forward",
               "GdnFlashQlaBwdVerdict": "FlashQLA backward",
               "GdnPublishedFwdVerdict": "FlashQLA forward, its configurations",
               "GdnPublishedBwdVerdict": "FlashQLA backward, its configurations"}


def paper_shapes(sweep: dict) -> dict[str, dict[tuple, str]]:
    """The (batch, seqlen, heads) the text quotes numbers at, each with its name in the macros
    (:func:`kernels.paper.report_kit.shape_name` of batch and seqlen, ``BFourTEightK``), from the config
    section ``sweep``: ``main`` its main shapes, ``backward`` those of its backward, ``step`` those
    and the backward's seqlen sweep, ``profile`` the main shapes marked ``profile``; shapes with
    ``value_heads`` are left out (the published configurations)."""
    def names(entries, key):
        return kit.shape_names([e for e in entries if "value_heads" not in e], key, {"B": "batch", "T": "seqlen"},
                               ("batch", "seqlen", "heads"))

    bwd = sweep["backward"]
    sw = bwd["seqlen_sweep"]
    sweep_shapes = [{"batch": sw["batch"], "seqlen": t, "heads": sw["heads"]} for t in sw["seqlens"]]
    return {"main": names(sweep["main_shapes"], "sweep.main_shapes"),
            "backward": names(bwd["main_shapes"], "sweep.backward.main_shapes"),
            "step": names(bwd["main_shapes"] + sweep_shapes, "sweep.backward"),
            "profile": names([e for e in sweep["main_shapes"] if e.get("profile")], "sweep.main_shapes")}


def _headlines() -> dict[str, str]:
    """The abstract's numbers at the sweep's first main shape (B4 T8192 H16), by macro, in the
    abstract's words. ValueError when the backward's main shapes leave that shape out."""
    shapes = paper_shapes(kit.study_config("gdn"))
    (b, t, h), tag = next(iter(shapes["main"].items()))
    if (b, t, h) not in shapes["backward"]:
        raise ValueError(f"config gdn.sweep.backward.main_shapes: the abstract quotes the backward at the first "
                         f"main shape, B{b} T{t} H{h}, which it does not list")
    return {f"GdnChunkSpeedupVsFla{tag}": f"Gated DeltaNet chunked forward over FLA, B{b} T{t} H{h}, ×",
            f"GdnChunkBwdSpeedupVsFla{tag}": f"Gated DeltaNet chunked backward over FLA, B{b} T{t} H{h}, ×",
            f"GdnFlashQlaSpeedupVsFla{tag}": "FlashQLA's forward over FLA, ×"}


#: The study's headline numbers that :func:`macros` gives, by macro, in words (the
#: reproduction appendix sets them beside the second run's).
HEADLINES = _headlines()

#: The implementations each verdict of :data:`CLAIMS` cannot be decided without, by verdict macro: on
#: a GPU where one of them has rows and none timed ok, the claim is "not testable"
#: (:func:`kernels.paper.quick.untestable`).
CLAIM_IMPLS = {name: ("flash_qla", "fla_chunk") for name in CLAIMS}

#: The values each verdict of :data:`CLAIMS` compares, by verdict macro: ``(macro, words)`` pairs, each
#: printed as its value, the words and its interval (:func:`kernels.paper.models.evidence_text`: each
#: GPU model's claims side by side).
_SHAPES = paper_shapes(kit.study_config("gdn"))
EVIDENCE = {"GdnFlashQlaFwdVerdict": tuple((f"GdnFlashQlaSpeedupVsFla{tag}", f"× B{b} T{t} H{h}") for (b, t, h), tag
                                      in _SHAPES["main"].items()),
            "GdnFlashQlaBwdVerdict": tuple((f"GdnFlashQlaBwdSpeedupVsFla{tag}", f"× B{b} T{t} H{h}") for (b, t, h), tag
                                      in _SHAPES["backward"].items()),
            "GdnPublishedFwdVerdict": (("GdnPublishedFwdSpeedups", "×"),),
            "GdnPublishedBwdVerdict": (("GdnPublishedBwdSpeedups", "×"),)}


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text: forward times, speedups and TFLOP/s at the main
    shapes, the speedup over naive at the largest seqlen naive ran (and that
    shape, both times there and naive's per token, µs: ``GdnChunkMsAtNaiveMax``,
    ``GdnNaiveMsAtNaiveMax``, ``GdnNaiveUsPerToken``); ``chunk``'s and FLA's forward on the longest packed-sequence case
    (``Gdn<Impl>VarlenMs``, ``GdnVarlenCase``); backward and forward + backward times, speedups over FLA and peak
    memory at the backward's main shapes (``Gdn<Impl>Bwd...``, ``Gdn<Impl>Fwdbwd...``);
    each speedup over FLA's 95 % interval (``...Ci``, :func:`kernels.paper.report_kit.interval`);
    the summed kernel time of the forward at the profiled shape (``Gdn<Impl>KernelMs...``, from
    the breakdown); FlashQLA's speedups over FLA and the verdict on its
    claim (:func:`flash_qla_verdicts`); whether FLA's backward ran TileLang kernels
    (:func:`fla_backward_dispatch`); a training step's device time against its forward and backward
    timed apart (``Gdn<Impl>FwdbwdMs<shape>``, ``Gdn<Impl>FwdPlusBwdMs<shape>``); the host overhead
    per call (latency minus device time) at the profiled shape (``Gdn<Impl><Pass>HostUs<shape>``,
    µs) beside the host's time to enqueue one call, measured alone (``Gdn<Impl><Pass>EnqueueUs<shape>``,
    µs, the row's ``timing.enqueue_us``) and the kernels a forward launches (``Gdn<Impl>KernelLaunches<shape>``,
    from the breakdown); the largest
    output and gradient RMSE/RMS of ``chunk`` against float64 (``GdnChunkOutErrMax``,
    ``GdnChunkGradErrMax``). The shapes and their names: :func:`paper_shapes` of the config's
    ``sweep``, the section the paper's rows are measured with."""
    m = {}
    shapes = paper_shapes(kit.study_config("gdn"))
    for (b, t, h), tag in shapes["main"].items():
        for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla"),
                            ("flashinfer", "FlashInfer"), ("recurrent", "Recurrent")):
            m[f"Gdn{iname}Ms{tag}"] = kit.fmt(_at(df, impl, b, t, h), 3)
        m[f"GdnChunkSpeedupVsFla{tag}"] = kit.fmt(_at(df, "chunk", b, t, h, "speedup_vs_fla"), 2)
        m[f"GdnChunkRatioToFlashQla{tag}"] = kit.fmt(_at(df, "chunk", b, t, h, "ratio_to_flash_qla"), 2)
        m[f"GdnChunkRatioToFlashInfer{tag}"] = kit.fmt(_at(df, "chunk", b, t, h, "ratio_to_flashinfer"), 2)
        m[f"GdnFlashInferRatioToFlashQla{tag}"] = kit.fmt(_at(df, "flashinfer", b, t, h, "ratio_to_flash_qla"), 2)
        for impl, iname in (("flash_qla", "FlashQla"), ("flashinfer", "FlashInfer")):
            m[f"Gdn{iname}SpeedupVsFla{tag}"] = kit.fmt(_at(df, impl, b, t, h, "speedup_vs_fla"), 2)
        for impl, iname in (("chunk", "Chunk"), ("flash_qla", "FlashQla"), ("flashinfer", "FlashInfer")):
            m[f"Gdn{iname}SpeedupVsFla{tag}Ci"] = kit.interval(_vs_fla(df, impl, b, t, h))
        m[f"GdnChunkTflops{tag}"] = kit.fmt(_at(df, "chunk", b, t, h, "tflops"), 0)
    for (b, t, h), tag in shapes["backward"].items():
        for pas, pname in (("bwd", "Bwd"), ("fwdbwd", "Fwdbwd")):
            for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla")):
                m[f"Gdn{iname}{pname}Ms{tag}"] = kit.fmt(_at(df, impl, b, t, h, pas=pas), 3)
            m[f"GdnChunk{pname}SpeedupVsFla{tag}"] = kit.fmt(_at(df, "chunk", b, t, h, "speedup_vs_fla", pas), 2)
            m[f"GdnChunk{pname}RatioToFlashQla{tag}"] = kit.fmt(_at(df, "chunk", b, t, h, "ratio_to_flash_qla", pas), 2)
            m[f"GdnFlashQla{pname}SpeedupVsFla{tag}"] = kit.fmt(_at(df, "flash_qla", b, t, h, "speedup_vs_fla", pas), 2)
            for impl, iname in (("chunk", "Chunk"), ("flash_qla", "FlashQla")):
                m[f"Gdn{iname}{pname}SpeedupVsFla{tag}Ci"] = kit.interval(_vs_fla(df, impl, b, t, h, pas))
        for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla")):
            m[f"Gdn{iname}FwdbwdPeakGib{tag}"] = kit.fmt(_at(df, impl, b, t, h, "peak_mem_gib", "fwdbwd"), 2)
    m.update(flash_qla_verdicts(df))
    m.update(published_verdicts(df))
    m.update(fla_backward_dispatch(df))
    # A training step timed whole against its forward and backward timed apart: where the step's device
    # time is longer, the GPU idled inside it waiting for the host.
    for (b, t, h), tag in shapes["step"].items():
        for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla")):
            whole = _at(df, impl, b, t, h, pas="fwdbwd")
            parts = [_at(df, impl, b, t, h, pas=p) for p in ("fwd", "bwd")]
            apart = None if None in parts else sum(parts)
            m.setdefault(f"Gdn{iname}FwdbwdMs{tag}", kit.fmt(whole, 3))  # the main shapes have theirs
            m[f"Gdn{iname}FwdPlusBwdMs{tag}"] = kit.fmt(apart, 3)
    for (b, t, h), tag in shapes["profile"].items():
        for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flash_qla", "FlashQla"),
                            ("flashinfer", "FlashInfer")):
            for pas, pname in (("fwd", "Fwd"), ("fwdbwd", "Fwdbwd")):  # latency minus device time, µs
                host = _at(df, impl, b, t, h, "host_overhead_ms", pas)
                m[f"Gdn{iname}{pname}HostUs{tag}"] = kit.fmt(None if host is None else host * 1e3, 0)
                m[f"Gdn{iname}{pname}EnqueueUs{tag}"] = kit.fmt(_at(df, impl, b, t, h, "timing_enqueue_us", pas), 0)
            cell = _at(df, impl, b, t, h, "kernels")
            breakdown = json.loads(cell) if isinstance(cell, str) else None
            m[f"Gdn{iname}KernelMs{tag}"] = kit.fmt(None if breakdown is None else
                                                    sum(e["us"] for e in breakdown) / 1e3, 3)
            m[f"Gdn{iname}KernelLaunches{tag}"] = kit.fmt(None if breakdown is None else
                                                          sum(e["calls"] for e in breakdown), 0)
    rows = _tidy(df)
    g = rows[(rows["impl"] == "chunk") & (rows["pass"] != "fwd")][GRAD_ERRORS].astype(float)
    m["GdnChunkGradErrMax"] = kit.fmt(g.max().max() if g.notna().any().any() else None, 4)
    o = rows.loc[rows["impl"] == "chunk", "rel_err"].astype(float)
    m["GdnChunkOutErrMax"] = kit.fmt(o.max() if o.notna().any() else None, 4)
    fwd = _pass(df, "fwd")
    v = fwd[(fwd["varlen"] == True) & fwd["device_ms"].notna()]  # noqa: E712
    if len(v):  # the longest packed case, its rows of every impl
        case = v.sort_values(["seqlen", "num_seqs"]).iloc[-1]
        v = v[(v["seqlen"] == case["seqlen"]) & (v["num_seqs"] == case["num_seqs"]) & (v["heads"] == case["heads"])]
        m["GdnVarlenCase"] = f"{int(case['num_seqs'])} sequences, T{int(case['seqlen'])} H{int(case['heads'])}"
    else:
        m["GdnVarlenCase"] = "n/a"
    for impl, iname in (("chunk", "Chunk"), ("fla_chunk", "Fla"), ("flashinfer", "FlashInfer")):
        s = v.loc[v["impl"] == impl, "device_ms"]
        m[f"Gdn{iname}VarlenMs"] = kit.fmt(s.iloc[0] if len(s) else None, 3)
    d = fwd[(fwd["impl"] == "chunk") & fwd["speedup_vs_naive"].notna()]
    if len(d):
        row = d.assign(tokens=d["batch"] * d["seqlen"] * d["heads"]).sort_values(["seqlen", "tokens"]).iloc[-1]
        m["GdnChunkSpeedupVsNaive"] = kit.fmt(row["speedup_vs_naive"], 0)
        m["GdnNaiveMaxShape"] = f"B{int(row['batch'])} T{int(row['seqlen'])} H{int(row['heads'])}"
        m["GdnChunkMsAtNaiveMax"] = kit.fmt(row["device_ms"], 3)
        m["GdnNaiveMsAtNaiveMax"] = kit.fmt(row["device_ms"] * row["speedup_vs_naive"], 0)
        m["GdnNaiveUsPerToken"] = kit.fmt(1e3 * row["device_ms"] * row["speedup_vs_naive"] / row["seqlen"], 0)
    else:
        m["GdnChunkSpeedupVsNaive"] = m["GdnNaiveMaxShape"] = "n/a"
        m["GdnChunkMsAtNaiveMax"] = m["GdnNaiveMsAtNaiveMax"] = m["GdnNaiveUsPerToken"] = "n/a"
    return m
