"""Figures, tables and numbers of the toy study, built on kernels.paper.report_kit."""

import pandas as pd

from kernels.paper import report_kit as kit
from kernels.paper import style
from kernels.toy.impls import IMPLS

#: The tidy table's columns this report reads (a study without rows has none).
COLUMNS = ("impl", "status", "numel", "device_ms")


def derive(df: pd.DataFrame) -> pd.DataFrame:
    return df


def toy_time(df: pd.DataFrame):
    """Toy study: time against size."""
    df = kit.tidy_frame(df, COLUMNS)
    fig, ax = style.figure()
    ok = df[df["status"] == "ok"]
    colors = style.palette("toy", IMPLS)
    for impl in kit.ordered(ok["impl"].unique(), tuple(IMPLS)):
        d = ok[ok["impl"] == impl]
        ax.plot(d["numel"], d["device_ms"], marker="o", color=colors[impl], label=style.label("toy", impl))
    if ok.empty:
        kit.mark_empty(ax)
    ax.set_xlabel("elements")
    ax.set_ylabel("median device time (ms)")
    return fig


def toy_table(df: pd.DataFrame) -> pd.DataFrame:
    """Toy study: the rows."""
    return kit.tidy_frame(df, COLUMNS)[["impl", "numel", "device_ms"]].set_index("impl")


FIGURES = {"toy_time": toy_time}
TABLES = {"toy_table": toy_table}


def macros(df: pd.DataFrame) -> dict[str, str]:
    return {"ToyRows": str(len(df))}
