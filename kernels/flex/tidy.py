"""The FlexAttention study's tidy table: its derived metrics and the selections that the figures,
tables (:mod:`kernels.flex.report`) and quoted numbers (:mod:`kernels.flex.numbers`) start from,
built on kernels.paper.report_kit.

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
``tiles_per_row``
    computed tiles per query-block row: density_blocks x ceil(N / 128).
``tile_fill``
    density_elements / density_blocks: the fraction of the computed tiles'
    elements that the mask allows (partial tiles run the mask_mod on every
    element and waste the masked ones).
``tile_cost``
    time per computed tile over flex causal's time per computed tile at the
    same shape, pass, impl and score_mod: ideal_ratio / speedup_vs_causal,
    i.e. 100 / pct_of_ideal.

The reference shape (score modifications, the causal macros) is that of the
config group ``masks`` (role, :data:`REFERENCE_GROUP`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.paper import report_kit as kit
from kernels.flex.density import BLOCK_SIZE
from kernels.paper.rows import ROLES

SHAPE = ["gpu", "dtype", "pass", "batch", "heads", "kv_heads", "seqlen", "head_dim"]
MASK_KNOBS = ["mask", "window", "documents", "doc_dist", "prefix"]
#: The mask families and score modifications as the figures, tables and text name them.
MASK_LABEL = {"causal": "causal", "window": "sliding window", "document": "document packing",
              "document_window": "documents + window", "prefix": "prefix-LM"}
SCORE_MOD_LABEL = {"alibi": "ALiBi", "softcap": "soft-cap (tanh)", "softcap_sigmoid": "soft-cap (sigmoid)",
                   "alibi_softcap": "ALiBi + soft-cap"}
#: The FlexAttention backends whose speed and sparsity the report analyses, each against its own
#: causal rows: impl -> the prefix of its macros (the default Triton backend's ``Flex...``, the
#: FLASH backend's, FlashAttention-4's CuTe kernels, ``FlexFlash...``).
BACKENDS = {"flex": "Flex", "flex_flash": "FlexFlash"}
#: The config group (role) whose shape is the study's reference shape: every mask family at one shape.
REFERENCE_GROUP = "masks"
#: The config groups (roles) of the sequence-length series: forward, and forward + backward.
SEQLEN_GROUPS = ("seqlen", "seqlen_bwd")
#: The fields of a shape (the reference shape's, :func:`_reference`).
REFERENCE_FIELDS = ["batch", "heads", "kv_heads", "seqlen", "head_dim", "dtype"]
#: The columns :func:`derive` adds (the module docstring).
DERIVED = ["tflops_elements", "tflops_blocks", "speedup_vs_flash", "speedup_vs_cudnn", "speedup_vs_causal",
           "ideal_ratio", "pct_of_ideal", "tiles_per_row", "tile_fill", "tile_cost", "slowdown_vs_plain"]
#: The tidy table's columns that the figures, tables and macros select on: every selection starts at
#: :func:`_main_gpu`, which gives a table without rows these columns (:func:`kernels.paper.report_kit.tidy_frame`).
COLUMNS = [*SHAPE, *MASK_KNOBS, "impl", "status", "error", "score_mod", "device_ms", "flops", "flops_blocks",
           "density_blocks", "density_elements", ROLES, kit.DEVICE_REPS, *DERIVED]


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(np.nan, index=df.index)


def _ok_base(df: pd.DataFrame, sel: pd.Series, keys: list[str], col: str = "device_ms") -> pd.Series:
    """For every row of ``df``, ``col`` of the ok row selected by ``sel`` with equal ``keys`` (NaN if none)."""
    return kit.baseline(df, sel & (df["status"] == "ok"), keys, col)


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add the study's metrics (module docstring) to the tidy table."""
    df = df.copy()
    if df.empty:
        return df
    for col in ("flops_blocks", "device_ms", "density_blocks", "density_elements", "flops", "seqlen"):
        df[col] = _num(df, col)
    seconds = df["device_ms"] / 1e3
    df["tflops_elements"] = df["flops"] / seconds / 1e12
    df["tflops_blocks"] = df["flops_blocks"] / seconds / 1e12
    causal = (df["mask"] == "causal") & (df["score_mod"] == "none")
    for impl, name in (("sdpa_flash", "flash"), ("sdpa_cudnn", "cudnn")):
        df[f"speedup_vs_{name}"] = _ok_base(df, causal & (df["impl"] == impl), SHAPE) / df["device_ms"]
    keys = SHAPE + ["impl", "score_mod"]
    df["speedup_vs_causal"] = _ok_base(df, df["mask"] == "causal", keys) / df["device_ms"]
    causal_blocks = _ok_base(df, df["mask"] == "causal", ["seqlen"], "density_blocks")
    df["ideal_ratio"] = causal_blocks / df["density_blocks"]
    df["pct_of_ideal"] = 100.0 * df["speedup_vs_causal"] / df["ideal_ratio"]
    df["tiles_per_row"] = df["density_blocks"] * np.ceil(df["seqlen"] / BLOCK_SIZE)
    df["tile_fill"] = df["density_elements"] / df["density_blocks"]
    df["tile_cost"] = df["ideal_ratio"] / df["speedup_vs_causal"]
    df["slowdown_vs_plain"] = df["device_ms"] / _ok_base(df, df["score_mod"] == "none",
                                                        SHAPE + ["impl"] + MASK_KNOBS)
    return df


