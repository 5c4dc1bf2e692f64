"""The reproduction check's tables and figure (:mod:`kernels.paper.reproduce` judges,
:mod:`kernels.paper.reproduce_report` writes them): the rows timed in both runs by size and by
implementation, the rows outside the tolerance, the figure of the ratios, and a LaTeX table's column spec
(:func:`with_columns`)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd

from kernels.paper import style
from kernels.paper import reproduce as judge

#: Verdicts that make a run not reproduced; the table lists these rows, in this order.
OUTSIDE = ("status changed", "missing", "slower", "faster")
#: Marker and colour of each study's cases in the figure, in turn (one per study of the project;
#: a study beyond them starts the list again).
STUDY_MARKERS = (("o", "#4C72B0"), ("s", "#DD8452"), ("^", "#55A868"), ("D", "#C44E52"), ("v", "#8172B3"))
#: Classes of the reference's device time, ms (lower bounds; the last is open), with their labels.
SIZE_CLASSES = ((0.0, "below 10 µs"), (0.01, "10–100 µs"), (0.1, "0.1–1 ms"), (1.0, "1–10 ms"),
                (10.0, "10 ms and more"))


def size_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows timed in both runs by the reference's device time (:data:`SIZE_CLASSES`):
    columns ``device time`` (the class), ``rows``, ``within`` (reproduced), ``within %``,
    ``host-bound`` (rows of :func:`kernels.core.timing.host_bound` in either run) and ``within,
    host-free`` (reproduced rows among the others); empty classes are left out."""
    timed = table[table["verdict"].isin(judge.TIMED)]
    bounds = [lo for lo, _ in SIZE_CLASSES] + [np.inf]
    cls = pd.cut(timed["ms_reference"].astype(float), bounds, right=False, labels=[lab for _, lab in SIZE_CLASSES])
    out = []
    for label, g in timed.groupby(cls, observed=True):
        ok, host = g["verdict"] == "reproduced", g["host_bound"].astype(bool)
        out.append({"device time": label, "rows": len(g), "within": int(ok.sum()),
                    "within %": judge.percent(int(ok.sum()), len(g)), "host-bound": int(host.sum()),
                    "within, host-free": f"{int((ok & ~host).sum())} of {int((~host).sum())}"})
    return pd.DataFrame(out)


def impl_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per study and implementation with a row outside the tolerance: ``rows`` timed in both,
    ``slower``, ``faster``, ``host-bound`` among those outside, and the ``median ratio`` of
    the device time over all its timed rows; most rows outside first."""
    timed = table[table["verdict"].isin(judge.TIMED)]
    out = []
    for (study, impl), g in timed.groupby(["study", "impl"]):
        outside = g[g["verdict"] != "reproduced"]
        if len(outside):
            out.append({"study": style.study_label(study), "implementation": style.label(study, impl),
                        "rows": len(g),
                        "slower": int((outside["verdict"] == "slower").sum()),
                        "faster": int((outside["verdict"] == "faster").sum()),
                        "host-bound": int(outside["host_bound"].astype(bool).sum()),
                        "median ratio": f"{g['ratio'].astype(float).median():.3f}"})
    if not out:
        return pd.DataFrame()
    d = pd.DataFrame(out)
    most = (d["slower"] + d["faster"]).sort_values(ascending=False, kind="stable").index
    return d.loc[most].reset_index(drop=True)


def outside_table(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of the second run (2nd) outside the tolerance, worst first: status changes, missing rows, then
    slower and faster rows by how far their ratio (of the device time) lies from 1; band: each run's q10
    and q90 over its median; every case of both runs: results/reproduction.csv.

    The paper names it by its CSV file (:func:`outside_csv`); its columns without a row where none is
    outside."""
    d = table[table["verdict"].isin(OUTSIDE)].copy()
    d["_rank"] = d["verdict"].map({v: i for i, v in enumerate(OUTSIDE[:2])}).fillna(len(OUTSIDE))
    d["_far"] = -np.abs(np.log(d["ratio"].astype(float)))
    d = d.sort_values(["_rank", "_far", "study", "impl", "case"], kind="stable")

    def band(r, run):
        lo, hi = getattr(r, f"band_lo_{run}"), getattr(r, f"band_hi_{run}")
        return "" if pd.isna(lo) else f"{lo:.2f}-{hi:.2f}"

    return pd.DataFrame({
        "study": [style.study_label(x) for x in d["study"]],
        "implementation": [style.label(a, b) for a, b in zip(d["study"], d["impl"])],
        "case": d["case"].tolist(),
        "ref. ms": d["ms_reference"].map(_ms).tolist(), "2nd ms": d["ms_candidate"].map(_ms).tolist(),
        "ratio": d["ratio"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}").tolist(),
        "ref. band": [band(r, "reference") for r in d.itertuples()],
        "2nd band": [band(r, "candidate") for r in d.itertuples()],
        "verdict": [f"{a} to {b}" if v == "status changed" else v + (", host-bound" if h is True else "")
                    for v, a, b, h in zip(d["verdict"], d["status_reference"], d["status_candidate"], d["host_bound"])]})


