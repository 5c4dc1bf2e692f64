"""Each quoted value's spread across the GPUs of a model beside its within-run interval.

A value's interval (``<name>Ci``, or ``[<name>Low, <name>High]`` of a fitted slope:
:func:`interval_text`) covers the timing noise of one run on one GPU; GPUs of one model differ more
than that (:mod:`kernels.paper.gpu_factor`). Where a study was measured on two or more GPUs of a
model (its committed rows in ``data/raw/<model>/`` and each second and third run of it in
``data/reproductions/``), each value the claims' verdicts compare (the reports' ``EVIDENCE``) and
each headline number (``HEADLINES``) is read on every one of them (:func:`quoted_values`,
:func:`uncertainty_table`) and set beside the committed run's interval:

- the *across-GPU range*: from the lowest to the highest reading over the GPUs (of a range over
  sizes, ``1.72--1.74``, from the lowest lower end to the highest upper end), with how many GPUs;
- its *width*: how far the value moves across GPUs, the larger of its two ends' moves (max minus
  min over the GPUs) for a range, in the value's unit; its *spread* in % of the committed value
  (that end's);
- the *within-run width*: the interval's width, less that of the range itself for a range (the
  interval runs from the lowest to the highest end of the range's values, and the range's own
  width is the spread over sizes, not noise);
- which *dominates*: :data:`ACROSS` where another GPU's reading (of a range, either end) lies outside
  the committed run's interval by more than one unit of the last printed digit (a unit is the
  rounding's as much as the GPUs': ``2.09`` against ``2.11 [2.11, 2.12]`` is outside, ``2.10`` is not),
  so that the GPUs differ by more than one run's noise; else :data:`WITHIN`; :data:`ONE_GPU` where one
  GPU measured the value, :data:`NO_INTERVAL` where the value has no interval.

The values are read from the macros' text as the paper prints them (``2.11``, ``5.80--6.76``,
``8.2K`` tokens: :func:`parse`), so the widths are those of the printed digits; a value that is not a
number (``n/a``, a crossover beyond the lengths measured, ``above 512K``) takes no part in a range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kernels.core.files import write_atomic
from kernels.paper import gpu_factor, render, rows, style
from kernels.paper import report_kit as kit
from kernels.paper.claims import study_macros, tidy_tables

ACROSS, WITHIN, ONE_GPU, NO_INTERVAL = "across GPUs", "within run", "one GPU", "no interval"
#: A token count in K, as :func:`kernels.paper.style.tokens` prints it.
K = 1024
_NUMBER = r"(-?\d+(?:\.\d+)?)(K?)"
_VALUE = re.compile(rf"^{_NUMBER}(?:--{_NUMBER})?$")
_INTERVAL = re.compile(rf"^\[{_NUMBER}, {_NUMBER}\]")
#: The columns of :func:`uncertainty_table`; ``runs``: each GPU's reading with its interval.
COLUMNS = ["model", "study", "value", "words", "gpu", "committed", "interval", "runs", "gpus", "low", "high",
           "across", "across_width", "within_width", "spread_pct", "dominates"]


@dataclass(frozen=True)
class Reading:
    """A printed value as numbers: its ends ``low`` and ``high`` (equal for one number; tokens for a
    length printed in K), whether it is a length in tokens, and its decimals as printed."""

    low: float
    high: float
    tokens: bool = False
    digits: int = 2

    @property
    def resolution(self) -> float:
        """One unit of the last printed digit, in the value's unit (tokens for a length)."""
        return 10.0 ** -self.digits * (K if self.tokens else 1)

    def text(self, low: float, high: float) -> str:
        """``low``--``high`` printed as this reading is (one number where they read the same)."""
        if self.tokens:
            lo, hi = style.tokens(low), style.tokens(high)
            return lo if lo == hi else f"{lo}--{hi}"
        return kit.span([low, high], self.digits)


def _number(digits: str, k: str) -> float:
    return float(digits) * (K if k else 1)


