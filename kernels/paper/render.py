"""Render the paper's outputs from tidy tables: figures, LaTeX tables, the
macros of every number quoted in the text, and the PDF itself.

Each study's ``kernels.<study>.report`` supplies ``FIGURES``, ``TABLES`` and
``macros`` (built from :mod:`kernels.paper.report_kit`, never from this module); this
module only reads the tidy CSV, calls them and writes the files (atomically,
with reproducible bytes).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from kernels.core import timing
from kernels.core.files import write_atomic
from kernels.core.gpulease import record_path
from kernels.core.timing import MIN_SPIN_US, SPIN_ENQUEUE_FACTOR
from kernels.paper import report_kit, style
from kernels.paper.report_kit import escape_latex

log = logging.getLogger("kernels.paper.render")

def read_tidy(path: str | os.PathLike) -> pd.DataFrame:
    """The tidy table of a study (an empty DataFrame when it has no rows)."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def report_module(study: str):
    """The report module of ``study`` (``kernels.<study>.report``: ``derive``, ``FIGURES``,
    ``TABLES``, ``macros``, and optionally ``HEADLINES`` and ``CLAIMS``).

    Raises:
        ModuleNotFoundError: ``study`` has no package or no report module.
    """
    return importlib.import_module(f"kernels.{study}.report")


def render_figure(study: str, name: str, tidy_csv: str, out: str) -> None:
    """Draw figure ``name`` of ``study`` from its tidy CSV into ``out`` (PDF).

    A panel left without data (an implementation or pass not measured) says
    so instead of showing bare axes.
    """
    fig = report_module(study).FIGURES[name](read_tidy(tidy_csv))
    report_kit.mark_empty_axes(fig)
    style.save(fig, out)


def _decimals(values: pd.Series, most: int = 3) -> int:
    """The decimals of the most precise of ``values`` (already rounded by a report), at most ``most``."""
    digits = [len(np.format_float_positional(v, trim="-").partition(".")[2]) for v in values.dropna()]
    return min(max(digits, default=0), most)


def table_to_latex(table: pd.DataFrame, caption: str | None = None) -> str:
    """A booktabs/siunitx tabular of ``table``; index and headers escaped.

    A default integer index (row numbers) is left out; a float column prints
    every value with the same decimals (those of its most precise value, as
    the report rounded it, at most three), and so do the numbers of a column
    where a report wrote words in some cells (``"main"``), the words as text; a
    missing value prints as :data:`kernels.paper.style.MISSING`. An empty table
    becomes a one-cell tabular saying that it was not measured.
    """
    if table.empty:
        return ("\\begin{tabular}{l}\n\\toprule\n" + escape_latex(report_kit.NOT_MEASURED)
                + " \\\\\n\\bottomrule\n\\end{tabular}\n")
    table = table.copy()  # Styler escapes index values and headers, not the axis names
    table.index.names = [escape_latex(n) if n is not None else None for n in table.index.names]
    table.columns.names = [escape_latex(n) if n is not None else None for n in table.columns.names]
    styler = table.style
    if isinstance(table.index, pd.RangeIndex):
        styler = styler.hide(axis="index")
    # the report rounded the numbers: each column prints with the decimals of its most precise value
    styler = styler.format(escape="latex", na_rep="{" + style.MISSING + "}")
    worded = [c for c in table.columns if _numbers_and_words(table[c])]
    for column in table.columns:
        if pd.api.types.is_float_dtype(table[column]):
            styler = styler.format(f"{{:.{_decimals(table[column])}f}}", subset=[column],
                                   na_rep="{" + style.MISSING + "}")
        elif column in worded:
            digits = _decimals(pd.to_numeric(table[column], errors="coerce"))
            styler = styler.format(lambda v, d=digits: "{" + escape_latex(v) + "}" if isinstance(v, str)
                                   else f"{v:.{d}f}", subset=[column], na_rep="{" + style.MISSING + "}")
    styler = styler.format_index(escape="latex", axis=0).format_index(escape="latex", axis=1)
    spec = "l" * (0 if isinstance(table.index, pd.RangeIndex) else table.index.nlevels) + "".join(
        "S" if pd.api.types.is_numeric_dtype(table[c]) or c in worded else "l" for c in table.columns)
    latex = styler.to_latex(hrules=True, siunitx=True, caption=caption, sparse_index=False,
                            sparse_columns=True, multicol_align="c", column_format=spec)
    head, rule, body = latex.partition("\\midrule")
    return re.sub(r"\{([^{}]{8,})\}", lambda m: _two_lines(m.group(1)), head) + rule + body


