"""What bounds a kernel, read from its device time on two GPU models: per case timed on both, the
other model's time over the paper model's (:func:`case_ratios`); per implementation the median ratio
with its interval (:func:`impl_ratios`), read against the models' datasheet peaks (:func:`bound`): the
H100 and the H200 share their SM90 compute (peak bfloat16 989 TFLOP/s on both, a compute ratio of 1.0)
and differ in HBM bandwidth (4.8 TB/s against 3.35, :data:`kernels.paper.rows.PEAK_GBPS`), so a kernel
bound by memory bandwidth takes 4.8 / 3.35 = 1.43 times as long on the H100, and one bound by its
arithmetic, or by its launch and latency, about as long (:func:`peak_ratios`). The paper's sentence per
study (:func:`study_sentence`) and figure (:func:`figure`) say so; :mod:`kernels.paper.models` renders
them.
"""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.lines import Line2D

from kernels.gdn.fla_names import fla_label
from kernels.paper import report_kit as kit
from kernels.paper import rows, style

#: A median ratio this close to the bandwidth ratio, as a share of the gap between the compute and
#: the bandwidth ratios (on a log scale), reads "bound by memory bandwidth"; this close to the compute
#: ratio, "bound by compute, launch or host" (a call's launch, its latency or the host's own work
#: take as long on either model); in between, "between the two" (:func:`bound`).
BOUND_SHARE = 0.25
BANDWIDTH, COMPUTE, BETWEEN = "memory bandwidth", "compute, launch or host", "between the two"


def case_ratios(paper_run: list[dict], other_run: list[dict]) -> pd.DataFrame:
    """Per case timed ok on both runs (:func:`kernels.paper.rows.case_id`), the other run's device
    time over the paper run's: columns ``study``, ``impl``, ``case``, ``ms_paper``, ``ms_other``
    (``device_ms``, ms) and ``ratio``."""
    def timed(run):
        return {rows.case_id(r): r for r in run if r.get("status") == "ok" and r.get("device_ms")}

    paper, other = timed(paper_run), timed(other_run)
    records = [{"study": r["study"], "impl": r["impl"], "case": rows.case_label(r),
                "ms_paper": float(r["device_ms"]), "ms_other": float(other[key]["device_ms"]),
                "ratio": float(other[key]["device_ms"]) / float(r["device_ms"])}
               for key, r in paper.items() if key in other]
    return pd.DataFrame(records, columns=["study", "impl", "case", "ms_paper", "ms_other", "ratio"])


def peak_ratios(paper: str, other: str) -> tuple[float, float]:
    """The time ratios (``other`` over ``paper``) of a kernel bound by memory bandwidth and of one
    bound by compute, from the models' datasheet peaks (:data:`kernels.paper.rows.PEAK_GBPS`,
    :data:`kernels.paper.rows.PEAK_BF16_TFLOPS`); NaN for a model without one."""
    def over(peaks):
        return peaks[paper] / peaks[other] if paper in peaks and other in peaks else math.nan

    return over(rows.PEAK_GBPS), over(rows.PEAK_BF16_TFLOPS)


def bound(value: float, bandwidth: float, compute: float) -> str:
    """What bounds a kernel whose median time ratio is ``value``, on a log scale (so that a model's
    ratio and its inverse, the other model's, read alike): :data:`BANDWIDTH` within
    :data:`BOUND_SHARE` of the log of the gap between the two peak ratios from ``bandwidth``,
    :data:`COMPUTE` within it from ``compute``, else :data:`BETWEEN` (also when the gap is unknown or nil)."""
    if not all(math.isfinite(v) and v > 0 for v in (value, bandwidth, compute)):
        return BETWEEN
    gap = math.log(bandwidth / compute)
    if abs(gap) < 1e-9:
        return BETWEEN
    share = math.log(value / compute) / gap
    if share >= 1 - BOUND_SHARE:
        return BANDWIDTH
    return COMPUTE if share <= BOUND_SHARE else BETWEEN


#: Cases shorter than this on the paper model (device time, ms) may be bound by their launch and
#: latency whatever their kernel: :func:`impl_ratios` leaves them out where an implementation has longer ones.
LONG_MS = 0.1


