"""Every committed GPU model side by side: each claim's verdict on each model, with the values it
compares and their intervals, and each implementation's device time on another model over the
paper's.

A *model* is a folder of ``data/raw/`` that holds rows (:data:`kernels.paper.rows.MODELS` names
it); the paper speaks of one (config ``paper_gpu``). Each model's rows go through the paper's own
tidy tables and report macros (:mod:`kernels.paper.claims`), so a model's verdict is the one the
paper prints when rendered from that folder (``--config gpu=<model>``).

Device time on another model over the paper model's, per case timed ok on both (:func:`case_ratios`),
tells what bounds a kernel (:func:`bound`): the H100 and the H200 share their SM90 compute (peak
bfloat16 989 TFLOP/s on both, a compute ratio of 1.0) and differ in HBM bandwidth (4.8 TB/s against
3.35, :data:`kernels.paper.rows.PEAK_GBPS`), so a kernel bound by memory bandwidth takes 4.8 / 3.35 =
1.43 times as long on the H100, and one bound by its arithmetic, or by its launch and latency, about
as long (:func:`peak_ratios`).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from kernels.core.files import write_atomic
from kernels.gdn.fla_names import fla_label
from kernels.paper import (
    gpu_factor,
    provenance,
    render,
    reproduce,
    rows,
    style,
    uncertainty,
)
from kernels.paper import report_kit as kit
from kernels.paper import runs as measuring_runs
from kernels.paper.claims import claim_labels, load_run, study_macros, tidy_tables

#: A median ratio this close to the bandwidth ratio, as a share of the gap between the compute and
#: the bandwidth ratios (on a log scale), reads "bound by memory bandwidth"; this close to the compute
#: ratio, "bound by compute, launch or host" (a call's launch, its latency or the host's own work
#: take as long on either model); in between, "between the two" (:func:`bound`).
BOUND_SHARE = 0.25
BANDWIDTH, COMPUTE, BETWEEN = "memory bandwidth", "compute, launch or host", "between the two"
#: The verdict cell of a model without rows of the claim's study.
NOT_MEASURED = "not measured"


def committed_models(raw: str | Path, first: str) -> list[str]:
    """The models of ``raw`` (``data/raw``): its folders that hold rows (``<model>/<study>/*.jsonl``),
    ``first`` (the paper's) first, the others sorted; ``cpu`` (rows measured on a CPU) is none.

    Raises:
        ValueError: ``first`` holds no rows in ``raw``.
    """
    found = sorted(p.name for p in Path(raw).glob("*") if p.name != "cpu" and any(p.glob("*/*.jsonl")))
    if first not in found and first != "cpu":
        raise ValueError(f"{raw}/{first}/ holds no rows (models with rows: {found})")
    return [first, *[m for m in found if m != first]]


def model_run(raw: str | Path, model: str, studies) -> list[dict]:
    """The rows of ``studies`` in ``raw/model/`` (:func:`kernels.paper.claims.load_run`; none of a
    study without rows there)."""
    return load_run(sorted(str(p) for study in studies for p in Path(raw, model, study).glob("*.jsonl")))


def model_macros(run: list[dict], model: str, sections: dict[str, dict]) -> dict[str, str]:
    """Every report macro of the studies of ``run`` (:func:`model_run`) on ``model``'s rows, as the
    paper derives them (:func:`kernels.paper.claims.tidy_tables`, ``sections``: each study's config
    section the rows were measured with)."""
    return study_macros(tidy_tables(run, model, sections))


def evidence_text(macros: dict[str, str], evidence) -> str:
    """The values a verdict compares, as text: each ``(macro, words)`` of ``evidence`` (a report's
    ``EVIDENCE`` entry) as the macro's value, ``words`` and its interval
    (:func:`kernels.paper.uncertainty.interval_text`), joined by "; "; :data:`kernels.paper.style.MISSING` and
    ``words`` in parentheses for a value the rows do not give."""
    parts = []
    for name, words in evidence:
        value = macros.get(name, style.MISSING)
        if value == style.MISSING:
            parts.append(f"{style.MISSING} ({words.strip()})")
            continue
        parts.append(" ".join(p for p in (f"{value}{words}", uncertainty.interval_text(macros, name)) if p))
    return "; ".join(parts)


def state_note(state: provenance.StudyState | None) -> str:
    """A model's study state as the claims table notes it beside the verdict: "" when current,
    " (stale)" otherwise, or :data:`NOT_MEASURED` without rows."""
    if state is None or state.state == provenance.NOT_MEASURED:
        return NOT_MEASURED
    return "" if state.state == provenance.CURRENT else f" ({state.state})"


def claims_table(by_model: dict[str, dict[str, str]], states: dict[str, dict[str, provenance.StudyState]],
                 studies) -> pd.DataFrame:
    """Each claim (``report.CLAIMS`` of ``studies``, in the claims table's order) on every model of
    ``by_model`` ({model: its macros}, the paper's first): columns ``study``, ``macro``, ``claim``
    and per model ``<model> verdict`` and ``<model> values`` (:func:`evidence_text` of the study's
    ``EVIDENCE``); a model without rows of the study reads :data:`NOT_MEASURED`, a stale one's
    verdict carries its state (:func:`state_note`), and ``same`` says whether every model's verdict
    is the paper model's."""
    records = []
    for study in studies:
        evidence = getattr(render.report_module(study), "EVIDENCE", {})
        for macro, words in claim_labels([study]).items():
            record = {"study": study, "macro": macro, "claim": words}
            verdicts = []
            for model, macros in by_model.items():
                note = state_note(states.get(model, {}).get(study))
                if note == NOT_MEASURED:
                    record[f"{model} verdict"], record[f"{model} values"] = NOT_MEASURED, ""
                    continue
                verdicts.append(macros.get(macro, style.MISSING))
                record[f"{model} verdict"] = verdicts[-1] + note
                record[f"{model} values"] = evidence_text(macros, evidence.get(macro, ()))
            record["same"] = len(set(verdicts)) <= 1
            records.append(record)
    columns = ["study", "macro", "claim", *[f"{m} {c}" for m in by_model for c in ("verdict", "values")], "same"]
    return pd.DataFrame(records, columns=columns)


def other_verdicts(table: pd.DataFrame, models: list[str]) -> dict[str, str]:
    """The claims table's words under each verdict, macro ``Models<verdict macro>``: each model after
    the paper's (``models[0]``), by the first word of its name, with "same" or its own verdict ("H100:
    partly holds (1 of 2)"), or :data:`NOT_MEASURED`; empty with one model."""
    out = {}
    for _, r in table.iterrows():
        parts = []
        for model in models[1:]:
            verdict = r[f"{model} verdict"]
            same = verdict == r[f"{models[0]} verdict"] and verdict != NOT_MEASURED
            parts.append(f"{rows.model_label(model).split()[0]}: {'same' if same else verdict}")
        out[f"Models{r['macro']}"] = kit.escape_latex("; ".join(parts))
    return out


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


def same_count(table: pd.DataFrame, paper: str, other: str) -> str:
    """How many of the claims measured on both ``paper`` and ``other`` (:func:`claims_table`) have the
    same verdict on both: ``15 of 18``."""
    both = table[(table[f"{paper} verdict"] != NOT_MEASURED) & (table[f"{other} verdict"] != NOT_MEASURED)]
    return f"{int((both[f'{paper} verdict'] == both[f'{other} verdict']).sum())} of {len(both)}"


def on_line_count(table: pd.DataFrame, paper: str, other: str) -> str:
    """How many of the claims measured on both ``paper`` and ``other`` (:func:`claims_table`) differ only
    by values on the claim's line (:func:`kernels.paper.reproduce.differs_on_the_line`): neither the same
    nor different."""
    n = sum(1 for _, r in table.iterrows()
            if NOT_MEASURED not in (r[f"{paper} verdict"], r[f"{other} verdict"])
            and reproduce.differs_on_the_line(r[f"{paper} verdict"], r[f"{other} verdict"]))
    return str(n)


def differ_text(table: pd.DataFrame, paper: str, other: str) -> str:
    """The claims whose verdicts differ on ``paper`` and ``other`` (:func:`claims_table`), each with
    both verdicts and the values behind them, joined by "; " (:data:`kernels.paper.style.MISSING`
    without one)."""
    texts = []
    for _, r in table.iterrows():
        a, b = r[f"{paper} verdict"], r[f"{other} verdict"]
        if a != b and NOT_MEASURED not in (a, b):
            texts.append(f"{r['claim']}: {a} on the {rows.model_label(paper)} ({r[f'{paper} values']}), {b} on the "
                         f"{rows.model_label(other)} ({r[f'{other} values']})")
    return "; ".join(texts) or style.MISSING


def differ_claims(table: pd.DataFrame, paper: str, other: str) -> str:
    """The claims measured on both ``paper`` and ``other`` (:func:`claims_table`) whose verdicts differ by
    more than values on the claim's line (neither :func:`same_count` nor :func:`on_line_count` counts them),
    by name, joined by "; " (:data:`kernels.paper.style.MISSING` without one)."""
    names = [r["claim"] for _, r in table.iterrows()
             if (a := r[f"{paper} verdict"]) != (b := r[f"{other} verdict"]) and NOT_MEASURED not in (a, b)
             and not reproduce.differs_on_the_line(a, b)]
    return "; ".join(names) or style.MISSING


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
                ax.axvline(value, color="grey", linestyle=dash, linewidth=0.8)
        ax.set_yticks(ticks, labels, fontsize=6)
        ax.set_ylim(y - 0.4, -1)
        ax.tick_params(axis="y", length=0, pad=2)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(f"{rows.model_label(other)} / {rows.model_label(paper)} device time")
        if not panel:
            kit.mark_empty(ax)
    handles = [Line2D([], [], color=c, marker="o", linewidth=2.2, markersize=3.5, label=what)
               for what, c in BOUND_COLORS.items() if (impls["bound"] == what).any()]
    handles += [Line2D([], [], color="grey", linestyle=dash, linewidth=0.8, label=f"{name} ratio {kit.fmt(value)}")
                for name, value, dash in (("bandwidth", bandwidth, "--"), ("compute", compute, ":"))
                if math.isfinite(value)]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=6, bbox_to_anchor=(0.5, 0.0))
    fig.subplots_adjust(wspace=0.8)
    return fig