def _numbers_and_words(values: pd.Series) -> bool:
    """Whether ``values`` hold numbers and, in some cells, words (a column of numbers where a report
    wrote what stands in place of one)."""
    return values.dtype == object and {isinstance(v, str) for v in values.dropna()} == {True, False}


def _two_lines(header: str) -> str:
    """A header cell of two or more words as two centred lines, split at the space (dropped) or
    after the hyphen (kept) nearest its middle."""
    cuts = [(i, i + 1) for i, c in enumerate(header) if c == " "]
    cuts += [(i + 1, i + 1) for i, c in enumerate(header[:-1]) if c == "-" and i > 0]
    if not cuts:
        return "{" + header + "}"
    end, start = min(cuts, key=lambda cut: abs(cut[0] - len(header) / 2))
    return "{\\shortstack{" + header[:end] + "\\\\" + header[start:] + "}}"


#: Box 0 (a table's tabular) at its natural width, or shrunk to the line width where wider (graphicx's
#: ``\resizebox``; written out in each table's file so that it needs no macro of the paper's).
_FIT_BOX0 = r"\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\usebox0}\else\usebox0\fi"

#: A study table of more rows than this is set as a ``longtable``, which breaks across pages (a
#: float of about 60 rows of ``\\small`` fills a page with its caption).
LONG_TABLE_ROWS = 45


def render_table(study: str, name: str, tidy_csv: str, out: str) -> None:
    """Write table ``name`` of ``study`` to ``out``: its float, a ``table`` in ``\\small`` with the
    tabular (booktabs, siunitx) of :func:`table_to_latex`, shrunk to the line width where wider
    (:data:`_FIT_BOX0`), or above :data:`LONG_TABLE_ROWS` rows a
    ``longtable`` whose header repeats on each page under "Table N, continued". Either places ``\\tablecaption``, the caption
    and label that :func:`render_floats` defines before it reads this file."""
    table = report_module(study).TABLES[name](read_tidy(tidy_csv))
    write_atomic(out, table_float(table))


def render_table_csv(study: str, name: str, tidy_csv: str, out: str) -> None:
    """Write table ``name`` of ``study`` to ``out`` as CSV, the table a reader opens in place of a
    page of the paper: a first line ``# <caption>`` (read it with ``pandas.read_csv(out,
    comment="#")``), then one column per index level and per column (levels of a column joined by
    a space: "ms cuBLAS + ours"), the values as the table rounds them. Every table of a report's
    ``TABLES`` is written so; those of its ``PAPER_TABLES`` are also set in the paper."""
    func = report_module(study).TABLES[name]
    table = func(read_tidy(tidy_csv))
    if isinstance(table.columns, pd.MultiIndex):
        table.columns = [" ".join(str(level) for level in col if str(level)) for col in table.columns]
    frame = table.reset_index() if any(table.index.names) else table
    text = frame.to_csv(index=False, lineterminator="\n")
    doc = (func.__doc__ or name).strip().split("\n\n")[0]
    write_atomic(out, f"# {' '.join(doc.split())}\n{text}")


def table_float(table: pd.DataFrame) -> str:
    """The LaTeX float of ``table`` (see :func:`render_table`)."""
    latex = table_to_latex(table)
    if len(table) <= LONG_TABLE_ROWS:
        return "\n".join([r"\begin{table}[tbp]", r"\centering", r"\small", r"\setlength{\tabcolsep}{2.5pt}",
                          r"\tablecaption", r"\sbox0{" + latex.rstrip("\n") + "}%", _FIT_BOX0, r"\end{table}"]) + "\n"
    begin, rest = latex.split("\n", 1)
    head, body = rest.split("\\midrule\n", 1)
    body = body.replace("\\bottomrule\n", "").replace("\\end{tabular}", "").rstrip("\n")
    n_cols = len(re.findall(r"(?<!\\)&", body.split("\n", 1)[0])) + 1
    continued = rf"\multicolumn{{{n_cols}}}{{l}}{{Table~\thetable, continued}}\\"
    return "\n".join([r"{\small\setlength{\tabcolsep}{2.5pt}", begin.replace("{tabular}", "{longtable}", 1),
                      r"\tablecaption\\", head + r"\midrule", r"\endfirsthead",
                      continued, head + r"\midrule", r"\endhead", r"\bottomrule", r"\endfoot", body,
                      r"\end{longtable}}"]) + "\n"


