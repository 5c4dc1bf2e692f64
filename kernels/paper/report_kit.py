"""What every study's report builds its figures, tables and macros from.

The reports (``kernels/<study>/report.py``) take a tidy table (:mod:`kernels.paper.collect`)
and return figures, DataFrames and macro texts; :mod:`kernels.paper.render` writes them. This
module holds what they share, so that each is written once: the number format of a macro
(:func:`fmt`) and of a range (:func:`span`), a row's value by selection (:func:`first`,
:func:`median`), a baseline's value at each row's case (:func:`baseline`), the rows of a config
role (:func:`with_role`), a tidy table with the columns a report reads, rows or none
(:func:`tidy_frame`), a shape's and a name's part of a macro name (:func:`shape_name`,
:func:`camel`), plain text in LaTeX (:func:`escape_latex`), the
implementations in a study's order (:func:`ordered`), grouped bars (:func:`grouped_bars`),
the "not measured" marker of an empty panel (:data:`NOT_MEASURED`, :func:`mark_empty`), the
per-kernel table (:func:`kernel_table`), the ratio of two rows' median times with its bootstrap
interval (:func:`ratio`, :func:`ratios`, the median of several such ratios, :func:`median_ratio`,
written by :func:`interval`), the verdict on a claimed range (:func:`claim_verdict`,
:func:`partly_holds`) and that on a claimed growth from fitted log-log slopes
(:func:`follows_power`, :func:`scaling_verdict`, :func:`below_one`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from kernels.paper import style
from kernels.paper.rows import ROLES

#: The studies' config files (config/studies/<study>.yaml).
CONFIG = Path(__file__).resolve().parents[2] / "config" / "studies"

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                   "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                   "^": r"\textasciicircum{}"}

#: What an empty panel says (figures; :func:`kernels.paper.render.table_to_latex` for an empty table).
NOT_MEASURED = "not measured in these data"


def fmt(value, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or :data:`kernels.paper.style.MISSING` when it is None, NaN,
    infinite or not a number (a macro of a value not measured)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return style.MISSING
    return f"{v:.{digits}f}" if np.isfinite(v) else style.MISSING


def span(values: Iterable, digits: int = 2) -> str:
    """``lo--hi`` of the finite ``values`` with ``digits`` decimals (:func:`fmt`), the one value
    where the two read the same, :data:`kernels.paper.style.MISSING` when none is finite (a macro of a
    range of measurements)."""
    finite = [float(v) for v in values if v is not None and np.isfinite(float(v))]
    if not finite:
        return style.MISSING
    lo, hi = fmt(min(finite), digits), fmt(max(finite), digits)
    return lo if lo == hi else f"{lo}--{hi}"


def clip(text: str, chars: int) -> str:
    """``text`` cut to at most ``chars`` characters, ending in "…" where it was cut."""
    return text if len(text) <= chars else text[:chars - 1].rstrip() + "…"


def camel(name: str) -> str:
    """A name in a macro name (letters only): each run of letters capitalised, the rest dropped,
    ``fla_chunk`` -> ``FlaChunk``."""
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z]+", name))


def escape_latex(text: str) -> str:
    """Escape LaTeX's special characters in plain text (a macro that quotes a message, a table's
    headers)."""
    return "".join(_LATEX_SPECIALS.get(c, c) for c in str(text))


def first(d: pd.DataFrame, col: str):
    """``col`` of the first row of ``d``; NaN when ``d`` has no rows or no such column."""
    return d[col].iloc[0] if not d.empty and col in d else np.nan


def median(d: pd.DataFrame, col: str, **where) -> float:
    """The median of ``col`` over the rows of ``d`` whose columns equal ``where`` (NaN if none)."""
    for key, value in where.items():
        d = d[d[key].eq(value)]
    return float(d[col].median()) if not d.empty else float("nan")


def baseline(df: pd.DataFrame, sel: pd.Series, keys: Sequence[str], col: str = "device_ms") -> pd.Series:
    """For every row of ``df``, ``col`` of the first row selected by ``sel`` (a boolean Series on
    ``df``) with a value of ``col`` and the same ``keys``; NaN where there is none."""
    keys = list(keys)
    ref = df.loc[sel, keys + [col]].dropna(subset=[col]).drop_duplicates(keys)
    merged = df[keys].merge(ref, on=keys, how="left")
    return pd.Series(merged[col].to_numpy(), index=df.index)


def tidy_frame(df: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """``df`` with each of ``columns`` that it lacks added, all NaN: the tidy table of a study
    without rows (read back with no columns at all) then selects, filters and groups like one with
    rows, so that a report needs no guard before each selection."""
    missing = [c for c in columns if c not in df]
    return df.reindex(columns=[*df.columns, *missing]) if missing else df


def has_role(df: pd.DataFrame, role: str) -> pd.Series:
    """Whether each row of ``df`` has ``role`` among its ``roles`` (the tidy table's space-separated
    cell, set from the config: :func:`kernels.paper.collect.with_roles`); False without the column."""
    if ROLES not in df:
        return pd.Series(False, index=df.index)
    return df[ROLES].fillna("").astype(str).str.split().map(lambda roles: role in roles).astype(bool)


def with_role(df: pd.DataFrame, role: str) -> pd.DataFrame:
    """The rows of ``df`` that have ``role`` (:func:`has_role`)."""
    return df[has_role(df, role)]


_ONES = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten", "Eleven",
         "Twelve", "Thirteen", "Fourteen", "Fifteen", "Sixteen", "Seventeen", "Eighteen", "Nineteen"]
_TENS = ["", "", "Twenty", "Thirty", "Forty", "Fifty", "Sixty", "Seventy", "Eighty", "Ninety"]


def and_list(names: Sequence[str]) -> str:
    """Names as a phrase: ``["a", "b", "c"]`` -> ``"a, b and c"``; ``""`` for none."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def words(n: int) -> str:
    """A whole number from 0 to 999 in capitalised words without spaces (macro names are letters
    only): ``32`` -> ``ThirtyTwo``, ``128`` -> ``OneHundredTwentyEight``. ValueError outside."""
    n = int(n)
    if not 0 <= n < 1000:
        raise ValueError(f"{n} has no macro name (0 to 999; a size above that is written in K)")
    if n >= 100:
        return _ONES[n // 100] + "Hundred" + (words(n % 100) if n % 100 else "")
    return _ONES[n] if n < 20 else _TENS[n // 10] + (_ONES[n % 10] if n % 10 else "")


def size_name(n: int) -> str:
    """A size in a macro name: in K (1024) when it is a whole number of them, ``8192`` ->
    ``EightK``, ``1024`` -> ``OneK``; else in words (:func:`words`)."""
    n = int(n)
    return words(n // 1024) + "K" if n >= 1024 and n % 1024 == 0 else words(n)


def shape_name(**dims) -> str:
    """A shape in a macro name, letter and size in the order given:
    ``shape_name(B=4, T=8192)`` -> ``BFourTEightK`` (:func:`size_name`)."""
    return "".join(f"{k}{size_name(v)}" for k, v in dims.items())


def study_config(study: str, run: str = "sweep") -> dict:
    """Section ``run`` of ``config/studies/<study>.yaml``: by default the ``sweep``, whose cases
    the paper's text is written about (a report names its macros after its shapes)."""
    return yaml.safe_load((CONFIG / f"{study}.yaml").read_text())[study][run]


def shape_names(shapes: Iterable[dict], key: str, dims: dict[str, str], fields: Sequence[str]) -> dict[tuple, str]:
    """``{shape: macro name}`` of config entries ``shapes`` (dicts): each shape as the tuple of its
    ``fields``, named by :func:`shape_name` of the fields ``dims`` maps letters to
    (``{"B": "batch", "T": "seqlen"}``). ValueError naming the config ``key`` when two shapes get
    one name (they differ in a field the name leaves out)."""
    out = {}
    for shape in shapes:
        ident = tuple(shape[field] for field in fields)
        name = shape_name(**{letter: shape[field] for letter, field in dims.items()})
        if name in out.values() and out.get(ident) != name:
            raise ValueError(f"{key}: two shapes have the macro name {name}; a shape's macro names hold "
                             f"{', '.join(dims.values())} only")
        out[ident] = name
    return out


def ordered(present: Iterable[str], order: Sequence[str]) -> list[str]:
    """The distinct names of ``present`` in ``order`` (a study's implementations), the others after
    them in the order they first appear."""
    present = list(dict.fromkeys(present))
    return [i for i in order if i in present] + [i for i in present if i not in order]


def grouped_bars(ax, d: pd.DataFrame, col: str, groups: str, impls: Sequence[str], colors: dict,
                 labels: dict, yerr: dict | None = None) -> dict[str, np.ndarray]:
    """Bars of ``col``, one group per value of column ``groups`` of ``d`` (in order of appearance,
    on x, labelled under its centre) and one bar per implementation of ``impls`` within it (colour
    ``colors[impl]``, legend ``labels[impl]``); ``yerr`` maps an impl to its error bars (2 x groups,
    low and high) where it has them. A group an impl lacks (no finite value) leaves its bar out and
    the group's other bars close up around its centre. Returns each impl's bar centres, one per group
    (NaN where it has no bar)."""
    names = list(dict.fromkeys(d[groups]))
    width = 0.8 / max(len(impls), 1)
    values = {}
    for impl in impls:
        rows = d[d["impl"] == impl].set_index(groups)
        values[impl] = pd.to_numeric(rows[~rows.index.duplicated()].reindex(names)[col], errors="coerce").to_numpy()
    present = np.array([np.isfinite(values[impl]) for impl in impls]).reshape(len(impls), len(names))
    slot = present.cumsum(axis=0) - 1  # an impl's place among the bars of its group
    centres = {}
    for j, impl in enumerate(impls):
        x = np.arange(len(names)) + (slot[j] - (present.sum(axis=0) - 1) / 2) * width
        centres[impl] = np.where(present[j], x, np.nan)
        err = (yerr or {}).get(impl)
        keep = present[j]
        ax.bar(x[keep], values[impl][keep], width, label=labels[impl], color=colors[impl],
               yerr=None if err is None else np.asarray(err)[:, keep],
               error_kw={"elinewidth": 0.6, "capsize": 1.5})
    ax.set_xticks(np.arange(len(names)), names, fontsize=6)
    return centres


def mark_empty(ax) -> None:
    """Write :data:`NOT_MEASURED` across the panel ``ax`` (one left without data)."""
    ax.text(0.5, 0.5, NOT_MEASURED, transform=ax.transAxes, ha="center", va="center", color="0.4")


def mark_empty_axes(fig) -> None:
    """:func:`mark_empty` on every visible panel of ``fig`` that has no data and no text yet."""
    for ax in fig.axes:
        if ax.get_visible() and not ax.has_data() and not ax.texts:
            mark_empty(ax)


def kernel_table(df: pd.DataFrame, order: Sequence[str] = (), min_share: float = 0.02,
                 study: str = "") -> pd.DataFrame:
    """Per-kernel breakdown of the tidy rows that carry one (column ``kernels``,
    JSON from :func:`kernels.core.profiling.kernel_breakdown`), one block per (pass, impl).

    Index (pass, implementation, kernel), implementations in ``order`` first; columns ``µs`` (per
    call) and ``share %`` of that impl's total. Kernels under ``min_share`` of
    the total are summed as ``other``; names are shortened by
    :func:`short_kernel_names`; implementations and passes by their display
    names (:func:`kernels.paper.style.label` of ``study``). Empty when no row
    carries a breakdown.
    """
    if "kernels" not in df.columns:
        return pd.DataFrame()
    d = df[df["kernels"].notna() & (df["status"] == "ok")]
    out = []
    for (impl, pas), g in d.groupby(["impl", "pass"], sort=False):
        entries = json.loads(g["kernels"].iloc[0])
        total = sum(e["us"] for e in entries)
        keep = [e for e in entries if e["us"] >= min_share * total and e["name"] != "other"]
        small = total - sum(e["us"] for e in keep)
        rows = [(e["name"], e["us"]) for e in keep] + ([("other", small)] if small > 0 else [])
        out += [{"impl": impl, "pass": pas, "kernel": name, "µs": us, "share %": 100 * us / total}
                for name, us in zip(short_kernel_names([n for n, _ in rows]), [u for _, u in rows])]
    if not out:
        return pd.DataFrame()
    rank = {name: i for i, name in enumerate(order)}
    t = pd.DataFrame(out)
    t["_rank"] = t["impl"].map(lambda i: rank.get(i, len(rank)))
    t["_pass"] = t["pass"].map(lambda p: list(style.PASS_LABELS).index(p) if p in style.PASS_LABELS else 9)
    t = t.sort_values(["_pass", "_rank"], kind="stable").drop(columns=["_rank", "_pass"])
    t = t.assign(impl=t["impl"].map(lambda i: style.label(study, i)), **{"pass": t["pass"].map(style.pass_label)})
    return t.rename(columns={"impl": "implementation"}).set_index(["pass", "implementation", "kernel"]).round(
        {"µs": 1, "share %": 1})


def short_kernel_names(names: Sequence[str]) -> list[str]:
    """Kernel names as a reader knows them: without return type, namespaces, template and
    argument lists (``void at::native::vectorized_elementwise_kernel<4, ...>(...)`` ->
    ``vectorized_elementwise_kernel``); a CuTe DSL kernel (``kernel_cutlass_kernel_`` + its
    module path + its class + ``_object_at_`` and its arguments) by its class
    (``CPDeltaRulePrefillSm90``); a name that repeats within ``names`` gets ``#2``, ``#3``."""
    out, seen = [], {}
    for name in names:
        cute = re.match(r"kernel_cutlass_kernel_[a-z0-9_]*?([A-Z][A-Za-z0-9]*)", name)
        short = cute.group(1) if cute else re.sub(r"\(anonymous namespace\)::", "", name)
        short = re.sub(r"^void ", "", short)
        short = re.split(r"[<(]", short, maxsplit=1)[0].split("::")[-1].strip() or name
        seen[short] = seen.get(short, 0) + 1
        out.append(short if seen[short] == 1 else f"{short} #{seen[short]}")
    return out


#: The tidy table's repetition cells (JSON lists, :func:`kernels.paper.collect.tidy`): device times
#: (the GPU's work alone) and latencies (launched from Python, the host's launch included).
DEVICE_REPS, LATENCY_REPS = "device_times_ms", "times_ms"
#: The confidence level of every interval the paper quotes.
LEVEL = 0.95
#: Bootstrap resamples of :func:`ratio`, and its seed: fixed, so a render's numbers are byte-stable.
RESAMPLES = 4000
SEED = 0


@dataclass(frozen=True)
class Ratio:
    """A ratio of two median times (``value``) and its :data:`LEVEL` interval (``low``, ``high``)."""

    value: float
    low: float
    high: float

    @property
    def tie(self) -> bool:
        """Whether the interval holds 1.0: the two times do not differ at :data:`LEVEL`."""
        return bool(self.low <= 1.0 <= self.high)


#: The ratio of rows without repetitions.
NO_RATIO = Ratio(float("nan"), float("nan"), float("nan"))


def repetitions(cell) -> np.ndarray:
    """A tidy row's repetition cell (a JSON list, or a list) as an array; empty for NaN or None."""
    if isinstance(cell, str):
        cell = json.loads(cell)
    if cell is None or (isinstance(cell, float) and not np.isfinite(cell)):
        return np.empty(0)
    return np.asarray(cell, dtype=float)


def ratio(num, den, scale: float = 1.0) -> Ratio:
    """``scale`` times the median of the repetitions ``num`` over that of ``den`` (a speedup: the
    baseline's times over the candidate's; a throughput ratio: ``scale`` the ratio of the work),
    with a :data:`LEVEL` percentile-bootstrap interval: each of :data:`RESAMPLES` resamples draws
    both rows' repetitions with replacement, each row its own count, independently, and takes the
    ratio of the two resamples' medians; the interval runs between that ratio's (1 - :data:`LEVEL`)/2
    and (1 + :data:`LEVEL`)/2 quantiles, 2.5 % and 97.5 % (Efron and Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13). The
    generator is seeded with :data:`SEED` at each call, so a ratio does not depend on what was
    computed before it. :data:`NO_RATIO` when either row has no repetitions."""
    a, b = repetitions(num), repetitions(den)
    if a.size == 0 or b.size == 0:
        return NO_RATIO
    rng = np.random.default_rng(SEED)
    ma, mb = resampled_medians(rng, a), resampled_medians(rng, b)
    low, high = level_bounds(scale * ma / mb)
    return Ratio(float(scale * np.median(a) / np.median(b)), float(low), float(high))


def resampled_medians(rng, reps: np.ndarray) -> np.ndarray:
    """The medians of :data:`RESAMPLES` resamples of ``reps``, drawn with replacement by ``rng``."""
    return np.median(reps[rng.integers(0, reps.size, (RESAMPLES, reps.size))], axis=1)


def level_bounds(boot: np.ndarray) -> tuple[float, float]:
    """The (1 - :data:`LEVEL`)/2 and (1 + :data:`LEVEL`)/2 quantiles of bootstrap values ``boot``."""
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(low), float(high)


def median_interval(values: np.ndarray) -> tuple[float, float, float]:
    """The median of ``values`` and its :data:`LEVEL` percentile-bootstrap interval over them
    (:func:`resampled_medians`, seeded with :data:`SEED`, and :func:`level_bounds`)."""
    values = np.asarray(values, dtype=float)
    low, high = level_bounds(resampled_medians(np.random.default_rng(SEED), values))
    return float(np.median(values)), low, high


def median_ratio(cases: Iterable[tuple]) -> Ratio:
    """The median over cases of their ratios, each case ``(num, den, scale)`` as :func:`ratio`
    takes it (``scale`` times the median of repetitions ``num`` over that of ``den``), with a
    :data:`LEVEL` percentile-bootstrap interval for that median: each of :data:`RESAMPLES`
    resamples draws every row's repetitions with replacement, as :func:`ratio` does, a row that
    several cases share (their common baseline) once, and takes the median over the cases of the
    resampled ratios. The interval reflects the timing noise of the rows, not the spread of the
    cases (a range, :func:`span`, shows that). One case gives :func:`ratio`'s value and interval.
    Cases without repetitions in both rows or with a scale that is not finite are left out;
    :data:`NO_RATIO` when none is left."""
    cases = [(repetitions(n), repetitions(d), float(s)) for n, d, s in cases]
    cases = [(a, b, s) for a, b, s in cases if a.size and b.size and np.isfinite(s)]
    if not cases:
        return NO_RATIO
    rng = np.random.default_rng(SEED)
    drawn: dict[bytes, np.ndarray] = {}  # a row's resampled medians, by its repetitions

    def medians(reps: np.ndarray) -> np.ndarray:
        key = reps.tobytes()
        if key not in drawn:
            drawn[key] = resampled_medians(rng, reps)
        return drawn[key]

    boot = np.median(np.array([s * medians(a) / medians(b) for a, b, s in cases]), axis=0)
    low, high = level_bounds(boot)
    return Ratio(float(np.median([s * np.median(a) / np.median(b) for a, b, s in cases])), low, high)


def ratios(base: pd.DataFrame, rows: pd.DataFrame, keys: Sequence[str], col: str = DEVICE_REPS) -> list[Ratio]:
    """For each row of ``rows`` (in order), :func:`ratio` of the repetitions ``col`` of the first row of
    ``base`` with the same ``keys`` over its own: each row's speedup over its baseline, with its
    interval; a row without such a baseline row is left out."""
    ref = {}
    for _, row in base.iterrows():
        ref.setdefault(tuple(row[k] for k in keys), row[col])
    return [ratio(ref[key], row[col]) for _, row in rows.iterrows() if (key := tuple(row[k] for k in keys)) in ref]


def interval(values: Ratio | Sequence[Ratio], digits: int = 2, scale: float = 1.0, ties: bool = True) -> str:
    """The :data:`LEVEL` interval of a ratio as the text writes it after the ratio, with ``digits``
    decimals like the ratio itself, rounded outwards (the lower end down, the upper end up) so that
    it holds the ratio as printed: ``[0.99, 1.05]``, followed by ``(tie)`` when it holds 1.0
    (:attr:`Ratio.tie`, of the unrounded interval). Of several ratios (a range over sizes, written by
    :func:`span` of their values), from the lowest lower end to the highest upper end, with ``(tie)``
    when every interval holds 1.0 and ``(k of n ties)`` when k do. ``scale``: the factor by which the
    text prints the ratio (100 for a share in %: ``[91.2, 93.0]`` of a ratio of 0.92); the ties are
    those of the ratio itself; without ``ties`` (a quantity that is no ratio of two times, a share of
    a time, whose 1.0 means no tie), none is written. :data:`kernels.paper.style.MISSING` when none
    is finite."""
    rs = [values] if isinstance(values, Ratio) else list(values)
    rs = [r for r in rs if np.isfinite(r.low) and np.isfinite(r.high)]
    if not rs:
        return style.MISSING
    unit = 10.0 ** digits
    low = math.floor(min(r.low for r in rs) * scale * unit + 1e-9) / unit  # 1e-9: 1.04 * 100 is 104.00000000000001
    high = math.ceil(max(r.high for r in rs) * scale * unit - 1e-9) / unit
    text = f"[{fmt(low, digits)}, {fmt(high, digits)}]"
    tied = sum(r.tie for r in rs) if ties else 0
    if tied == len(rs):
        return f"{text} (tie)"
    return f"{text} ({tied} of {len(rs)} ties)" if tied else text


def tie_word(r: Ratio, above: str = "faster", below: str = "slower") -> str:
    """How the text words a ratio ``r``: "a tie" when its interval holds 1.0 (:attr:`Ratio.tie`),
    else ``above`` (the ratio above 1: a speedup's "faster") or ``below``;
    :data:`kernels.paper.style.MISSING` when it is not finite."""
    if not (np.isfinite(r.low) and np.isfinite(r.high)):
        return style.MISSING
    return "a tie" if r.tie else above if r.value > 1.0 else below


def values(rs: Iterable[Ratio]) -> list[float]:
    """The point estimates of ratios ``rs`` (what :func:`claim_verdict` and :func:`span` read)."""
    return [r.value for r in rs]


#: How far from 2 (quadratic), or above 1 (linear), a fitted log-log slope's interval may lie and
#: still show that power (:func:`follows_power`).
SLOPE_TOLERANCE = 0.1
#: The slope that divides linear from quadratic growth: a slope's interval must lie wholly on its
#: power's side of it (:func:`follows_power`).
SLOPE_DIVIDE = 1.5


def follows_power(low: float, high: float, power: int) -> bool:
    """Whether a fitted log-log slope's :data:`LEVEL` interval ``[low, high]`` shows a cost growing
    as the ``power``-th power of the length, linear (1) or quadratic (2), ruling the other power out:
    it lies wholly on ``power``'s side of :data:`SLOPE_DIVIDE`, and it holds a value within ``power``
    ± :data:`SLOPE_TOLERANCE` (quadratic) or at most 1 + :data:`SLOPE_TOLERANCE` (linear: an
    :math:`O(n)` claim is a bound, which a cost growing more slowly meets too; :func:`below_one` tells
    such slopes apart). False for a NaN interval (too few lengths)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return False
    if power == 2:
        return bool(low <= 2 + SLOPE_TOLERANCE and high >= 2 - SLOPE_TOLERANCE and low > SLOPE_DIVIDE)
    if power == 1:
        return bool(low <= 1 + SLOPE_TOLERANCE and high < SLOPE_DIVIDE)
    raise ValueError(f"power must be 1 (linear) or 2 (quadratic), got {power}")


def below_one(high: float, digits: int = 2) -> bool:
    """Whether a slope's interval, whose upper end is ``high``, lies wholly below 1 as the text prints
    it (``digits`` decimals, :func:`fmt`): a cost that grows more slowly than linearly over the fitted
    lengths, which :func:`follows_power` counts as linear and the text names."""
    return bool(np.isfinite(high) and float(fmt(high, digits)) < 1.0)


def criterion_macros() -> dict[str, str]:
    """The constants of the verdicts' criteria as the paper states them: ``CiLevelPct`` (the
    intervals' level, %, :data:`LEVEL`), ``CiResamples`` (bootstrap resamples, :data:`RESAMPLES`),
    ``SlopeTolerance`` (:data:`SLOPE_TOLERANCE`) and ``SlopeDivide`` (:data:`SLOPE_DIVIDE`)."""
    return {"CiLevelPct": f"{LEVEL * 100:g}", "CiResamples": f"{RESAMPLES:,}".replace(",", r"\,"),
            "SlopeTolerance": f"{SLOPE_TOLERANCE:g}", "SlopeDivide": f"{SLOPE_DIVIDE:g}"}


def partly_holds(met: int, total: int) -> str:
    """The verdict "partly holds" with how many of the ``total`` values (or slopes) meet the claim:
    ``partly_holds(3, 5)`` -> ``"partly holds (3 of 5)"``; the count belongs to the verdict, so that a
    run whose count differs has another verdict."""
    return f"partly holds ({met} of {total})"


def scaling_verdict(linear: Sequence[tuple[float, float]], quadratic: Sequence[tuple[float, float]] = ()) -> str:
    """The verdict on a claim that a cost grows linearly (``linear``: the slopes' intervals, ``(low,
    high)``, that should show power 1) where a baseline's grows quadratically (``quadratic``: those that
    should show 2), by :func:`follows_power`: "holds" when every one does, "partly holds (k of n)"
    when k of the n do (:func:`partly_holds`), "not reached" when none does;
    :data:`kernels.paper.style.MISSING` without slopes."""
    shown = [follows_power(lo, hi, 1) for lo, hi in linear] + [follows_power(lo, hi, 2) for lo, hi in quadratic]
    if not shown:
        return style.MISSING
    return "holds" if all(shown) else partly_holds(sum(shown), len(shown)) if any(shown) else "not reached"


def claim_verdict(values: Sequence[float | Ratio], low: float, high: float = float("inf")) -> str:
    """The verdict on a claimed range ``[low, high]`` (a single claimed factor is ``[low, inf)``)
    from the measured values (each by its point estimate), as the claims table's caption states it:
    "holds" when every value lies within the range (contained, not overlapped), "exceeded" when
    every value reaches ``low`` and some lie above ``high``, "partly holds (k of n)" when k of the n
    values lie within the range and some lie below it (:func:`partly_holds`), "missed (b below, a
    above)" when none lies within it, b below and a above, "not reached" when every value lies below
    ``low``; :data:`kernels.paper.style.MISSING` when nothing was measured.

    A value given as a :class:`Ratio` whose :data:`LEVEL` interval holds ``low`` or ``high`` is *on
    the line* (:func:`on_the_line`): its run cannot tell which side it lies on, so it is neither a
    pass nor a miss. The verdict is that of the other values followed by ``"; k on the line"``, or
    ``"on the line"`` when every value is."""
    values = [v for v in values if v is not None and np.isfinite(float(v.value if isinstance(v, Ratio) else v))]
    line = sum(on_the_line(v, low, high) for v in values)
    values = [float(v.value if isinstance(v, Ratio) else v) for v in values if not on_the_line(v, low, high)]
    if not values:
        return "on the line" if line else style.MISSING
    below, above = sum(v < low for v in values), sum(v > high for v in values)
    within = len(values) - below - above
    if not below:
        verdict = "holds" if not above else "exceeded"
    elif within:
        verdict = partly_holds(within, len(values))
    else:
        verdict = f"missed ({below} below, {above} above)" if above else "not reached"
    return f"{verdict}; {line} on the line" if line else verdict


def on_the_line(value: float | Ratio, low: float, high: float = float("inf")) -> bool:
    """Whether ``value`` is a :class:`Ratio` whose interval holds the claimed range's bound ``low`` or
    ``high`` (:func:`claim_verdict`); a plain number, without an interval, never is."""
    if not isinstance(value, Ratio) or not (np.isfinite(value.low) and np.isfinite(value.high)):
        return False
    return any(value.low <= bound <= value.high for bound in (low, high) if np.isfinite(bound))


def with_intervals(values: Sequence[float], intervals: Sequence[Ratio]) -> list[Ratio]:
    """Each point estimate of ``values`` with the interval of the :class:`Ratio` at the same place of
    ``intervals`` (the same quantity resampled), for :func:`claim_verdict`."""
    return [Ratio(float(v), r.low, r.high) for v, r in zip(values, intervals, strict=True)]