def spread_float(spread: pd.DataFrame) -> str:
    """The same-model spread (:func:`kernels.paper.reproduce.spread_table`) as a LaTeX table float
    (label ``tab:gpu_spread``): per model, study and second or third run, its GPU and the committed
    one, the rows timed on both, the GPU factor with its interval and what both GPUs recorded."""
    frame = gpu_factor.spread_latex(spread)
    body = (render.table_to_latex(frame) if len(frame) else
            r"\begin{tabular}{l}\toprule no second run in \texttt{data/reproductions/} \\ \bottomrule\end{tabular}")
    caption = (r"\caption{GPUs of one model: every second and third run in \texttt{data/reproductions/} against"
               r" its model's committed rows of the study, its GPU factor (second over committed device time, the"
               r" median over the rows of 10\,\textmu{}s or more timed on both, \emph{rows}, with a 95\,\% bootstrap"
               r" interval over them) and the power limit and median SM clock each GPU recorded while timing"
               r" (``not recorded'' for rows measured before the GPU's state was). The reproduction check compares"
               r" each study's second run that config \texttt{reproduce.committed} names. Every number of this paper"
               r" comes from the committed GPU of its study (Table~\ref{tab:provenance}).}")
    return "\n".join([r"\begin{table}[tbp]", r"\centering", r"\scriptsize", caption,
                      r"\label{tab:gpu_spread}", r"\fitwidth{" + body.rstrip("\n") + "}", r"\end{table}"])


