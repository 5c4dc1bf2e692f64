"""Figures, tables and numbers of the toy study."""

import pandas as pd

from kernels import style


def derive(df: pd.DataFrame) -> pd.DataFrame:
    return df


def toy_time(df: pd.DataFrame):
    """Toy study: time against size."""
    fig, ax = style.figure()
    ok = df[df["status"] == "ok"] if not df.empty else df
    if not ok.empty:
        ax.plot(ok["numel"], ok["device_ms"], marker="o")
    ax.set_xlabel("elements")
    ax.set_ylabel("median time (ms)")
    return fig


def toy_table(df: pd.DataFrame) -> pd.DataFrame:
    """Toy study: the rows."""
    return df[["impl", "numel", "device_ms"]].set_index("impl") if not df.empty else pd.DataFrame()


FIGURES = {"toy_time": toy_time}
TABLES = {"toy_table": toy_table}


def macros(df: pd.DataFrame) -> dict[str, str]:
    return {"ToyRows": str(len(df))}