def outside_csv(outside: pd.DataFrame) -> str:
    """``outside`` (:func:`outside_table`) as the CSV file a reader opens in place of a page of the paper
    (``results/tables/reproduction_outside.csv``): a first line ``# <its caption>`` (read it with
    ``pandas.read_csv(path, comment="#")``), then its rows."""
    caption = " ".join(outside_table.__doc__.strip().split("\n\n")[0].split())
    return f"# {caption}\n" + outside.to_csv(index=False, lineterminator="\n")


def with_columns(tabular: str, spec: str) -> str:
    """``tabular`` (:func:`kernels.paper.render.table_to_latex`) with the column spec ``spec``."""
    head, rest = tabular.split("\n", 1)
    return re.sub(r"\{[^{}]*\}$", lambda _: "{" + spec + "}", head) + "\n" + rest.rstrip("\n")


def _ms(value) -> str:
    """A time in ms without an exponent: four decimals below 1 ms, three to 100 ms, none above."""
    if pd.isna(value):
        return ""
    return f"{value:.4f}" if value < 1 else f"{value:.3f}" if value < 100 else f"{value:.0f}"


def figure(table: pd.DataFrame, tolerance: float):
    """Reproduction: each case's device time in the second run over the reference run's, against
    the reference's device time (log scales; shaded: within the tolerance), per study; the
    legend counts the cases within the tolerance of those timed in both (and any case missing
    from the second run or whose status changed)."""
    from matplotlib import ticker

    fig, ax = style.figure(width=style.COLUMN_WIDTH + 1.6, height=2.6)  # the legend to the right of the axes
    timed = table[table["verdict"].isin(judge.TIMED)]
    ax.axhspan(1 - tolerance, 1 + tolerance, color="0.85", zorder=0, lw=0)
    ax.axhline(1.0, color="0.5", lw=0.6, zorder=1)
    for (study, d), (marker, color) in zip(timed.groupby("study"), itertools.cycle(STUDY_MARKERS)):
        within = int((d["verdict"] == "reproduced").sum())
        ax.scatter(d["ms_reference"].astype(float), d["ratio"].astype(float), s=9, marker=marker, color=color,
                   zorder=2, linewidths=0, alpha=0.8,
                   label=f"{style.study_label(study)} ({within} of {len(d)})")
    n = judge.verdict_counts(table)
    for v in ("missing", "status changed"):
        if n[v]:
            ax.scatter([], [], marker="x", color="k", label=f"{v} ({n[v]})")
    ratios = [*timed["ratio"].astype(float), 0.8, 1.25]  # at least 0.8-1.25
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(min(ratios) / 1.05, max(ratios) * 1.05)
    ax.yaxis.set_major_locator(ticker.FixedLocator([0.2, 0.3, 0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0]))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("reference device time (ms)")
    ax.set_ylabel("device time, second run / reference")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=6)  # off the points
    fig.tight_layout()
    return fig