# ----------------------------------------------------------------------------
# selections


def _main_gpu(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of one GPU: the non-CPU GPU with most ok rows, else the CPU; with every column of
    :data:`COLUMNS`, rows or none."""
    df = kit.tidy_frame(df, COLUMNS)
    if df.empty:
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
    return df[(df["status"] == "ok") & df["device_ms"].notna()]


def _seqlen_series(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the sequence-length series (roles :data:`SEQLEN_GROUPS`, the config groups at a
    constant batch x seqlen, causal): the x axis of the throughput and memory figures."""
    return df[kit.has_role(df, SEQLEN_GROUPS[0]) | kit.has_role(df, SEQLEN_GROUPS[1])]


def _reference(df: pd.DataFrame) -> dict | None:
    """The reference shape (:data:`REFERENCE_FIELDS`): that of the first row of the config group
    :data:`REFERENCE_GROUP` (role) in ``df``; None when ``df`` has none."""
    ref = kit.with_role(df, REFERENCE_GROUP)
    return None if ref.empty else ref.iloc[0][REFERENCE_FIELDS].to_dict()


def _at_reference(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` at the reference shape (:func:`_reference`); none without it."""
    ref = _reference(df)
    return _where(df, **ref) if ref is not None else df.iloc[0:0]


def _base(df: pd.DataFrame) -> pd.DataFrame:
    """The main GPU's rows at the reference shape (:func:`_at_reference`), or all of them if it was not measured."""
    d = _main_gpu(df)
    b = _at_reference(d)
    return b if not b.empty else d


def _sparse(df: pd.DataFrame, impl: str = "flex") -> pd.DataFrame:
    """The main GPU's ok rows of ``impl`` (a FlexAttention backend, :data:`BACKENDS`) without a
    score_mod at seqlen >= 8K, every mask but causal; refused (``unsupported``) rows are left out."""
    d = _ok(_main_gpu(df))
    return d[(d["impl"] == impl) & (d["score_mod"] == "none") & (d["seqlen"] >= 8191) & (d["mask"] != "causal")]


def _row_model(k: float, tiles_per_row, causal_tiles_per_row):
    """Tile cost when every query-block row costs ``k`` tiles on top of its tiles (causal's rows included)."""
    return (1.0 + k / tiles_per_row) / (1.0 + k / causal_tiles_per_row)


def row_cost_fit(d: pd.DataFrame) -> tuple[float, float]:
    """Least-squares fixed cost per query-block row, in tiles, and the R² of the fit on ``tile_cost``.

    Model: a row of r computed tiles takes (k + r) tile times, so the tile
    cost relative to causal (r_c = tiles_per_row x ideal_ratio tiles per
    row) is (1 + k/r) / (1 + k/r_c). k is searched on a 0.01 grid in
    [0, 32]; (nan, nan) with fewer than 3 usable rows.
    """
    cols = ["tile_cost", "tiles_per_row", "ideal_ratio"]
    g = d[cols].apply(pd.to_numeric, errors="coerce").dropna()
    if len(g := g[g["tiles_per_row"] > 0]) < 3:
        return np.nan, np.nan
    y, r = g["tile_cost"].to_numpy(), g["tiles_per_row"].to_numpy()
    ks = np.linspace(0.0, 32.0, 3201)
    sse = ((_row_model(ks[:, None], r, r * g["ideal_ratio"].to_numpy()) - y) ** 2).sum(axis=1)
    best = int(np.argmin(sse))
    sst = ((y - y.mean()) ** 2).sum()
    return float(ks[best]), float(1.0 - sse[best] / sst) if sst > 0 else np.nan


def _rank_corr(a: pd.Series, b: pd.Series) -> float:
    """Spearman's rank correlation of two aligned series (nan with fewer than 3 pairs or a constant one)."""
    ok = a.notna() & b.notna()
    if ok.sum() < 3 or a[ok].nunique() < 2 or b[ok].nunique() < 2:
        return np.nan
    return float(np.corrcoef(a[ok].rank(), b[ok].rank())[0, 1])