_MACRO_NAME = re.compile(r"^[A-Za-z]+$")


def macro_lines(values: dict[str, str]) -> list[str]:
    """``\\newcommand`` lines for ``values``; names must be letters only."""
    lines = []
    for name, value in sorted(values.items()):
        if not _MACRO_NAME.match(name):
            raise ValueError(f"macro name {name!r} must be letters only")
        lines.append(f"\\newcommand{{\\{name}}}{{{value}}}")
    return lines


def environment_macros(frames: list[pd.DataFrame]) -> dict[str, str]:
    """Hardware and software versions of the measurements, from the rows' env columns,
    ``EnvAnchors`` (each anchor package that a row found installed, with its versions: "fla-core
    0.6.0, liger-kernel 0.8.5"; the rows' ``env.anchors``, and the ``anchor_requirement`` and
    ``anchor_version`` of rows whose anchor an adapter pins) and ``EnvGpuCount``, how many GPUs
    (distinct UUIDs) the rows come from, in words up to nine."""
    keys = {"EnvGpuName": "env_gpu_name", "EnvDriver": "env_driver", "EnvCuda": "env_cuda",
            "EnvTorch": "env_torch", "EnvTriton": "env_triton", "EnvPython": "env_python",
            "EnvCommit": "env_git_commit", "EnvSmClock": "env_max_sm_clock_mhz"}
    out = {}
    for macro, column in keys.items():
        values = {str(v) for df in frames if column in df for v in df[column].dropna()}
        if macro == "EnvCommit":  # short hashes, as git prints them ("-dirty" kept)
            values = {v[:7] + v[40:] if re.fullmatch(r"[0-9a-f]{40}(-dirty)?", v) else v for v in values}
        out[macro] = escape_latex(", ".join(sorted(values)) if values else "n/a")
    anchors: dict[str, set[str]] = {}
    for blob in (v for df in frames if "env_anchors" in df for v in df["env_anchors"].dropna().unique()):
        for package, version in (json.loads(blob) if isinstance(blob, str) else blob).items():
            if version:
                anchors.setdefault(package, set()).add(str(version))
    for df in frames:  # anchors pinned by an adapter of their study's (kernels/gdn/flashinfer.py)
        if {"anchor_requirement", "anchor_version"} <= set(df.columns):
            for requirement, version in df[["anchor_requirement", "anchor_version"]].dropna().drop_duplicates().values:
                anchors.setdefault(str(requirement).partition("==")[0], set()).add(str(version))
    out["EnvAnchors"] = escape_latex(", ".join(f"{p} {'/'.join(sorted(v))}" for p, v in sorted(anchors.items()))
                                     or "none")
    gpus = {str(v) for df in frames if "env_gpu_uuid" in df for v in df["env_gpu_uuid"].dropna()}
    out["EnvGpuCount"] = report_kit.words(len(gpus)).lower() if len(gpus) < 10 else str(len(gpus))
    return out


def job_minutes(bench_dir: str | Path) -> dict[str, float]:
    """Minutes of each job of Snakemake's ``benchmark:`` files in ``bench_dir``, by file stem
    (``measure_gdn_chunk``, ``compile_ahead_gdn``): how long it held its GPU's lease (the record
    beside the file, :func:`kernels.core.gpulease.record_path`), else the file's wall time. Snakemake
    starts a job while the one before it still runs on that GPU, so a job's wall time also holds
    its imports and its wait for the GPU. ValueError naming a file without a time (either file,
    where both are there: an edited or truncated one is refused, not passed over)."""
    def seconds_in(path: Path, read) -> float:
        try:
            value = float(read(path))
        except (KeyError, IndexError, TypeError, ValueError, pd.errors.ParserError) as exc:
            raise ValueError(f"{path}: no job time in it ({exc})") from None
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{path}: no job time in it ({value})")
        return value

    out = {}
    for path in sorted(Path(bench_dir).glob("*.tsv")) if bench_dir and Path(bench_dir).is_dir() else []:
        seconds = seconds_in(path, lambda p: pd.read_csv(p, sep="\t")["s"].iloc[-1])
        lease = record_path(path)
        if lease.exists():
            seconds = seconds_in(lease, lambda p: json.loads(p.read_text())["lease_held_s"])
        out[path.stem] = seconds / 60
    return out


