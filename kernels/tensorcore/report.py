"""Figure, table and quoted numbers of the tensor-core study, built on kernels.paper.report_kit.

Derived metrics (:func:`derive`), per row, from ``tflops`` (2 M N K FLOPs over the device time,
the collect step's):

``speedup_padded``   bf16 rows of a padding set (those with ``aligned``): the TFLOP/s of the set's
                     aligned size over this row's, same gpu (1 at the aligned size; above 1:
                     padding to it gains);
``speedup_vs_bf16``  fp8 rows: this row's TFLOP/s over bf16's at the same gpu, m, n and k.

The figure and the table draw every row they are given (the smoke run's too); the macros are
named after the config's sweep (:func:`paper_sizes`), the section the paper's rows are measured
with. The claims' verdicts (:func:`kernels.paper.report_kit.claim_verdict`) compare ``speedup_padded`` of
every unaligned neighbour, and ``speedup_vs_bf16`` of every FP8 size, with the claimed 2-4x.
"""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.paper.rows import ROLES
from kernels.tensorcore.impls import IMPLS

#: The implementations in the order of legends and tables (their registry's).
ORDER = tuple(IMPLS)
#: The tidy table's columns that the report reads: a table without them (the tidy CSV of a study
#: without rows, read back) gets them all NaN (:func:`kernels.paper.report_kit.tidy_frame`).
COLUMNS = ["gpu", "impl", "status", "dtype", "m", "n", "k", "aligned", "device_ms", "tflops", "warmup_ms", "flops",
           "env_sm_clock_mhz", ROLES, kit.DEVICE_REPS]