def parse(text: str | None) -> Reading | None:
    """A macro's value, ``2.11``, ``5.80--6.76`` or ``8.2K`` (tokens), as a :class:`Reading`; None for
    any other text (``n/a``, ``above 512K``)."""
    m = _VALUE.match(str(text or "").strip())
    if not m:
        return None
    low = _number(m.group(1), m.group(2))
    high = _number(m.group(3), m.group(4)) if m.group(3) else low
    digits = max(len(d.partition(".")[2]) for d in (m.group(1), m.group(3) or ""))
    return Reading(low, high, bool(m.group(2) or m.group(4)), digits)


def interval_text(macros: dict[str, str], name: str) -> str | None:
    """The interval the text prints after value ``name``: its macro ``<name>Ci``, or ``[<name>Low,
    <name>High]`` of a fitted slope; None without one."""
    if name + "Ci" in macros:
        return macros[name + "Ci"]
    if name + "Low" in macros:
        return f"[{macros[name + 'Low']}, {macros[name + 'High']}]"
    return None


def parse_interval(text: str | None) -> tuple[float, float] | None:
    """An interval's text, ``[2.11, 2.12]`` (a ``(tie)`` after it ignored) or ``[8.1K, 8.2K]``, as its
    two ends; None for any other (``n/a``, none)."""
    m = _INTERVAL.match(str(text or "").strip())
    return (_number(m.group(1), m.group(2)), _number(m.group(3), m.group(4))) if m else None


def quoted_values(studies) -> list[dict]:
    """Every value the paper quotes for ``studies``, each once, in the table's order: per study, the
    headline numbers (``report.HEADLINES``, in its order), then each other value the claims'
    verdicts compare (``report.EVIDENCE``, in ``report.CLAIMS``' order). A value a verdict compares is
    labelled by its claim's name (``report.CLAIM_NAMES``; the claim's words without one) and its words
    there, any other by the abstract's words. Each a dict ``study``, ``value`` (the macro) and
    ``words``."""
    out, seen = [], set()
    for study in studies:
        report = render.report_module(study)
        names = getattr(report, "CLAIM_NAMES", {})
        compared = {name: f"{names.get(verdict, getattr(report, 'CLAIMS', {}).get(verdict, verdict))}: {words.strip()}"
                    for verdict, evidence in getattr(report, "EVIDENCE", {}).items() for name, words in evidence}
        listed = [(name, compared.get(name, words.strip())) for name, words in getattr(report, "HEADLINES", {}).items()]
        for name, words in [*listed, *compared.items()]:
            if name not in seen:
                seen.add(name)
                out.append({"study": study, "value": name, "words": words})
    return out


def measured_runs(committed: dict[str, list[dict]], macros: dict[str, dict[str, str]],
                  second: list[tuple[Path, str, list[dict]]], sections: dict[str, dict], studies) -> list[dict]:
    """Every run of ``studies`` as runs of :func:`uncertainty_table`: each model's committed rows per
    study (``committed``: {model: its rows}, ``macros``: {model: its report macros}, both as the
    ``models`` rule derives them), then each second and third run ``second`` (``(folder, study,
    rows)``, :func:`kernels.paper.reproduce.second_runs`) with its model (that of its rows' GPU), its GPU
    and its report macros as the paper derives them (``sections``: each study's config section)."""
    out = [{"model": model, "study": study, "run": "committed", "gpu": gpu_factor.run_gpu(run, study),
            "macros": macros[model], "committed": True}
           for model, run in committed.items() for study in studies if any(r["study"] == study for r in run)]
    for folder, study, run in second:
        model = rows.row_model(run[0])
        out.append({"model": model, "study": study, "run": Path(folder).name, "gpu": gpu_factor.run_gpu(run, study),
                    "macros": study_macros(tidy_tables(run, model, sections)), "committed": False})
    return out


def _widths(committed: Reading, interval: tuple[float, float] | None, readings: list[Reading]) -> tuple:
    """The across-GPU width, the spread in % of the committed value and the within-run width (module
    docstring) of ``readings`` (the committed first); NaN where not defined."""
    moves = [(max(getattr(r, end) for r in readings) - min(getattr(r, end) for r in readings), getattr(committed, end))
             for end in ("low", "high")]
    width, base = max(moves)
    pct = 100 * width / abs(base) if base else float("nan")
    within = interval[1] - interval[0] - (committed.high - committed.low) if interval else float("nan")
    return width, pct, within