def impl_ratios(cases: pd.DataFrame, bandwidth: float, compute: float) -> pd.DataFrame:
    """Per study and implementation of ``cases`` (:func:`case_ratios`), over its cases of at least
    :data:`LONG_MS` on the paper model (all of them where none is that long: ``short`` true):
    ``cases`` (how many), the median ratio with its interval over those cases (``median``, ``low``,
    ``high``: :func:`kernels.paper.report_kit.median_interval`), the lowest and highest (``min``, ``max``) and ``bound``
    (:func:`bound` of the median)."""
    records = []
    for (study, impl), d in cases.groupby(["study", "impl"], sort=True):
        long = d[d["ms_paper"] >= LONG_MS]
        short = long.empty
        d = d if short else long
        median, low, high = kit.median_interval(d["ratio"].to_numpy())
        records.append({"study": study, "impl": impl, "cases": len(d), "short": short, "median": median,
                        "low": low, "high": high, "min": float(d["ratio"].min()), "max": float(d["ratio"].max()),
                        "bound": bound(median, bandwidth, compute)})
    return pd.DataFrame(records, columns=["study", "impl", "cases", "short", "median", "low", "high", "min", "max",
                                          "bound"])


def study_sentence(study: str, impls: pd.DataFrame, paper: str, other: str, bandwidth: float,
                   compute: float, names: dict[tuple[str, str], str] | None = None) -> str:
    """One sentence per study for the paper: how long its implementations take on ``other`` against
    ``paper`` (:func:`impl_ratios`: median ratio with its interval) grouped by what bounds them
    (:func:`bound`), beside the two peak ratios; a study measured on one of them only says so. ``names``:
    as :func:`figure`'s."""
    names = names or {}
    d = impls[impls["study"] == study]
    name = style.study_label(study)
    if d.empty:
        return f"{name}: not measured on both the {rows.model_label(other)} and the {rows.model_label(paper)}."
    groups = {}
    for _, r in d.sort_values("median", ascending=False, kind="stable").iterrows():
        n = f"{r['cases']}, all under {kit.fmt(LONG_MS, 1)} ms" if r["short"] else f"{r['cases']}"
        text = f"{names.get((study, r['impl'])) or style.label(study, r['impl'])} {r['median']:.2f} [{r['low']:.2f}, {r['high']:.2f}] ({n})"
        groups.setdefault(r["bound"], []).append(text)
    near = {BANDWIDTH: f"near the bandwidth ratio {bandwidth:.2f} (bound by memory bandwidth)",
            BETWEEN: "between the two",
            COMPUTE: f"near the compute ratio {compute:.2f} (bound by compute, launch or host)"}
    said = "; ".join(f"{near[what]}: {', '.join(groups[what])}" for what in (BANDWIDTH, BETWEEN, COMPUTE)
                     if what in groups)
    return f"{name}: {said}."


def bound_span(impls: pd.DataFrame, what: str) -> str:
    """The lowest and highest median ratio (:func:`impl_ratios`) of the implementations of ``impls``
    that ``what`` bounds (:func:`bound`), how many and of which studies: ``1.38--1.43 (6 implementations:
    SwiGLU)``; :data:`kernels.paper.style.MISSING` where none is."""
    d = impls[impls["bound"] == what]
    if d.empty:
        return style.MISSING
    studies = kit.and_list([style.study_name(s) for s in dict.fromkeys(d["study"])])
    return f"{kit.span(d['median'].tolist())} ({len(d)} implementation{'s' * (len(d) > 1)}: {studies})"


#: The colour of each :func:`bound` in :func:`figure` (the palette's first three: one per bound, none per
#: implementation).
BOUND_COLORS = {BANDWIDTH: "#1f77b4", BETWEEN: "#2ca02c", COMPUTE: "#ff7f0e"}


def _panels(impls: pd.DataFrame, studies, n: int = 2) -> list[list[str]]:
    """``studies`` (those of ``impls`` in this order) split into at most ``n`` runs of consecutive studies of
    about as many implementations each, one per panel of :func:`figure`."""
    sizes = [(s, int((impls["study"] == s).sum())) for s in studies if (impls["study"] == s).any()]
    total, panels, count = sum(k for _, k in sizes), [[]], 0
    for study, k in sizes:
        if panels[-1] and len(panels) < n and count + k / 2 > total * len(panels) / n:
            panels.append([])
        panels[-1].append(study)
        count += k
    return panels if sizes else [[]]


