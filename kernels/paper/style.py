"""One visual style for every figure of the paper, and deterministic saving.

Figures are vector PDFs with TrueType (Type 42) fonts embedded, and the same
bytes for the same data: no creation date in the metadata.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from kernels.core.files import write_atomic  # noqa: E402
from kernels.core.registry import registry_module, registry  # noqa: E402

#: Figure widths in inches: one column and the full text width of the paper.
COLUMN_WIDTH = 3.4
FULL_WIDTH = 7.0

def study_label(study: str) -> str:
    """The display name of ``study`` (``STUDY_LABEL`` of its registry module; else ``study``), as a
    table cell, a legend or the start of a sentence writes it."""
    return getattr(registry_module(study), "STUDY_LABEL", study)


def study_name(study: str) -> str:
    """:func:`study_label` as the middle of a sentence writes it: a label that is a name (any letter
    after its first upper case: "SwiGLU", "Gated DeltaNet") as it is, a phrase ("Long context",
    "Tensor cores") with its first letter in lower case."""
    text = study_label(study)
    return text if any(c.isupper() for c in text[1:]) else text[:1].lower() + text[1:]


#: Display names of passes.
PASS_LABELS = {"fwd": "forward", "bwd": "backward", "fwdbwd": "forward + backward"}
#: The one marker of a value that was not measured (tables and macros alike).
MISSING = "n/a"


def label(study: str, impl: str) -> str:
    """The display name of implementation ``impl`` of ``study`` (its :func:`registry`; else ``impl``)."""
    entry = registry(study).get(impl)
    return entry.label if entry else impl


def pass_label(name: str) -> str:
    """The display name of a pass (``fwd`` -> ``forward``, :data:`PASS_LABELS`)."""
    return PASS_LABELS.get(name, name)


def shape(**dims) -> str:
    """The one notation of a shape: letter and size, space-separated, in the order given:
    ``shape(B=4, T=8192, H=16)`` -> ``"B4 T8192 H16"`` (sizes written out, no ``K``)."""
    return " ".join(f"{k}{int(v)}" for k, v in dims.items())


def legend_below(fig, axes, ncol: int = 4) -> None:
    """One legend for the labelled artists of ``axes``, centred below the panels (off the data)."""
    entries = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(text, handle)
    if entries:
        fig.legend(list(entries.values()), list(entries), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(ncol, len(entries)))


def plain_log(ax, axis: str = "both") -> None:
    """Plain numbers (0.2, 1, 5) instead of powers of ten (``2 × 10^1``) on the log axes of ``ax``
    (``"x"``, ``"y"`` or ``"both"``; call it after drawing): ticks at 1, 2 and 5 times each power of
    ten on an axis of up to three decades, at the powers of ten alone on a longer one."""
    from matplotlib import ticker

    fmt = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for name in ("x", "y") if axis == "both" else (axis,):
        lo, hi = sorted(getattr(ax, f"get_{name}lim")())
        decades = np.log10(hi / lo) if lo > 0 else np.inf
        a = getattr(ax, f"{name}axis")
        a.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 3 else (1.0,)))
        a.set_major_formatter(fmt)
        a.set_minor_formatter(ticker.NullFormatter())


def apply() -> None:
    """Set the shared seaborn/matplotlib style (call before drawing)."""
    sns.set_theme(context="paper", style="whitegrid", font="DejaVu Sans", font_scale=0.9)
    plt.rcParams.update({
        "pdf.fonttype": 42, "ps.fonttype": 42, "svg.hashsalt": "artifact",
        "figure.dpi": 150, "savefig.bbox": "tight", "legend.frameon": False,
        "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7, "legend.title_fontsize": 7,
        "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.markersize": 3.5,
    })


def palette(study: str, impls) -> dict:
    """Colour of each implementation of ``study`` in ``impls``: its registry's (:func:`registry`), so one
    implementation has one colour in every figure; one not in it gets the next colour of the palette."""
    spare = iter(sns.color_palette("tab10").as_hex())
    known = registry(study)
    return {i: known[i].color if i in known else next(spare) for i in impls}


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
