"""Every committed GPU model side by side: each claim's verdict on each model, with the values it
compares and their intervals, and each implementation's device time on another model over the
paper's.

A *model* is a folder of ``data/raw/`` that holds rows (:data:`kernels.paper.rows.MODELS` names
it); the paper speaks of one (config ``paper_gpu``). Each model's rows go through the paper's own
tidy tables and report macros (:mod:`kernels.paper.claims`), so a model's verdict is the one the
paper prints when rendered from that folder (``--config gpu=<model>``).

Device time on another model over the paper model's, and what it tells of what bounds each kernel:
:mod:`kernels.paper.bounds`.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from kernels.core.files import write_atomic
from kernels.paper import (
    bounds,
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


#: The software of an environment (:func:`kernels.paper.render.environment_macros`) that
#: :func:`environment_text` compares, by macro: its name where the same, and before its versions.
SOFTWARE = {"EnvTorch": ("PyTorch", "PyTorch"), "EnvTriton": ("Triton", "Triton"),
            "EnvAnchors": ("library", "libraries")}


def environment_text(paper: dict[str, str], other: dict[str, str]) -> str:
    """Where another model's rows ran, for the paper's Method beside the paper model's
    (``paper`` and ``other``: each model's :func:`kernels.paper.render.environment_macros`): "two
    GPUs (driver 580.159.04, CUDA 13.0) with the same PyTorch, Triton and library versions", or the
    versions of what differs ("... with PyTorch 2.12.0 and the same Triton and library versions").
    LaTeX-escaped as its inputs are."""
    same = [name for macro, (name, _) in SOFTWARE.items() if paper.get(macro) == other.get(macro)]
    differ = [f"{name} {other.get(macro, style.MISSING)}" for macro, (_, name) in SOFTWARE.items()
              if paper.get(macro) != other.get(macro)]
    software = kit.and_list(differ + ([f"the same {kit.and_list(same)} versions"] if same else []))
    count = other.get("EnvGpuCount", style.MISSING)
    return (f"{count} GPU{'' if count == 'one' else 's'} (driver {other.get('EnvDriver', style.MISSING)}, CUDA "
            f"{other.get('EnvCuda', style.MISSING)}) with {software}")


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
    partly holds (1 of 2)"; a verdict that decides nothing, "not tested", is never "same":
    :func:`kernels.paper.style.decided`), or :data:`NOT_MEASURED`; empty with one model."""
    out = {}
    for _, r in table.iterrows():
        parts = []
        for model in models[1:]:
            verdict = r[f"{model} verdict"]
            same = verdict == r[f"{models[0]} verdict"] and verdict != NOT_MEASURED and style.decided(verdict)
            parts.append(f"{rows.model_short(model)}: {'same' if same else verdict}")
        out[f"Models{r['macro']}"] = kit.escape_latex("; ".join(parts))
    return out


def _decided_on_both(table: pd.DataFrame, paper: str, other: str) -> pd.DataFrame:
    """The rows of ``table`` (:func:`claims_table`) whose claim is measured and decided on both ``paper``
    and ``other``: no :data:`NOT_MEASURED`, n/a or "not tested" verdict (:func:`kernels.paper.style.decided`)."""
    keep = [NOT_MEASURED not in (a, b) and style.decided(a) and style.decided(b)
            for a, b in zip(table[f"{paper} verdict"], table[f"{other} verdict"])]
    return table[pd.Series(keep, index=table.index, dtype=bool)]


def same_count(table: pd.DataFrame, paper: str, other: str) -> str:
    """How many of the claims measured and decided on both ``paper`` and ``other`` (:func:`claims_table`,
    :func:`_decided_on_both`) have the same verdict on both: ``15 of 18``."""
    both = _decided_on_both(table, paper, other)
    return f"{int((both[f'{paper} verdict'] == both[f'{other} verdict']).sum())} of {len(both)}"


def on_line_count(table: pd.DataFrame, paper: str, other: str) -> str:
    """How many of the claims measured on both ``paper`` and ``other`` (:func:`claims_table`) differ only
    by values on the claim's line (:func:`kernels.paper.reproduce.differs_on_the_line`): neither the same
    nor different."""
    n = sum(1 for _, r in _decided_on_both(table, paper, other).iterrows()
            if reproduce.differs_on_the_line(r[f"{paper} verdict"], r[f"{other} verdict"]))
    return str(n)


def differ_claims(table: pd.DataFrame, paper: str, other: str) -> str:
    """The claims measured on both ``paper`` and ``other`` (:func:`claims_table`) whose verdicts differ by
    more than values on the claim's line (neither :func:`same_count` nor :func:`on_line_count` counts them),
    each by its study and short name (``report.CLAIM_NAMES``, the claim's words without one) with both
    verdicts, and where the two judged different numbers of values, how many fewer the one with fewer
    judged ("FlexAttention's mask memory slope: partly holds (2 of 3) on the H200, partly holds (1 of 2)
    on the H100 (1 value fewer)"), joined by "; " (:data:`kernels.paper.style.MISSING` without one)."""
    texts = []
    for _, r in _decided_on_both(table, paper, other).iterrows():
        a, b = r[f"{paper} verdict"], r[f"{other} verdict"]
        if a == b or reproduce.differs_on_the_line(a, b):
            continue
        name = getattr(render.report_module(r["study"]), "CLAIM_NAMES", {}).get(r["macro"], r["claim"])
        counts = {model: reproduce.verdict_parts(v)[2] for model, v in ((paper, a), (other, b))}
        parts = []
        for model, verdict in ((paper, a), (other, b)):
            fewer = max(counts.values()) - counts[model] if min(counts.values()) else 0
            parts.append(f"{verdict} on the {rows.model_short(model)}"
                         + (f" ({fewer} value{'s' if fewer > 1 else ''} fewer)" if fewer else ""))
        texts.append(f"{style.study_label(r['study'])}'s {name}: {' and '.join(parts)}")
    return "; ".join(texts) or style.MISSING


def render_models(raw: str | Path, paper: str, studies: list[str], sections: dict[str, dict], timing: dict,
                  out_tex: str, out_claims: str, out_ratios: str, out_figure: str,
                  reproductions: str | Path | None = None,
                  tolerance: float = 0.05, runs_out: tuple[str, str] | None = None, checked: dict | None = None,
                  min_within: float = 0.95, uncertainty_out: tuple[str, str] | None = None) -> list[str]:
    """Write the models' comparison: ``out_claims`` (CSV, :func:`claims_table`), ``out_ratios`` (CSV,
    :func:`kernels.paper.bounds.impl_ratios` per other model, column ``model``), ``out_figure`` (PDF, :func:`kernels.paper.bounds.figure` of the
    first other model's ratios; an empty panel without one) and ``out_tex``, the paper's macros: ``ModelsNames``
    (the models, the paper's first), ``ModelsSeveral`` ("true" with another model than the paper's),
    ``ModelsOther`` (the first other model's name, or empty), ``ModelsPaperTBps`` and
    ``ModelsOtherTBps`` (their datasheet bandwidths), ``ModelsPaperGb`` and ``ModelsOtherGb`` (their
    memory), ``ModelsOtherEnvironment`` (:func:`environment_text` of the first other model's rows),
    ``ModelsSame`` (:func:`same_count`), ``ModelsOnLine`` (:func:`on_line_count`), ``ModelsLongMs`` (:data:`kernels.paper.bounds.LONG_MS`), ``ModelsPeaksKnown`` ("true" where the code knows
    both models' peaks), ``ModelsBandwidthRatio`` and ``ModelsComputeRatio``, ``ModelsBoundBandwidth``,
    ``ModelsBoundCompute`` and ``ModelsBoundBetween`` (:func:`kernels.paper.bounds.bound_span` of the implementations near each
    and of those between the two), ``ModelsDifferClaims`` (:func:`differ_claims`), ``Models<verdict macro>``
    (:func:`other_verdicts`), ``ModelsSentence<Study>`` (:func:`kernels.paper.bounds.study_sentence`) and
    ``ModelsClaimsTable`` (a table float, ``tab:models_claims``); with ``reproductions``
    (``data/reproductions``) and ``runs_out`` (the CSV and the macros' file), every measuring run of the
    committed models with its role, outcome and GPU factor (:func:`kernels.paper.runs.render_runs`;
    ``tolerance``: config ``reproduce.tolerance``, ``checked``: config ``reproduce.committed``,
    ``min_within``: config ``reproduce.min_within``); with ``reproductions`` and
    ``uncertainty_out`` too (the CSV and the macros' file), each quoted value on every GPU of each model that
    measured it (:func:`kernels.paper.uncertainty.render_uncertainty`). Returns the models."""
    models = committed_models(raw, paper)
    by_model, states, runs = {}, {}, {}
    envs = {}
    for model in models:
        runs[model] = model_run(raw, model, studies)
        tables = tidy_tables(runs[model], model, sections)
        by_model[model], envs[model] = study_macros(tables), render.environment_macros(list(tables.values()))
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
              "ModelsDifferClaims": kit.escape_latex(differ_claims(table, paper, models[1])) if len(models) > 1 else "",
              "ModelsSame": same_count(table, paper, models[1]) if len(models) > 1 else "",
              "ModelsOnLine": on_line_count(table, paper, models[1]) if len(models) > 1 else "",
              "ModelsLongMs": kit.fmt(bounds.LONG_MS, 1),
              "ModelsOtherEnvironment": environment_text(envs[paper], envs[models[1]]) if len(models) > 1 else "",
              **other_verdicts(table, models)}
    ratios = []
    for other in models[1:]:
        bandwidth, compute = bounds.peak_ratios(paper, other)
        cases = bounds.case_ratios(runs[paper], runs[other])
        impls = bounds.impl_ratios(cases, bandwidth, compute)
        ratios.append(impls.assign(model=other))
        if other == models[1]:
            names = bounds.impl_names(runs[paper])
            values["ModelsPeaksKnown"] = "true" if math.isfinite(bandwidth) and math.isfinite(compute) else "false"
            values["ModelsBandwidthRatio"] = kit.fmt(bandwidth)
            values["ModelsComputeRatio"] = kit.fmt(compute)
            values["ModelsBoundBandwidth"] = bounds.bound_span(impls, bounds.BANDWIDTH)
            values["ModelsBoundCompute"] = bounds.bound_span(impls, bounds.COMPUTE)
            values["ModelsBoundBetween"] = bounds.bound_span(impls, bounds.BETWEEN)
            for study in studies:
                values[f"ModelsSentence{kit.camel(study)}"] = bounds.study_sentence(study, impls, paper, other, bandwidth,
                                                                              compute, names)
            style.save(bounds.figure(impls, studies, paper, other, bandwidth, compute, names), out_figure)
    if len(models) == 1:
        values.update({"ModelsPeaksKnown": "false", "ModelsBandwidthRatio": style.MISSING,
                       "ModelsComputeRatio": style.MISSING, "ModelsBoundBandwidth": style.MISSING,
                       "ModelsBoundCompute": style.MISSING, "ModelsBoundBetween": style.MISSING,
                       **{f"ModelsSentence{kit.camel(s)}": f"{style.study_label(s)}: measured on the "
                          f"{rows.model_label(paper)} alone." for s in studies}})
        fig, ax = style.figure()
        kit.mark_empty(ax)
        style.save(fig, out_figure)
    columns = [*bounds.impl_ratios(bounds.case_ratios([], []), 1.0, 1.0).columns, "model"]
    write_atomic(out_ratios, (pd.concat(ratios) if ratios else pd.DataFrame(columns=columns)).to_csv(index=False))
    values["ModelsClaimsTable"] = claims_float(table, models)
    if reproductions is not None:
        second = reproduce.second_runs(reproductions, studies)
        if runs_out is not None:
            measuring_runs.render_runs(runs, by_model, second, raw, paper, studies, sections, checked or {}, tolerance,
                                       min_within, *runs_out)
        if uncertainty_out is not None:
            uncertainty.render_uncertainty(runs, by_model, second, sections, studies, paper, models, *uncertainty_out)
    header = "% Generated by the rule `models` (kernels/paper/models.py); do not edit."
    write_atomic(out_tex, "\n".join([header, *render.macro_lines(values)]) + "\n")
    return models


