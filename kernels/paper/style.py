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
#: The verdict on a claim about a quantity its study does not measure, followed by that quantity in
#: brackets ("not tested (per clock)"): nothing to compare between runs or GPU models.
NOT_TESTED = "not tested"


def decided(verdict: str) -> bool:
    """Whether a claim's ``verdict`` decides it: neither :data:`MISSING` nor :data:`NOT_TESTED`."""
    return verdict != MISSING and not verdict.startswith(NOT_TESTED)


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


#: Two markers whose centres lie closer than this on the page (in points, 1/72 inch) are drawn one
#: over the other: about the radius of a marker (``lines.markersize`` of :func:`apply`).
HIDDEN_PT = 2.0
#: Two series closer than this at every point (in points) read as one line: about a line's width.
COINCIDE_PT = 1.0


def _series(line) -> tuple:
    """The key of the series that ``line`` draws in its figure: its colour and marker (one
    implementation, and one launch mode where a figure draws several, in every panel)."""
    from matplotlib import colors

    return colors.to_hex(line.get_color()), line.get_marker()


def _on_page(ax, line) -> np.ndarray:
    """The points of ``line`` where it has markers, in points on the page (``NaN`` rows dropped)."""
    ax.get_xlim(), ax.get_ylim()  # the view limits up to date
    xy = _finite(line)
    return ax.transData.transform(xy) * 72.0 / ax.figure.dpi if len(xy) else xy


def _marker_lines(ax) -> list:
    """The lines of ``ax`` with a filled-shape marker, in the order drawn (by zorder, then as added):
    plain lines and the caps of error bars are not series here."""
    from matplotlib.lines import Line2D

    return sorted((ln for ln in ax.get_lines() if ln.get_marker() in Line2D.filled_markers), key=Line2D.get_zorder)


def _near(xy: np.ndarray, other: np.ndarray, tol_pt: float) -> np.ndarray:
    """Per point of ``xy`` (page points): whether a point of ``other`` lies within ``tol_pt``."""
    if not len(xy) or not len(other):
        return np.zeros(len(xy), bool)
    return np.linalg.norm(xy[:, None, :] - other[None, :, :], axis=2).min(axis=1) <= tol_pt


def hidden_series(axes, tol_pt: float = HIDDEN_PT) -> list[tuple]:
    """The series (:func:`_series` keys, in the order found) that lines drawn after them hide: in a
    panel of ``axes``, at least half of the series' markers lie within ``tol_pt`` points of a marker of
    a later line of another series (later lines are drawn on top; :func:`_marker_lines`)."""
    hidden = []
    for ax in axes:
        lines = _marker_lines(ax)
        pages = [_on_page(ax, ln) for ln in lines]
        for i, (line, xy) in enumerate(zip(lines, pages)):
            if not len(xy) or _series(line) in hidden:
                continue
            covered = np.zeros(len(xy), bool)
            for other, page in zip(lines[i + 1:], pages[i + 1:]):
                if _series(other) != _series(line):
                    covered |= _near(xy, page, tol_pt)
            if 2 * covered.sum() >= len(xy):
                hidden.append(_series(line))
    return hidden


def _rings(axes, hidden: list[tuple], tol_pt: float) -> dict[tuple, int]:
    """A rank per hidden series, different for any two that have markers within ``tol_pt`` of each
    other in a panel (greedy, in the order of ``hidden``): the k-th ring size around a point."""
    touching = set()
    for ax in axes:
        lines = [(ln, _on_page(ax, ln)) for ln in _marker_lines(ax) if _series(ln) in hidden]
        for ln, xy in lines:
            for other, page in lines:
                if _series(other) != _series(ln) and _near(xy, page, tol_pt).any():
                    touching.add((_series(ln), _series(other)))
    ranks = {}
    for key in hidden:
        taken = {ranks[o] for o in ranks if (key, o) in touching}
        ranks[key] = min(set(range(len(hidden) + 1)) - taken)
    return ranks


def _lies_on(ax, line, other, tol_pt: float) -> tuple[bool, bool]:
    """Whether every point of ``line`` has a point of ``other`` at the same x within ``tol_pt``
    points on the page in y, and whether at the same y exactly."""
    mine = _finite(line)
    theirs = dict(_finite(other))
    if not len(mine) or any(x not in theirs for x, _ in mine):
        return False, False
    ys = np.array([theirs[x] for x, _ in mine])
    page = ax.transData.transform(np.vstack([mine, np.column_stack([mine[:, 0], ys])]))[:, 1] * 72.0 / ax.figure.dpi
    gap = np.abs(page[:len(mine)] - page[len(mine):])
    return bool(np.all(gap <= tol_pt)), bool(np.array_equal(mine[:, 1], ys))


def _finite(line) -> np.ndarray:
    """The points of ``line`` in data coordinates, rows with a ``NaN`` dropped."""
    xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
    return xy[np.isfinite(xy).all(axis=1)]