def spread_range(spread: pd.DataFrame) -> str:
    """The lowest and highest GPU factor of ``spread`` (:func:`kernels.paper.reproduce.spread_table`),
    ``0.99--1.14``; :data:`kernels.paper.style.MISSING` without a run."""
    if spread.empty:
        return style.MISSING
    return kit.span(spread["factor"].tolist())


def render_models(raw: str | Path, paper: str, studies: list[str], sections: dict[str, dict], timing: dict,
                  out_tex: str, out_claims: str, out_ratios: str, out_figure: str,
                  reproductions: str | Path | None = None, out_spread: str | None = None,
                  tolerance: float = 0.05, runs_out: tuple[str, str] | None = None, checked: dict | None = None,
                  min_within: float = 0.95, uncertainty_out: tuple[str, str] | None = None) -> list[str]:
    """Write the models' comparison: ``out_claims`` (CSV, :func:`claims_table`), ``out_ratios`` (CSV,
    :func:`impl_ratios` per other model, column ``model``), ``out_figure`` (PDF, :func:`figure` of the
    first other model's :func:`impl_ratios`; an empty panel without one) and ``out_tex``, the paper's macros: ``ModelsNames``
    (the models, the paper's first), ``ModelsSeveral`` ("true" with another model than the paper's),
    ``ModelsOther`` (the first other model's name, or empty), ``ModelsPaperTBps`` and
    ``ModelsOtherTBps`` (their datasheet bandwidths), ``ModelsPaperGb`` and ``ModelsOtherGb`` (their
    memory), ``ModelsSame`` (:func:`same_count`), ``ModelsOnLine`` (:func:`on_line_count`), ``ModelsLongMs`` (:data:`LONG_MS`), ``ModelsPeaksKnown`` ("true" where the code knows
    both models' peaks), ``ModelsBandwidthRatio`` and ``ModelsComputeRatio``, ``ModelsBoundBandwidth``,
    ``ModelsBoundCompute`` and ``ModelsBoundBetween`` (:func:`bound_span` of the implementations near each
    and of those between the two), ``ModelsDiffer``
    (:func:`differ_text`), ``ModelsDifferClaims`` (:func:`differ_claims`), ``Models<verdict macro>``
    (:func:`other_verdicts`), ``ModelsSentence<Study>`` (:func:`study_sentence`) and
    ``ModelsClaimsTable`` (a table float, ``tab:models_claims``); with ``reproductions``
    (``data/reproductions``) and ``out_spread``, the GPU factor of every second and third run there
    against its model's committed rows (:func:`kernels.paper.reproduce.spread_table`, ``tolerance``:
    config ``reproduce.tolerance``) as CSV, ``ModelsSpreadRange`` (:func:`spread_range`) and
    ``ModelsSpreadTable`` (:func:`spread_float`); with ``runs_out`` too (the CSV and the macros' file), every
    measuring run of the committed models with its role and outcome (:func:`kernels.paper.runs.render_runs`;
    ``checked``: config ``reproduce.committed``, ``min_within``: config ``reproduce.min_within``); with
    ``uncertainty_out`` too (the CSV and the macros' file), each quoted value on every GPU of each model that
    measured it (:func:`kernels.paper.uncertainty.render_uncertainty`). Returns the models."""
    models = committed_models(raw, paper)
    by_model, states, runs = {}, {}, {}
    for model in models:
        runs[model] = model_run(raw, model, studies)
        by_model[model] = model_macros(runs[model], model, sections)
        states[model] = {s: provenance.study_state(s, Path(raw, model), sections[s], timing) for s in studies}
    table = claims_table(by_model, states, studies)
    write_atomic(out_claims, table.to_csv(index=False))
    def tbps(model):
        return f"{rows.PEAK_GBPS[model] / 1000:g}" if model in rows.PEAK_GBPS else style.MISSING

    values = {"ModelsNames": kit.and_list([rows.model_label(m) for m in models]),
              "ModelsSeveral": "true" if len(models) > 1 else "false",
              "ModelsOther": rows.model_label(models[1]) if len(models) > 1 else "",
              "ModelsPaperTBps": tbps(paper), "ModelsOtherTBps": tbps(models[1]) if len(models) > 1 else "",
              "ModelsPaperGb": kit.fmt(rows.MEMORY_GB.get(paper), 0),
              "ModelsOtherGb": kit.fmt(rows.MEMORY_GB.get(models[1]), 0) if len(models) > 1 else "",
              "ModelsDiffer": kit.escape_latex(differ_text(table, paper, models[1])) if len(models) > 1 else "",
              "ModelsDifferClaims": kit.escape_latex(differ_claims(table, paper, models[1])) if len(models) > 1 else "",
              "ModelsSame": same_count(table, paper, models[1]) if len(models) > 1 else "",
              "ModelsOnLine": on_line_count(table, paper, models[1]) if len(models) > 1 else "",
              "ModelsLongMs": kit.fmt(LONG_MS, 1),
              **other_verdicts(table, models)}
    ratios = []
    for other in models[1:]:
        bandwidth, compute = peak_ratios(paper, other)
        cases = case_ratios(runs[paper], runs[other])
        impls = impl_ratios(cases, bandwidth, compute)
        ratios.append(impls.assign(model=other))
        if other == models[1]:
            names = impl_names(runs[paper])
            values["ModelsPeaksKnown"] = "true" if math.isfinite(bandwidth) and math.isfinite(compute) else "false"
            values["ModelsBandwidthRatio"] = kit.fmt(bandwidth)
            values["ModelsComputeRatio"] = kit.fmt(compute)
            values["ModelsBoundBandwidth"] = bound_span(impls, BANDWIDTH)
            values["ModelsBoundCompute"] = bound_span(impls, COMPUTE)
            values["ModelsBoundBetween"] = bound_span(impls, BETWEEN)
            for study in studies:
                values[f"ModelsSentence{kit.camel(study)}"] = study_sentence(study, impls, paper, other, bandwidth,
                                                                              compute, names)
            style.save(figure(impls, studies, paper, other, bandwidth, compute, names), out_figure)
    if len(models) == 1:
        values.update({"ModelsPeaksKnown": "false", "ModelsBandwidthRatio": style.MISSING,
                       "ModelsComputeRatio": style.MISSING, "ModelsBoundBandwidth": style.MISSING,
                       "ModelsBoundCompute": style.MISSING, "ModelsBoundBetween": style.MISSING,
                       **{f"ModelsSentence{kit.camel(s)}": f"{style.study_label(s)}: measured on the "
                          f"{rows.model_label(paper)} alone." for s in studies}})
        fig, ax = style.figure()
        kit.mark_empty(ax)
        style.save(fig, out_figure)
    columns = [*impl_ratios(case_ratios([], []), 1.0, 1.0).columns, "model"]
    write_atomic(out_ratios, (pd.concat(ratios) if ratios else pd.DataFrame(columns=columns)).to_csv(index=False))
    values["ModelsClaimsTable"] = claims_float(table, models)
    if reproductions is not None and out_spread is not None:
        second = reproduce.second_runs(reproductions, studies)
        spread = reproduce.spread_table(runs, second, tolerance)
        write_atomic(out_spread, spread.to_csv(index=False))
        values.update(ModelsSpreadRange=spread_range(spread), ModelsSpreadTable=spread_float(spread))
        if runs_out is not None:
            measuring_runs.render_runs(runs, by_model, second, raw, paper, studies, sections, checked or {}, tolerance,
                                       min_within, *runs_out)
        if uncertainty_out is not None:
            uncertainty.render_uncertainty(runs, by_model, second, sections, studies, paper, models, *uncertainty_out)
    header = "% Generated by the rule `models` (kernels/paper/models.py); do not edit."
    write_atomic(out_tex, "\n".join([header, *render.macro_lines(values)]) + "\n")
    return models