def benchmark_macros(bench_dir: str | os.PathLike) -> dict[str, str]:
    """Wall time of the measurement jobs, from Snakemake's ``benchmark:`` files.

    A job's time is :func:`job_minutes`'s: how long it held its GPU's lease, else its wall time.
    ``MeasureMinutes<Study>`` (minutes, summed over ``measure_<study>_<impl>.tsv``),
    ``MeasureJobs`` (how many of those files), ``MeasureMinutesTotal`` (their sum with the
    compile-ahead jobs' ``compile_ahead_<study>.tsv``: each study's GPU minutes summed, as the
    provenance table gives them) and ``MeasureAheadText`` (a clause naming the compile-ahead jobs
    and their minutes, empty without them).
    """
    totals: dict[str, float] = {}
    ahead: list[float] = []
    files = {job: mins for job, mins in (job_minutes(bench_dir) if bench_dir else {}).items()
             if job.startswith(("measure_", "compile_ahead_"))}
    for job, mins in files.items():
        if job.startswith("compile_ahead_"):
            ahead.append(mins)
        else:
            study = job.split("_")[1]
            totals[study] = totals.get(study, 0.0) + mins
    n = len(ahead)
    out = {"MeasureJobs": str(len(files) - n),
           "MeasureMinutesTotal": f"{sum(totals.values()) + sum(ahead):.1f}" if files else "n/a",
           "MeasureAheadText": (f" and {n} job{'s' if n > 1 else ''} that compiled kernels ahead of "
                                f"{'their study' if n > 1 else 'its study'}'s timed ones ({sum(ahead):.1f} of those "
                                f"minutes)" if n else "")}
    for study, mins in totals.items():
        out[f"MeasureMinutes{study.capitalize()}"] = f"{mins:.1f}"
    return out


#: Per-row columns holding a measurement's one-off cost in seconds: the first call
#: (autotuning, JIT), torch.compile, and compiling the block-mask builder.
FIRST_CALL_COLUMNS = ("first_call_s", "compile_s", "mask_compile_s")


def first_call_macros(frames: list[pd.DataFrame]) -> dict[str, str]:
    """``MeasureMinutesFirstCall``: minutes of first calls and compilation summed over every
    row (:data:`FIRST_CALL_COLUMNS`), the one-off part of the jobs' wall time; "n/a" when
    no frame has those columns."""
    seconds = [pd.to_numeric(df[c], errors="coerce").sum() for df in frames for c in FIRST_CALL_COLUMNS
               if c in df]
    return {"MeasureMinutesFirstCall": f"{sum(seconds) / 60:.1f}" if seconds else "n/a"}


def timing_macros(timing: dict, other_timing: Sequence[str] = ()) -> dict[str, str]:
    """The timing settings ``timing`` quoted in the methodology (those the rows were timed with,
    where their fingerprints prove it: :func:`kernels.paper.provenance.quoted_timing`):
    ``TimingWarmupMs``, ``TimingWarmupMaxMs``, ``TimingWarmupWindowMs``,
    ``TimingWarmupTolerancePct``, ``TimingRepMs``, ``TimingMinReps``, ``TimingMaxReps``,
    ``TimingSpinMaxMs``; and the code's: ``TimingSpinMinUs`` (:data:`kernels.core.timing.MIN_SPIN_US`) and
    ``TimingSpinEnqueueFactor`` (the spin's doubling stops above this many times the enqueue,
    :data:`kernels.core.timing.SPIN_ENQUEUE_FACTOR`). ``TimingRowsNote``: a sentence naming the
    studies ``other_timing`` whose rows were timed with other settings than these (their
    fingerprint's ``timing`` part differs: :class:`kernels.paper.provenance.StudyState`), empty
    when there are none."""
    names = report_kit.and_list([style.study_name(s) for s in other_timing])
    note = (rf" The rows of {names} were timed with other settings than these (their fingerprint's timing part"
            r" differs: Table~\ref{tab:provenance})." if names else "")
    return {"TimingRowsNote": note, "TimingSpinMinUs": f"{MIN_SPIN_US:g}",
            "TimingSpinEnqueueFactor": f"{SPIN_ENQUEUE_FACTOR:g}",
            "TimingWarmupMs": f"{timing['warmup_ms']:g}", "TimingWarmupMaxMs": f"{timing['warmup_max_ms']:g}",
            "TimingWarmupWindowMs": f"{timing['warmup_window_ms']:g}",
            "TimingWarmupTolerancePct": f"{timing['warmup_tolerance'] * 100:g}",
            "TimingRepMs": f"{timing['rep_ms']:g}", "TimingMinReps": str(timing["min_reps"]),
            "TimingMaxReps": str(timing["max_reps"]), "TimingSpinMaxMs": f"{timing['spin_max_ms']:g}"}