def value_record(model: str, value: dict, committed: dict, others: list[dict]) -> dict:
    """One record of :data:`COLUMNS`: ``value`` (of :func:`quoted_values`) on ``model``'s committed
    run ``committed`` and its other runs ``others`` (each a dict ``run``, ``gpu`` and ``macros``)."""
    name = value["value"]
    macros = committed["macros"]
    text, interval = macros.get(name, style.MISSING), interval_text(macros, name)
    runs = [r for r in [committed, *others] if parse(r["macros"].get(name)) is not None]
    readings = [parse(r["macros"][name]) for r in runs]
    gpus = len({r["gpu"] for r in runs})
    record = {"model": model, "study": value["study"], "value": name, "words": value["words"],
              "gpu": committed["gpu"], "committed": text, "interval": interval or "",
              "runs": "; ".join(" ".join(filter(None, (f"{r['gpu']}: {r['macros'][name]}",
                                                       interval_text(r["macros"], name)))) for r in runs),
              "gpus": gpus,
              "low": float("nan"), "high": float("nan"), "across": style.MISSING, "across_width": float("nan"),
              "within_width": float("nan"), "spread_pct": float("nan"), "dominates": style.MISSING}
    first = parse(text)
    if first is None:
        return record
    low, high = min(r.low for r in readings), max(r.high for r in readings)
    bounds = parse_interval(interval)
    width, pct, within = _widths(first, bounds, readings)
    record.update(low=low, high=high, within_width=within)
    if gpus < 2:
        return {**record, "across": ONE_GPU, "dominates": ONE_GPU}
    if bounds is None:
        dominates = NO_INTERVAL
    else:
        slack = first.resolution + 1e-9
        outside = any(r.low < bounds[0] - slack or r.high > bounds[1] + slack for r in readings)
        dominates = ACROSS if outside else WITHIN
    return {**record, "across": f"{first.text(low, high)} ({gpus} GPUs)", "across_width": width, "spread_pct": pct,
            "dominates": dominates}


def uncertainty_table(runs: list[dict], values: list[dict]) -> pd.DataFrame:
    """Each of ``values`` (:func:`quoted_values`) on each model: its committed run's value and
    interval, its reading on every run of the model that measured it and which dominates (module
    docstring). ``runs``: dicts ``model``, ``study``, ``run``, ``gpu``, ``macros`` and ``committed``
    (True for the model's committed rows of the study, one per model and study); a model without
    committed rows of a study has no record of its values. Columns :data:`COLUMNS`, by model (in the
    order of ``runs``) and value."""
    records = []
    for model in dict.fromkeys(r["model"] for r in runs if r["committed"]):
        for value in values:
            mine = [r for r in runs if r["model"] == model and r["study"] == value["study"]]
            committed = [r for r in mine if r["committed"]]
            if committed:
                records.append(value_record(model, value, committed[0], [r for r in mine if not r["committed"]]))
    return pd.DataFrame(records, columns=COLUMNS)


def summary_macros(table: pd.DataFrame, model: str) -> dict[str, str]:
    """The text's numbers on ``model``'s values of ``table`` (:func:`uncertainty_table`):
    ``AcrossWider`` (how many another GPU reads outside their committed interval: :data:`ACROSS`),
    ``AcrossCompared`` (of how many: those measured on two or more GPUs with an interval),
    ``AcrossDominant`` (what is wider for most of them: "the range across GPUs", "the within-run
    interval", or "neither" on a tie or none),
    ``AcrossLargestPct`` (the largest spread across GPUs, % of the value) and ``AcrossLargestValue``
    (that value's study and words, a trailing ``, ×`` left out: ``SwiGLU: fusion: × ours``), :data:`kernels.paper.style.MISSING`
    where no value has two GPUs; and
    ``Across<value macro>``, each value's across-GPU range (``1.61--1.66 (3 GPUs)``, ``one GPU``)."""
    mine = table[table["model"] == model]
    compared = mine[mine["dominates"].isin([ACROSS, WITHIN])]
    spread = mine[mine["spread_pct"].notna()]
    largest = spread.loc[spread["spread_pct"].idxmax()] if len(spread) else None
    wider = int((compared["dominates"] == ACROSS).sum())
    dominant = ("the range across GPUs" if 2 * wider > len(compared) else
                "the within-run interval" if 2 * wider < len(compared) else "neither")
    return {"AcrossWider": str(wider), "AcrossCompared": str(len(compared)), "AcrossDominant": dominant,
            "AcrossLargestPct": kit.fmt(largest["spread_pct"], 1) if largest is not None else style.MISSING,
            "AcrossLargestValue": (kit.escape_latex(f"{style.study_label(largest['study'])}: "
                                                    f"{largest['words'].removesuffix(', ×')}")
                                   if largest is not None else style.MISSING),
            **{f"Across{r.value}": kit.escape_latex(r.across) for r in mine.itertuples()}}


