"""One visual style for every figure of the paper, and deterministic saving.

Figures are vector PDFs with TrueType (Type 42) fonts embedded, and the same
bytes for the same data: no creation date in the metadata.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from kernels.files import write_atomic  # noqa: E402

#: Figure widths in inches: one column and the full text width of the paper.
COLUMN_WIDTH = 3.4
FULL_WIDTH = 7.0

#: Fixed colours per implementation, so that one implementation has one
#: colour in every figure. Unknown names get the next colour of the palette.
IMPL_COLORS = {
    # shared roles
    "eager": "#4C72B0", "naive": "#4C72B0",
    "compile": "#DD8452", "compile_no_cudagraphs": "#C44E52",
    "triton": "#55A868", "chunk": "#55A868", "flex": "#55A868",
    "decode": "#8C8C8C", "flex_autotune": "#8C8C8C", "recurrent": "#8C8C8C", "flex_flash": "#8172B3",
    "seed": "#937860", "liger": "#DA8BC3", "fla_chunk": "#DA8BC3", "fla_recurrent": "#937860",
    "gemm_fused": "#8172B3", "flash_qla": "#8172B3", "matmul": "#CCB974",
    "copy": "#000000",
    "sdpa_flash": "#DD8452", "sdpa_cudnn": "#C44E52", "sdpa_efficient": "#CCB974",
    "sdpa_masked": "#64B5CD", "sdpa_math": "#64B5CD",
}


def apply() -> None:
    """Set the shared seaborn/matplotlib style (call before drawing)."""
    sns.set_theme(context="paper", style="whitegrid", font="DejaVu Sans", font_scale=0.9)
    plt.rcParams.update({
        "pdf.fonttype": 42, "ps.fonttype": 42, "svg.hashsalt": "artifact",
        "figure.dpi": 150, "savefig.bbox": "tight", "legend.frameon": False,
        "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7,
        "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.markersize": 3.5,
    })


def palette(impls) -> dict:
    """Colour of each implementation name in ``impls`` (stable across figures)."""
    spare = iter(sns.color_palette("tab10").as_hex())
    return {i: IMPL_COLORS.get(i) or next(spare) for i in impls}


def figure(width: float = COLUMN_WIDTH, height: float = 2.4, ncols: int = 1, nrows: int = 1, **kw):
    """A new figure in the shared style; returns ``(fig, axes)`` like ``plt.subplots``."""
    apply()
    return plt.subplots(nrows, ncols, figsize=(width, height), **kw)


def save(fig, path: str | Path) -> None:
    """Save ``fig`` as a PDF with reproducible bytes (written atomically) and close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="pdf", metadata={"CreationDate": None, "ModDate": None, "Producer": None,
                                             "Creator": None})
    plt.close(fig)
    write_atomic(path, buf.getvalue())