#: A row "drifts" when its last fifth of repetitions is this much slower (or faster) than its first (collect._drift).
DRIFT_THRESHOLD = 0.05


def _column(frames: list[pd.DataFrame], name: str) -> pd.Series:
    """One tidy column of every frame that has it, numeric, NaN dropped."""
    return pd.concat([pd.to_numeric(df[name], errors="coerce") for df in frames if name in df]
                     or [pd.Series(dtype=float)]).dropna()


def drift_macros(frames: list[pd.DataFrame]) -> dict[str, str]:
    """How steady the timed rows were while timed (the tidy ``drift`` column, from device times):
    ``RowsDriftChecked`` (rows with ten or more repetitions), ``RowsDrifting`` (of those, slower
    by more than :data:`DRIFT_THRESHOLD`), ``RowsSpeeding`` (faster by more), ``RowsDriftWithin``
    and ``RowsDriftWithinPct`` (within it either way), ``RowsDriftThresholdPct``,
    ``RowsDriftMaxPct`` and ``RowsDriftMinPct`` (the largest slowdown and speed-up, %)."""
    drift = _column(frames, "drift")
    within = int((drift.abs() <= DRIFT_THRESHOLD).sum())
    return {"RowsDriftChecked": str(len(drift)), "RowsDrifting": str(int((drift > DRIFT_THRESHOLD).sum())),
            "RowsSpeeding": str(int((drift < -DRIFT_THRESHOLD).sum())), "RowsDriftWithin": str(within),
            "RowsDriftWithinPct": f"{100 * within / len(drift):.0f}" if len(drift) else "n/a",
            "RowsDriftThresholdPct": f"{DRIFT_THRESHOLD * 100:g}",
            "RowsDriftMaxPct": f"{drift.max() * 100:.0f}" if len(drift) else "n/a",
            "RowsDriftMinPct": f"{drift.min() * 100:.0f}" if len(drift) else "n/a"}


def warmup_macros(frames: list[pd.DataFrame]) -> dict[str, str]:
    """How the warm-up and the spin went (tidy ``timing_*`` columns of CUDA rows):
    ``RowsTimed`` (rows with a warm-up), ``RowsWarmupStable`` (their warm-up settled),
    ``RowsSpinShort`` (rows whose device time may hold host time, :func:`kernels.core.timing.host_bound`),
    ``RowsSpinShortImpls`` (their number per implementation, most first: "22 SwiGLU copy, 4 GDN
    token loop"), ``RowsSpinShortEnqueueUs`` (the range of the enqueue time measured alone of those
    whose enqueue is shorter than their spin, µs; n/a if none) and ``WarmupMedianMs``."""
    stable = pd.concat([df["timing_warmup_stable"].dropna().astype(str).str.lower().eq("true")
                        for df in frames if "timing_warmup_stable" in df] or [pd.Series(dtype=bool)])
    short = [df[[timing.host_bound(s, n) for s, n in zip(pd.to_numeric(df["timing_spin_short"], errors="coerce"),
                                                          pd.to_numeric(df["n_reps"], errors="coerce"))]]
             for df in frames if "timing_spin_short" in df]
    short = pd.concat(short) if short else pd.DataFrame(columns=["study", "impl"])
    counts = short.groupby(["study", "impl"]).size().sort_values(ascending=False, kind="stable")
    impls = ", ".join(f"{n} {style.study_label(study)} {style.label(study, impl)}"
                      for (study, impl), n in counts.items())
    enqueue = pd.to_numeric(short.get("timing_enqueue_us"), errors="coerce") if len(short) else pd.Series(dtype=float)
    within = enqueue[enqueue < pd.to_numeric(short.get("timing_spin_us"), errors="coerce")] if len(short) else enqueue
    warm = _column(frames, "timing_warmup_ms")
    return {"RowsTimed": str(len(stable)), "RowsWarmupStable": str(int(stable.sum())),
            "RowsSpinShort": str(len(short)), "RowsSpinShortImpls": impls or "none",
            "RowsSpinShortEnqueueUs": (f"{within.min():.1f}--{within.max():.1f}" if len(within) else style.MISSING),
            "WarmupMedianMs": f"{warm.median():.0f}" if len(warm) else "n/a"}