def uncertainty_float(table: pd.DataFrame, model: str, models: list[str]) -> str:
    """``model``'s values of ``table`` (:func:`uncertainty_table`) as a LaTeX table float in ``\\small``
    (label ``tab:uncertainty``), one row per value its committed run gives, by study: its words, its
    committed value with its interval, its across-GPU range and which dominates; the caption says how
    many GPUs the other ``models`` measured their values on."""
    mine = table[(table["model"] == model) & (table["across"] != style.MISSING)].reset_index(drop=True)
    frame = pd.DataFrame({
        "Value": [w[:1].upper() + w[1:] for w in mine["words"]],
        "committed GPU (interval)": [f"{c} {i}".strip() for c, i in zip(mine["committed"], mine["interval"])],
        "all GPUs (range)": mine["across"], "dominates": mine["dominates"]})
    column = r">{\raggedright\arraybackslash}p{0.46\linewidth}"
    tabular = render.table_to_latex(frame).replace(r"\begin{tabular}{llll}", r"\begin{tabular}{" + column + "lll}", 1)
    others = [f"the {rows.model_label(other)}'s values " + (f"on two or more GPUs: {n}" if n else "are each of one GPU")
              for other in models if other != model
              for n in [int(((table["model"] == other) & (table["gpus"] >= 2)).sum())]]
    said = "; ".join(others)
    caption = (r"\caption{Each headline number and each value the claims' verdicts compare (Table~\ref{tab:claims})"
               rf" on the {kit.escape_latex(rows.model_label(model))}: on its study's committed GPU with its"
               r" within-run interval (as in the text), and its range over every GPU of the model that measured it"
               r" (the committed rows and each run in \texttt{data/reproductions/}). \emph{Dominates}: \emph{"
               + ACROSS + r"} where another GPU's reading (of a range, either end) lies outside the committed"
               r" interval by more than one unit of its last printed digit, else \emph{"
               + WITHIN + r"}; \emph{" + NO_INTERVAL
               + r"} where it has none; a value not measured there is left out; each GPU's reading with its interval:"
               + r" \texttt{results/uncertainty.csv}." + (f" {kit.escape_latex(said[:1].upper() + said[1:])}."
                                                           if said else "") + "}")
    return "\n".join([r"\begin{table}[tbp]", r"\centering", r"\small", r"\setlength{\tabcolsep}{3pt}", caption,
                      r"\label{tab:uncertainty}", r"\fitwidth{" + tabular.rstrip("\n") + "}", r"\end{table}"])


def render_uncertainty(committed: dict[str, list[dict]], macros: dict[str, dict[str, str]],
                       second: list[tuple[Path, str, list[dict]]], sections: dict[str, dict], studies, paper: str,
                       models: list[str], out_csv: str, out_tex: str) -> None:
    """Write :func:`uncertainty_table` of the runs of :func:`measured_runs` (its arguments: ``committed``,
    ``macros``, ``second``, ``sections``, ``studies``) and the ``studies``' :func:`quoted_values` to
    ``out_csv``, and to ``out_tex`` the macros of ``paper`` (the paper's model): :func:`summary_macros`
    and ``AcrossTable`` (:func:`uncertainty_float` of ``models``)."""
    table = uncertainty_table(measured_runs(committed, macros, second, sections, studies), quoted_values(studies))
    write_atomic(out_csv, table.to_csv(index=False))
    values = {**summary_macros(table, paper), "AcrossTable": uncertainty_float(table, paper, models)}
    header = "% Generated by the rule `models` (kernels/paper/uncertainty.py); do not edit."
    write_atomic(out_tex, "\n".join([header, *render.macro_lines(values)]) + "\n")