def coinciding(axes, tol_pt: float = COINCIDE_PT) -> dict[str, str]:
    """``{label: note}`` for each labelled series of ``axes`` whose every point lies on a labelled
    series drawn before it (within ``tol_pt`` points at the same x) in every panel that draws both:
    ``"= B"`` when the values are equal everywhere, else ``"≈ B"``, B the first drawn of those."""
    order, pairs = [], {}
    for ax in axes:
        ax.get_xlim(), ax.get_ylim()  # the view limits up to date
        lines = [ln for ln in _marker_lines(ax) if not ln.get_label().startswith("_")]
        order += [ln.get_label() for ln in lines if ln.get_label() not in order]
        for line in lines:
            for other in lines:
                key = (line.get_label(), other.get_label())
                if key[0] != key[1] and pairs.get(key, (True, True))[0]:
                    near, equal = _lies_on(ax, line, other, tol_pt)
                    pairs[key] = (near, equal and pairs.get(key, (True, True))[1])
    out = {}
    for label in order:
        on = [b for b in order[:order.index(label)] if pairs.get((label, b), (False,))[0]]
        if on:
            out[label] = f"{'=' if pairs[(label, on[0])][1] else '≈'} {on[0]}"
    return out


def reveal_hidden(axes, tol_pt: float = HIDDEN_PT) -> list[tuple]:
    """Make every series that a later line hides (:func:`hidden_series`) visible, in every panel of
    ``axes``: drawn on top with hollow markers, larger than a marker, and larger again for each other
    hidden series near it (:func:`_rings`: rings around a point), so the markers underneath show
    inside. Returns the series revealed."""
    hidden = hidden_series(axes, tol_pt)
    ranks = _rings(axes, hidden, tol_pt)
    top = max((ln.get_zorder() for ax in axes for ln in ax.get_lines()), default=2)
    base = plt.rcParams["lines.markersize"]
    for ax in axes:
        for line in ax.get_lines():
            if _series(line) in hidden:
                line.set_markerfacecolor("none")
                line.set_markersize(base * (1.5 + 0.5 * ranks[_series(line)]))
                line.set_zorder(top + 1)
    return hidden


def legend_below(fig, axes, ncol: int = 4, reveal: bool = True) -> None:
    """One legend for the labelled artists of ``axes``, centred below the panels (off the data).
    Series that others would hide are drawn visible first (:func:`reveal_hidden`; without ``reveal``,
    for a figure that tells its series apart otherwise, by their markers and labelled values, they
    stay as drawn), and the label of one that lies on another everywhere says so (``"A (= B)"`` or
    ``"A (≈ B)"``, :func:`coinciding`); every marker in the legend has the style's size."""
    notes = coinciding(axes)  # in the order drawn, before the hidden series move on top
    if reveal:
        reveal_hidden(axes)
    for text, note in notes.items():
        for ax in axes:
            for line in ax.get_lines():
                if line.get_label() == text:
                    line.set_label(f"{text} ({note})")
    entries = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(text, handle)
    if entries:
        legend = fig.legend(list(entries.values()), list(entries), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                            ncol=min(ncol, len(entries)))
        for handle in legend.legend_handles:  # one marker size: a revealed series' larger marker is the panels'
            if hasattr(handle, "set_markersize"):
                handle.set_markersize(plt.rcParams["lines.markersize"])


def tokens(n) -> str:
    """A length for a reader: in K (1024 tokens) with at most one decimal from 1K, ``131072`` ->
    ``128K``, ``3277`` -> ``3.2K``, below it in tokens (``64``); :data:`MISSING` for NaN."""
    if n is None or not np.isfinite(float(n)):
        return MISSING
    if float(n) < 1024:
        return str(int(round(float(n))))
    k = float(n) / 1024
    return f"{k:.0f}K" if abs(k - round(k)) < 0.05 else f"{k:.1f}K"


def plain_log(ax, axis: str = "both") -> None:
    """Plain numbers (0.2, 1, 5) instead of powers of ten (``2 × 10^1``) on the log axes of ``ax``
    (``"x"``, ``"y"`` or ``"both"``; call it after drawing): ticks at 1, 2 and 5 times each power of
    ten on an axis of up to three decades, at the powers of ten alone on a longer one. A y axis is
    set from its data, 2 % beyond each end, to the nearest tick, so that every value lies between
    two labelled ticks (a line drawn later autoscales it again: call this once more); an x axis
    keeps its limits, where labels side by side would crowd."""
    from matplotlib import ticker

    fmt = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for name in ("x", "y") if axis == "both" else (axis,):
        lo, hi = sorted(getattr(ax, f"get_{name}lim")())
        decades = np.log10(hi / lo) if lo > 0 else np.inf
        subs = (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
        data_lo, data_hi = sorted(ax.dataLim.intervaly)
        if name == "y" and np.isfinite(decades) and 0 < data_lo <= data_hi < np.inf:
            data_lo, data_hi = data_lo / 1.02, data_hi * 1.02
            ticks = [m * 10.0 ** e for e in range(int(np.floor(np.log10(data_lo))) - 1,
                                                  int(np.ceil(np.log10(data_hi))) + 2) for m in subs]
            ax.set_ylim(max(t for t in ticks if t <= data_lo * (1 + 1e-9)),
                        min(t for t in ticks if t >= data_hi * (1 - 1e-9)), auto=None)
        a = getattr(ax, f"{name}axis")
        a.set_major_locator(ticker.LogLocator(base=10, subs=subs))
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