#: The kinds of verdict (:func:`kernels.paper.report_kit.claim_verdict`,
#: :func:`~kernels.paper.report_kit.scaling_verdict`), in the tally's order, each with its words for several.
VERDICT_KINDS = {"holds": "hold", "exceeded": "exceeded", "partly holds": "partly hold", "missed": "missed",
                 "not reached": "not reached", "on the line": "on the line",
                 style.NOT_TESTED: style.NOT_TESTED}


def verdict_macros(values: dict[str, str]) -> dict[str, str]:
    """The tally of the claims table's verdicts (the macros of ``values`` whose names end in
    ``Verdict``), by kind, a verdict's kind being its words before any count or note ("partly holds
    (9 of 20); 2 on the line" is "partly holds"): ``ClaimsTotal``, the number of claims;
    ``ClaimsTally``, "5 hold, 1 exceeded, ..." in the order of :data:`VERDICT_KINDS`, then "n
    not measured"; ``ClaimsHoldOrExceeded``, the claims whose verdict is "holds" or "exceeded".

    Raises ValueError naming a verdict of no known kind."""
    kinds = {}
    for name, verdict in values.items():
        if not name.endswith("Verdict"):
            continue
        kind = re.split(r" \(|;", verdict, maxsplit=1)[0].strip()
        if kind not in VERDICT_KINDS and kind != style.MISSING:
            raise ValueError(f"macro {name}: verdict {verdict!r} is of no known kind")
        kinds[name] = kind
    counts = {kind: sum(k == kind for k in kinds.values()) for kind in [*VERDICT_KINDS, style.MISSING]}
    tally = [f"{n} {VERDICT_KINDS.get(kind, 'not measured')}" for kind, n in counts.items() if n]
    return {"ClaimsTotal": str(len(kinds)), "ClaimsTally": ", ".join(tally),
            "ClaimsHoldOrExceeded": str(counts["holds"] + counts["exceeded"])}


def render_numbers(studies: list[str], tidy_csvs: list[str], out: str,
                   bench_dir: str | os.PathLike | None = None, timing: dict | None = None,
                   other_timing: Sequence[str] = ()) -> None:
    """Write every number quoted in the text as a LaTeX macro to ``out``.

    The macros: the environment of the measurements (:func:`environment_macros`),
    the measurement jobs' wall time (:func:`benchmark_macros`, from
    ``bench_dir``), its one-off part (:func:`first_call_macros`), the timing
    settings (:func:`timing_macros`, from ``timing``, naming the studies ``other_timing`` whose
    rows were timed with other settings), the rows
    that drifted while timed (:func:`drift_macros`), the warm-up and spin
    (:func:`warmup_macros`), the constants of the verdicts' criteria
    (:func:`kernels.paper.report_kit.criterion_macros`), each study's ``report.macros`` and the
    tally of their verdicts (:func:`verdict_macros`).
    """
    frames = [read_tidy(p) for p in tidy_csvs]
    values = environment_macros(frames)
    values.update(benchmark_macros(bench_dir))
    values.update(first_call_macros(frames))
    values.update(drift_macros(frames))
    values.update(warmup_macros(frames))
    values.update(report_kit.criterion_macros())
    if timing is not None:
        values.update(timing_macros(timing, other_timing))
    for study, df in zip(studies, frames):
        for name, value in report_module(study).macros(df).items():
            if name in values:
                raise ValueError(f"macro {name} defined twice")
            values[name] = value
    values.update(verdict_macros(values))
    header = ["% Generated by the rule `numbers` (kernels/paper/render.py); do not edit."]
    write_atomic(out, "\n".join(header + macro_lines(values)) + "\n")