def claims_float(table: pd.DataFrame, models: list[str]) -> str:
    """The claims on the models after the paper's (``models[0]``, whose values and verdicts the claims
    table gives, as it gives the others' verdicts under them) as a LaTeX table float (label
    ``tab:models_claims``): a row per claim, per other model the values its verdict compares."""
    others = models[1:]
    frame = pd.DataFrame({"Claim": table["claim"],
                          **{rows.model_label(m): [t or v for v, t in zip(table[f"{m} verdict"], table[f"{m} values"])]
                             for m in others}})
    column = r">{\raggedright\arraybackslash}p{%.2f\linewidth}"
    tabular = render.table_to_latex(frame if others else pd.DataFrame())
    tabular = tabular.replace("\\begin{tabular}{" + "l" * (len(others) + 1) + "}", "\\begin{tabular}{" + column % 0.38
                              + column % (0.56 / max(len(others), 1)) * len(others) + "}", 1)
    names = kit.escape_latex(kit.and_list([rows.model_label(m) for m in others]) or "none")
    return "\n".join([r"\begin{table}[tbp]", r"\centering", r"\scriptsize",
                      r"\caption{The values each claim's verdict compares on each other GPU model with committed rows ("
                      + names + r"), with their intervals, as the claims table derives them from that model's rows;"
                      r" Table~\ref{tab:claims} gives the " + kit.escape_latex(rows.model_label(models[0]))
                      + r"'s values and each model's verdict. A study not measured on a model says so.}",
                      r"\label{tab:models_claims}", tabular.rstrip("\n"), r"\end{table}"])