def claims_float(table: pd.DataFrame, models: list[str]) -> str:
    """The claims on every model as a LaTeX table float (label ``tab:models_claims``): a row per claim,
    per model its verdict and the values it compares."""
    frame = pd.DataFrame({"Claim": table["claim"],
                          **{rows.model_label(m): [f"{v}: {t}" if t else v for v, t in
                                                   zip(table[f"{m} verdict"], table[f"{m} values"])]
                             for m in models}})
    column = r">{\raggedright\arraybackslash}p{%.2f\linewidth}"
    tabular = render.table_to_latex(frame)
    tabular = tabular.replace("\\begin{tabular}{" + "l" * (len(models) + 1) + "}", "\\begin{tabular}{" + column % 0.22
                              + column % (0.66 / len(models)) * len(models) + "}", 1)
    return "\n".join([r"\begin{table}[tbp]", r"\centering", r"\scriptsize",
                      r"\caption{Each claim on every GPU model with committed rows (" + kit.escape_latex(
                          kit.and_list([rows.model_label(m) for m in models])) + r"): the verdict, then the values"
                      r" it compares with their intervals, as the claims table derives them from that model's"
                      r" rows (Table~\ref{tab:claims}); a study not measured on a model says so.}",
                      r"\label{tab:models_claims}", tabular.rstrip("\n"), r"\end{table}"])