def coverage_table(configured: dict[str, list[str]], frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Rows measured per study and implementation, by status, against the configured ones.

    ``configured`` maps a study to the implementations its sweep lists; an
    implementation without rows is reported as "not measured". Studies,
    implementations and passes are given by their display names
    (:mod:`kernels.paper.style`; "all three" when every pass was measured).
    """
    records = []
    for study, impls in configured.items():
        df = frames.get(study, pd.DataFrame())
        names = list(dict.fromkeys([*impls, *(df["impl"].unique() if not df.empty else [])]))
        for impl in names:
            rows = df[df["impl"] == impl] if not df.empty else df
            counts = rows["status"].value_counts().to_dict() if not rows.empty else {}
            present = [p for p in style.PASS_LABELS if not rows.empty and p in set(rows["pass"])]
            passes = "all three" if len(present) == len(style.PASS_LABELS) else \
                ", ".join(style.pass_label(p) for p in present)
            records.append({"study": style.study_label(study), "implementation": style.label(study, impl),
                            "passes": passes or "not measured",
                            **{status: int(counts.get(status, 0)) for status in
                               ("ok", "wrong", "error", "oom", "unsupported")}})
    return pd.DataFrame.from_records(records).set_index(["study", "implementation"])


def render_coverage(configured: dict[str, list[str]], tidy_csvs: list[str], out: str) -> None:
    """Write the measurement-coverage table (:func:`coverage_table`) as LaTeX to ``out``."""
    frames = {study: read_tidy(path) for study, path in zip(configured, tidy_csvs)}
    write_atomic(out, "\\setlength{\\tabcolsep}{2.5pt}\n" + table_to_latex(coverage_table(configured, frames)))


def caption(func) -> str:
    """The first paragraph of a figure or table function's docstring, as a caption."""
    doc = (func.__doc__ or func.__name__).strip().split("\n\n")[0]
    return escape_latex(" ".join(doc.split()))


def paper_tables(report) -> list[str]:
    """The tables of a report module set in the paper: its ``PAPER_TABLES`` (default: every table
    of ``TABLES``); the others are the CSV files of :func:`render_table_csv` alone.

    Raises ValueError naming a ``PAPER_TABLES`` entry that ``TABLES`` lacks."""
    names = list(getattr(report, "PAPER_TABLES", report.TABLES))
    unknown = [n for n in names if n not in report.TABLES]
    if unknown:
        raise ValueError(f"{report.__name__}.PAPER_TABLES names {unknown}, which are not in its TABLES")
    return names


def render_floats(study: str, out: str) -> None:
    """Write the LaTeX figure and table environments of ``study`` to ``out``, each
    defined, not placed: the paper places one with ``\\placefloat{fig:<name>}`` (or
    ``tab:<name>``) where the text first cites it.

    Captions are the first paragraph of each figure or table function's
    docstring; labels are ``fig:<name>`` and ``tab:<name>``. A table's caption and label are
    ``\\tablecaption``, which its file (:func:`render_table`: a float, or a ``longtable`` that
    breaks across pages) places; tables are set in ``\\small`` at their natural width (never
    shrunk).
    """
    report = report_module(study)
    parts = [f"% Generated by the rule `floats` for study {study}; do not edit."]
    for name, func in report.FIGURES.items():
        parts.append("\n".join([
            rf"\expandafter\def\csname float@fig:{name}\endcsname{{%",
            r"\begin{figure}[tbp]", r"\centering",
            rf"\fitgraphics{{{name}.pdf}}",
            rf"\caption{{{caption(func)}}}", rf"\label{{fig:{name}}}", r"\end{figure}}"]))
    for name in paper_tables(report):
        func = report.TABLES[name]
        parts.append("\n".join([
            rf"\expandafter\def\csname float@tab:{name}\endcsname{{%",
            rf"\def\tablecaption{{\caption{{{caption(func)}}}\label{{tab:{name}}}}}%",
            r"\input{generated/" + name + ".tex}}"]))
    write_atomic(out, "\n\n".join(parts) + "\n")