#: The range both claims give, as a factor (lower, upper).
CLAIMED = (2.0, 4.0)
#: Opacity of an unaligned size's bar against its aligned size's.
UNALIGNED_ALPHA = 0.45


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``speedup_padded`` and ``speedup_vs_bf16`` (NaN where they do not apply or a row they
    compare was not timed)."""
    df = kit.tidy_frame(df, COLUMNS).copy()
    bf16 = df["impl"].eq("bf16") & df["status"].eq("ok") & df["tflops"].notna()
    aligned = kit.baseline(df, bf16 & df["m"].eq(df["aligned"]), ["gpu", "aligned"], "tflops")
    df["speedup_padded"] = (aligned / df["tflops"]).where(df["impl"].eq("bf16") & df["aligned"].notna())
    base = kit.baseline(df, bf16, ["gpu", "m", "n", "k"], "tflops")
    df["speedup_vs_bf16"] = (df["tflops"] / base).where(df["impl"].eq("fp8"))
    return df


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    """The timed rows, derived."""
    d = derive(df)
    return d[d["status"].eq("ok") & d["tflops"].notna()]


def _label(impl: str) -> str:
    return style.label("tensorcore", impl)


# ----------------------------------------------------------------------------
# figure


def _padding_panel(ax, d: pd.DataFrame) -> None:
    """bf16 TFLOP/s per size of each padding set, the sets side by side (smallest aligned size
    first), each unaligned bar labelled with ``speedup_padded``."""
    pad = kit.with_role(d, "padding")
    pad = pad[pad["impl"].eq("bf16")].sort_values(["aligned", "m"])
    ax.set_title("padding (bf16)")
    if pad.empty:
        kit.mark_empty(ax)
        return
    color = style.palette("tensorcore", ["bf16"])["bf16"]
    xs, x = [], 0.0
    for _, group in pad.groupby("aligned", sort=True):
        xs += [x + i for i in range(len(group))]
        x = xs[-1] + 1.6  # a gap between sets
    is_aligned = pad["m"].eq(pad["aligned"]).to_numpy()
    xs, tflops = np.asarray(xs), pad["tflops"].to_numpy(dtype=float)
    ax.bar(xs[is_aligned], tflops[is_aligned], 0.8, color=color, label=_label("bf16"))
    ax.bar(xs[~is_aligned], tflops[~is_aligned], 0.8, color=mcolors.to_rgba(color, UNALIGNED_ALPHA),
           label=f"{_label('bf16')}, neighbouring size")
    for xi, t, s in zip(xs[~is_aligned], tflops[~is_aligned], pad["speedup_padded"].to_numpy()[~is_aligned]):
        if np.isfinite(s):
            ax.annotate(f"{s:.2f}×", (xi, t), ha="center", va="bottom", fontsize=7)
    ax.set_ylim(0, np.nanmax(tflops) * 1.12)  # room for the labels above the tallest bars
    ax.set_xticks(xs, [str(int(m)) for m in pad["m"]], fontsize=6)


def _fp8_panel(ax, d: pd.DataFrame) -> None:
    """FP8 and bf16 TFLOP/s at each FP8 size, the FP8 bars labelled with ``speedup_vs_bf16``."""
    f8 = kit.with_role(d, "fp8").sort_values("m")
    ax.set_title("FP8 against BF16")
    if f8.empty:
        kit.mark_empty(ax)
        return
    f8 = f8.assign(size=f8["m"].astype(int).astype(str))
    impls = kit.ordered(f8["impl"], ORDER)
    centres = kit.grouped_bars(ax, f8, "tflops", "size", impls, style.palette("tensorcore", impls),
                               {i: _label(i) for i in impls})
    if "fp8" in impls:
        sizes = list(dict.fromkeys(f8["size"]))
        rows = f8[f8["impl"].eq("fp8")]
        for size, t, s in zip(rows["size"], rows["tflops"], rows["speedup_vs_bf16"]):
            if np.isfinite(s):
                ax.annotate(f"{s:.2f}×", (centres["fp8"][sizes.index(size)], t), ha="center",
                            va="bottom", fontsize=7)
        ax.set_ylim(0, f8["tflops"].max() * 1.12)  # room for the labels above the bars


def fig_gemm(df: pd.DataFrame):
    """Tensor-core GEMM throughput (M = N = K; TFLOP/s by device time). Left: bf16 at each set's
    aligned size (dark) and its neighbours (light), labelled with the aligned size's TFLOP/s over
    theirs. Right: FP8 e4m3 against bf16, labelled with FP8's over bf16's."""
    d = _ok(df)
    fig, axes = style.figure(width=style.FULL_WIDTH, height=1.7, ncols=2, squeeze=False,
                             gridspec_kw={"width_ratios": [2, 1]})
    _padding_panel(axes[0][0], d)
    _fp8_panel(axes[0][1], d)
    for ax in axes[0]:
        ax.set_xlabel("M = N = K")
        ax.set_ylabel("TFLOP/s")
    fig.tight_layout()
    style.legend_below(fig, axes[0], ncol=3)
    return fig


FIGURES = {"tensorcore_gemm": fig_gemm}


# ----------------------------------------------------------------------------
# table


def table_gemm(df: pd.DataFrame) -> pd.DataFrame:
    """Tensor-core GEMMs (M = N = K, bfloat16 output): median device time (ms) and TFLOP/s of every
    timed case; padded speedup: the TFLOP/s of the padding set's aligned size over the row's; FP8
    speedup: FP8's TFLOP/s over bf16's at the same size."""
    d = _ok(df)
    if d.empty:
        return pd.DataFrame()
    rank = {impl: i for i, impl in enumerate(ORDER)}
    d = d.assign(_rank=d["impl"].map(lambda i: rank.get(i, len(rank)))).sort_values(
        ["_rank", "aligned", "m"], na_position="last")
    table = pd.DataFrame({"implementation": d["impl"].map(_label), "M=N=K": d["m"].astype(int),
                          "ms": d["device_ms"].astype(float).round(3),
                          "TFLOP/s": d["tflops"].astype(float).round(0),
                          "padded speedup": d["speedup_padded"].astype(float).round(2),
                          "FP8 speedup": d["speedup_vs_bf16"].astype(float).round(2)})
    return table.set_index(["implementation", "M=N=K"])


TABLES = {"tensorcore_table": table_gemm}
#: The tables the paper sets: none (the table is results/tables/tensorcore_table.csv, which the paper names).
PAPER_TABLES = ()


# ----------------------------------------------------------------------------
# macros


def neighbour_name(aligned: int, size: int) -> str:
    """A padding set's size in a macro name, after its aligned size (:func:`kernels.paper.report_kit.size_name`)
    and its offset in words: ``(8192, 8191)`` -> ``EightKMinusOne``, ``(8192, 8256)`` ->
    ``EightKPlusSixtyFour``, ``(8192, 8192)`` -> ``EightK``. ValueError where a size has no macro
    name (an aligned size above 999 that is not a whole number of K, an offset above 999)."""
    offset = size - aligned
    if offset == 0:
        return kit.size_name(aligned)
    return kit.size_name(aligned) + ("Plus" if offset > 0 else "Minus") + kit.words(abs(offset))


def paper_sizes(sweep: dict) -> dict:
    """The sizes the macros are named after, from a config section (the ``sweep``): ``padding``,
    ``{aligned: [(size, name), ...]}`` (the aligned size first, then its neighbours, named by
    :func:`neighbour_name`), and ``fp8``, ``[(size, name), ...]`` (:func:`kernels.paper.report_kit.size_name`)."""
    return {"padding": {g["aligned"]: [(s, neighbour_name(g["aligned"], s)) for s in (g["aligned"], *g["unaligned"])]
                        for g in sweep["padding"]},
            "fp8": [(s, kit.size_name(s)) for s in sweep["fp8"]]}


def _at(d: pd.DataFrame, impl: str, size: int, col: str) -> float:
    """``col`` of ``impl`` at M = N = K = ``size`` in ``d`` (NaN where it was not timed)."""
    return kit.median(d, col, impl=impl, m=size, n=size, k=size)


def _throughput_ratio(d: pd.DataFrame, impl: str, size: int, base_impl: str, base_size: int) -> kit.Ratio:
    """``impl``'s TFLOP/s at ``size`` over ``base_impl``'s at ``base_size`` with its interval: the
    ratio of the device times (:func:`kernels.paper.report_kit.ratio`) times that of the FLOPs."""
    def row(i, n):
        return d[d["impl"].eq(i) & d["m"].eq(n) & d["n"].eq(n) & d["k"].eq(n)]

    mine, base = row(impl, size), row(base_impl, base_size)
    return kit.ratio(kit.first(base, kit.DEVICE_REPS), kit.first(mine, kit.DEVICE_REPS),
                     float(kit.first(mine, "flops")) / float(kit.first(base, "flops")))


#: Elements of bfloat16 in 16 bytes: the padding set's neighbours that are a multiple of it
#: ("RowAligned", 8200, 8256, ...) and those that are not ("Odd", 8191, 8193, ...) are quoted apart.
ROW_ALIGN = 8
#: The padding the claim names (multiples of 64 or 128 elements): of the 16-byte multiples, those
#: that are a multiple of it as well ("SixtyFour", 4160, 8256: padding them to the aligned size is
#: padding from 64 to 128) and those that are not ("Eight", 4104, 8200) are quoted apart too.
CLAIM_ALIGN = 64

#: Which neighbours each group of padding macros covers (:func:`macros`), by the group's name.
NEIGHBOUR_GROUPS = {"Odd": lambda n: n % ROW_ALIGN != 0,
                    "RowAligned": lambda n: n % ROW_ALIGN == 0,
                    "Eight": lambda n: n % ROW_ALIGN == 0 and n % CLAIM_ALIGN != 0,
                    "SixtyFour": lambda n: n % CLAIM_ALIGN == 0}

#: The claims of the paper's claims table that :func:`macros` decides, by verdict macro.
CLAIMS = {"TensorcorePaddingVerdict": "Padding matrix dimensions to multiples of 64/128: 2–4× tensor-core FLOP "
                                      "throughput",
          "TensorcoreFpEightVerdict": "FP8 tensor cores: 2–4× BF16's FLOP throughput per clock"}

#: The verdict on FP8's claim, which is of throughput per clock: the rows time each GEMM by its device
#: time at the clocks the GPU runs (as found, under its power limit), and record the SM clock only before
#: and after each case, so the ratio they give is per second; it is quoted as context
#: (``TensorcoreFpEightSpeedup...``), not judged against a claim it does not measure.
FP8_VERDICT = f"{style.NOT_TESTED} (per clock)"

#: Each claim of :data:`CLAIMS` in a few words, by verdict macro: the label of its values in the
#: across-GPU table (:mod:`kernels.paper.uncertainty`).
CLAIM_NAMES = {"TensorcorePaddingVerdict": "padding",
               "TensorcoreFpEightVerdict": "FP8 over BF16"}

#: The implementations each verdict of :data:`CLAIMS` cannot be decided without, by verdict macro: on
#: a GPU where one of them has rows and none timed ok, the claim is "not testable"
#: (:func:`kernels.paper.quick.untestable`).
CLAIM_IMPLS = {"TensorcorePaddingVerdict": ("bf16",),
               "TensorcoreFpEightVerdict": ("fp8", "bf16")}

#: The values each verdict of :data:`CLAIMS` compares, by verdict macro: ``(macro, words)`` pairs, each
#: printed as its value, the words and its interval (:func:`kernels.paper.models.evidence_text`: each
#: GPU model's claims side by side).
EVIDENCE = {"TensorcorePaddingVerdict": (("TensorcorePaddedSpeedupOddRange", "× over odd sizes"),
                                         ("TensorcorePaddedSpeedupRowAlignedRange", "× over 16-byte multiples")),
            "TensorcoreFpEightVerdict": (("TensorcoreFpEightSpeedupFourK", "× per second at 4096³"),
                                         ("TensorcoreFpEightSpeedupEightK", "× per second at 8192³"))}


def macros(df: pd.DataFrame) -> dict[str, str]:
    """Numbers quoted in the text, at the sizes of the config's sweep (:func:`paper_sizes`):
    bf16 TFLOP/s at every padding size (``TensorcoreBfSixteenTflops<name>``, e.g.
    ``...EightK``, ``...EightKMinusOne``), the aligned size's over each neighbour's
    (``TensorcorePaddedSpeedup<name>``) and their range (``TensorcorePaddedSpeedupRange``), apart
    for the neighbours that are not a multiple of :data:`ROW_ALIGN` and those that are
    (``TensorcorePaddedSpeedupOddRange``, ``...RowAlignedRange``, and the sizes measured of each,
    ``TensorcorePaddedOddSizes``, ``...RowAlignedSizes``), and of those, apart, the ones that are not
    a multiple of :data:`CLAIM_ALIGN` and the ones that are (``...EightRange``, ``...SixtyFourRange``,
    ``TensorcorePaddedEightSizes``, ``...SixtyFourSizes``; :data:`NEIGHBOUR_GROUPS`); FP8 and
    bf16 TFLOP/s at every FP8 size (``TensorcoreFpEightTflops<size>``, ``TensorcoreBfSixteenTflops<size>``),
    FP8's over bf16's (``TensorcoreFpEightSpeedup<size>``) and their range; each ratio's and range's
    95 % interval (``...Ci``, :func:`kernels.paper.report_kit.interval`); the verdict on the
    claimed 2-4x of padding (``TensorcorePaddingVerdict``) and, where FP8 was measured at a sweep size, FP8's
    (``TensorcoreFpEightVerdict``, :data:`FP8_VERDICT`); the SM clock that the
    FP8 comparison's rows of each dtype record (``TensorcoreStartClock{BfSixteen,FpEight}``, MHz: read
    once, when the row's job starts, before its warm-up; not the clock of the timed calls); the warm-up of the
    sweep's cases (``TensorcoreWarmupMs``, its ``warmup_ms``); ``TensorcoreMeasured`` ("true" when a
    row was timed, else "false": the paper's switch ``\\ifTensorcoreMeasured``). 'n/a' where not
    measured."""
    sizes = paper_sizes(kit.study_config("tensorcore"))
    d = _ok(df)
    out = {}
    pad, neighbours, padded, padded_ci = kit.with_role(d, "padding"), [], [], []
    for aligned, named in sizes["padding"].items():
        for size, name in named:
            out[f"TensorcoreBfSixteenTflops{name}"] = kit.fmt(_at(pad, "bf16", size, "tflops"), 0)
            if size != aligned:
                neighbours.append(size)
                padded.append(_at(pad, "bf16", size, "speedup_padded"))
                padded_ci.append(_throughput_ratio(pad, "bf16", aligned, "bf16", size))
                out[f"TensorcorePaddedSpeedup{name}"] = kit.fmt(padded[-1])
                out[f"TensorcorePaddedSpeedup{name}Ci"] = kit.interval(padded_ci[-1])
    out["TensorcorePaddedSpeedupRange"] = kit.span(padded)
    out["TensorcorePaddedSpeedupRangeCi"] = kit.interval(padded_ci)
    for kind, keep in NEIGHBOUR_GROUPS.items():
        pick = [i for i, n in enumerate(neighbours) if keep(n) and np.isfinite(padded[i])]
        out[f"TensorcorePaddedSpeedup{kind}Range"] = kit.span([padded[i] for i in pick])
        out[f"TensorcorePaddedSpeedup{kind}RangeCi"] = kit.interval([padded_ci[i] for i in pick])
        out[f"TensorcorePadded{kind}Sizes"] = kit.and_list([str(neighbours[i]) for i in pick]) or style.MISSING
    out["TensorcorePaddingVerdict"] = kit.claim_verdict(kit.with_intervals(padded, padded_ci), *CLAIMED)
    f8, fp8, fp8_ci = kit.with_role(d, "fp8"), [], []
    for size, name in sizes["fp8"]:
        out[f"TensorcoreBfSixteenTflops{name}"] = kit.fmt(_at(f8, "bf16", size, "tflops"), 0)
        out[f"TensorcoreFpEightTflops{name}"] = kit.fmt(_at(f8, "fp8", size, "tflops"), 0)
        fp8.append(_at(f8, "fp8", size, "speedup_vs_bf16"))
        fp8_ci.append(_throughput_ratio(f8, "fp8", size, "bf16", size))
        out[f"TensorcoreFpEightSpeedup{name}"] = kit.fmt(fp8[-1])
        out[f"TensorcoreFpEightSpeedup{name}Ci"] = kit.interval(fp8_ci[-1])
    out["TensorcoreFpEightSpeedupRange"] = kit.span(fp8)
    out["TensorcoreFpEightSpeedupRangeCi"] = kit.interval(fp8_ci)
    out["TensorcoreFpEightVerdict"] = FP8_VERDICT if np.isfinite(fp8).any() else style.MISSING
    for impl, name in (("bf16", "BfSixteen"), ("fp8", "FpEight")):
        clocks = pd.to_numeric(f8.loc[f8["impl"].eq(impl), "env_sm_clock_mhz"], errors="coerce")
        out[f"TensorcoreStartClock{name}"] = kit.span(clocks, 0)
    out["TensorcoreWarmupMs"] = kit.fmt(kit.study_config("tensorcore").get("warmup_ms"), 0)
    out["TensorcoreMeasured"] = "true" if len(d) else "false"
    return out