def impl_names(run: list[dict]) -> dict[tuple[str, str], str]:
    """The display name of each (study, implementation) of ``run`` (its rows): :func:`kernels.paper.style.label`,
    FLA's (``fla_chunk``, in any study) saying where its backward ran TileLang (:func:`kernels.gdn.fla_names.fla_label`
    of its rows' pass, device time, ``dispatch`` and the ``env``'s Triton and compute capability)."""
    out = {(r["study"], r["impl"]): style.label(r["study"], r["impl"]) for r in run}
    for study, impl in out:
        if impl == "fla_chunk":
            fla = pd.DataFrame([{"pass": r.get("pass"), "device_ms": r.get("device_ms"), "dispatch": r.get("dispatch"),
                                 "env_triton": (r.get("env") or {}).get("triton"),
                                 "env_capability": (r.get("env") or {}).get("capability")}
                                for r in run if (r["study"], r["impl"]) == (study, impl)])
            out[study, impl] = fla_label(out[study, impl], fla)
    return out


#: The colour of the peak ratios' lines: darker than the grid, whose line at 1.0 the compute ratio
#: (1.0 between the H100 and the H200) would otherwise hide.
PEAK_LINE = "0.15"


def figure(impls: pd.DataFrame, studies, paper: str, other: str, bandwidth: float, compute: float,
           names: dict[tuple[str, str], str] | None = None):
    """Each implementation's device time on ``other`` over ``paper`` (:func:`impl_ratios`): its median
    over its cases (a dot; open where every case is under :data:`LONG_MS`), the median's 95 % interval
    (a thick bar) and the lowest to the highest case (a thin line), coloured by what bounds it
    (:func:`bound`, :data:`BOUND_COLORS`), grouped by study in up to two panels (:func:`_panels`), with the
    two peak ratios as lines (bandwidth dashed, compute dotted) and one legend below; ``names``: each
    implementation's display name (:func:`impl_names`; default :func:`kernels.paper.style.label`)."""
    names = names or {}
    panels = _panels(impls, studies)
    height = 0.9 + 0.115 * max(sum(int((impls["study"] == s).sum()) + 1 for s in panel) for panel in panels)
    fig, axes = style.figure(width=style.FULL_WIDTH, height=height, ncols=len(panels), squeeze=False, sharex=True)
    for ax, panel in zip(axes[0], panels):
        y, ticks, labels = 0, [], []
        for study in panel:
            ax.text(0.02, y, style.study_label(study), transform=ax.get_yaxis_transform(), ha="left",
                    va="center", fontsize=7, fontweight="bold", zorder=5,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
            y += 1
            for _, r in impls[impls["study"] == study].iterrows():
                color = BOUND_COLORS[r["bound"]]
                ax.plot([r["min"], r["max"]], [y, y], color=color, linewidth=0.6, alpha=0.6)
                ax.plot([r["low"], r["high"]], [y, y], color=color, linewidth=2.2, solid_capstyle="butt")
                ax.plot([r["median"]], [y], marker="o", markersize=3.5, color=color,
                        markerfacecolor="white" if r["short"] else color)
                ticks.append(y)
                labels.append(names.get((study, r["impl"])) or style.label(study, r["impl"]))
                y += 1
        for value, dash in ((bandwidth, "--"), (compute, ":")):
            if math.isfinite(value):
                ax.axvline(value, color=PEAK_LINE, linestyle=dash, linewidth=1.0, zorder=3)
        ax.set_yticks(ticks, labels, fontsize=6)
        ax.set_ylim(y - 0.4, -1)
        ax.tick_params(axis="y", length=0, pad=2)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(f"{rows.model_label(other)} / {rows.model_label(paper)} device time")
        if not panel:
            kit.mark_empty(ax)
    handles = [Line2D([], [], color=c, marker="o", linewidth=2.2, markersize=3.5, label=what)
               for what, c in BOUND_COLORS.items() if (impls["bound"] == what).any()]
    handles += [Line2D([], [], color=PEAK_LINE, linestyle=dash, linewidth=1.0, label=f"{name} ratio {kit.fmt(value)}")
                for name, value, dash in (("bandwidth", bandwidth, "--"), ("compute", compute, ":"))
                if math.isfinite(value)]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=6, bbox_to_anchor=(0.5, 0.0))
    fig.subplots_adjust(wspace=0.8)
    return fig
