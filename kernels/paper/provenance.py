"""Where each study's committed rows come from, and whether the code measured them: a study is the
unit of measurement, so each has its own run (commit, GPU, date, minutes, rows) and its own
state against the code of the working tree (:func:`study_state`):

- ``current``: every row carries the study's fingerprint of today's code and config
  (:func:`kernels.core.fingerprint.fingerprint`), from one run (one commit, one GPU, one fingerprint);
- ``stale``: rows of other code or config (what differs is listed: the parts of the fingerprint
  or, for rows measured before rows carried one, the files changed since their commit, where git
  can tell), rows of more than one run, or a bad row: a line of its files that is not a JSON
  object, or a row of another study (the first is named, ``path:line: what``, where the collect
  of its rows stops);
- ``not measured``: no rows.

``python -m kernels.paper.provenance`` prints the table for the committed data of every GPU model (or
``--gpu``'s; ``--raw``), with each study's committed second runs;
the workflow prints its one-line summary (:func:`summary`) when it starts, and the paper's
provenance table and each stale study's sentence come from :func:`render_provenance`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from kernels.core.files import write_atomic
from kernels.core.fingerprint import (ROOT, _digest, differences, fingerprint, measured_modules,
                                      measuring_digest)
from kernels.paper.render import job_minutes, macro_lines, table_to_latex
from kernels.paper.rows import model_short
from kernels.paper.report_kit import camel, escape_latex
from kernels.paper.style import study_label

CURRENT, STALE, NOT_MEASURED = "current", "stale", "not measured"
log = logging.getLogger("kernels.paper.provenance")


@dataclass
class StudyState:
    """One study's committed rows against the code: ``state`` (:data:`CURRENT`, :data:`STALE` or
    :data:`NOT_MEASURED`), ``why`` (a phrase, empty when current), ``differs`` (the fingerprint's
    parts or files that differ), the run's ``commits``, ``gpus`` (UUIDs), ``dates`` (UTC days),
    ``rows``, ``minutes`` (its measurement jobs' GPU time, None without benchmark files),
    ``fingerprints`` (the digests its rows carry; None for a row without one) and ``timing_part``
    (the ``timing`` part of its rows' fingerprint: the digest of the timing settings they were
    timed with; None unless its rows are of one run and carry one), ``bad_row`` (its files' first
    bad line, ``path:line: what``, :func:`read_envs`; empty without one)."""

    study: str
    state: str
    why: str = ""
    differs: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    rows: int = 0
    minutes: float | None = None
    fingerprints: list[str | None] = field(default_factory=list)
    timing_part: str | None = None
    bad_row: str = ""

    @property
    def commit(self) -> str:
        """The run's commit as git prints it (7 digits), several joined by commas."""
        return ", ".join(c[:7] + c[40:] if len(c) >= 40 else c for c in self.commits) or "n/a"

    @property
    def gpu(self) -> str:
        """The run's GPU as ``GPU-`` and 8 hex digits, several joined by commas."""
        return ", ".join(g[:12] for g in self.gpus) or "n/a"

    @property
    def date(self) -> str:
        return ", ".join(self.dates) or "n/a"


def read_envs(folder: str | Path, study: str) -> tuple[list[dict], tuple[Path, int, str] | None]:
    """The ``env`` block of each row of ``folder/<study>/*.jsonl`` (a row without one gives {}), and
    the first bad line among them, ``(path, line number, what)``, None without one: a line that is
    not a JSON object in UTF-8 (``not JSON``, ``not a JSON object``) or a row of another study (its
    ``study`` field: ``row of study 'gdn' in 'flex' data``, as the collect step says), whose
    ``env`` is left out; the collect step checks the rest."""
    envs, bad = [], None
    for path in sorted(Path(folder, study).glob("*.jsonl")):
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    what = None if isinstance(row, dict) else "not a JSON object"
                except ValueError:  # UnicodeDecodeError and JSONDecodeError among them
                    row, what = None, "not JSON"
                if what is None and isinstance(row.get("study"), str) and row["study"] != study:
                    what = f"row of study {row['study']!r} in {study!r} data"
                if what is None:
                    envs.append(row.get("env") if isinstance(row.get("env"), dict) else {})
                elif bad is None:
                    bad = (path, n, what)
    return envs, bad


def row_envs(folder: str | Path, study: str) -> list[dict]:
    """The ``env`` block of each row of ``folder/<study>/*.jsonl`` (:func:`read_envs`: a line that is
    not a JSON object, or a row of another study, is left out; the collect step names it)."""
    return read_envs(folder, study)[0]


def row_fingerprint(env: dict) -> str | None:
    """The fingerprint a row's ``env`` block gives, as today's code computes it
    (:func:`kernels.core.fingerprint.measuring_digest` of its parts), else its recorded digest
    (None for a row measured before rows carried one)."""
    parts = env.get("fingerprint_parts")
    return measuring_digest(parts) if isinstance(parts, dict) and parts else env.get("fingerprint")


def runs_of(envs: list[dict]) -> set[tuple]:
    """The runs that rows (their ``env`` blocks) come from: each row's (``git_commit``,
    ``gpu_uuid``, :func:`row_fingerprint`); one run is one of each."""
    return {(e.get("git_commit"), e.get("gpu_uuid"), row_fingerprint(e)) for e in envs}


def code_digest(parts: dict[str, str]) -> str:
    """A digest of a fingerprint's parts (:func:`kernels.core.fingerprint.fingerprint`) but its
    ``config`` and its :data:`kernels.core.fingerprint.RECORD_ONLY` modules: the code, timing and
    anchors that measured, whatever cases the run measured (a quick run's rows are of the same code
    as the sweep's)."""
    return measuring_digest({k: v for k, v in parts.items() if k != "config"})


def code_identity(envs: list[dict]) -> set[str]:
    """The code that measured rows (their ``env`` blocks): each row's :func:`code_digest`, or, for a
    row measured before rows carried a fingerprint, ``commit:<its git commit>``."""
    return {code_digest(e["fingerprint_parts"]) if e.get("fingerprint_parts") else f"commit:{e.get('git_commit')}"
            for e in envs}


def same_code(reference: set[str], candidate: set[str]) -> bool:
    """Whether two runs of a study (:func:`code_identity` of each) were measured by one and the same
    code: each by one code, the same (a run without rows is of no code)."""
    return len(reference) == 1 and reference == candidate


def study_minutes(bench_dir: str | Path, study: str) -> float | None:
    """A study's minutes of GPU time: its measurement jobs one after another plus its compile-ahead
    job (:func:`kernels.paper.render.job_minutes`); None without any of their benchmark files."""
    jobs = {k: v for k, v in job_minutes(bench_dir).items()
            if k.startswith(f"measure_{study}_") or k == f"compile_ahead_{study}"}
    return sum(jobs.values()) if jobs else None


def _changed_files(commit: str, study: str, root: Path) -> list[str] | None:
    """The files of ``study``'s measurement (its modules today, its config file, the timing
    config, the anchors' pins) that changed since ``commit``, by git; None where git cannot say."""
    paths = [*measured_modules(study, root), f"config/studies/{study}.yaml", "config/config.yaml",
             "pyproject.toml"]
    try:
        proc = subprocess.run(["git", "diff", "--name-only", commit.removesuffix("-dirty"), "--", *paths],
                              cwd=root, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted(proc.stdout.split()) if proc.returncode == 0 else None


def study_state(study: str, folder: str | Path, section: dict, timing: dict,
                root: str | Path = ROOT, code: dict | None = None) -> StudyState:
    """The state of ``study``'s rows in ``folder`` (``data/raw/<gpu>``) against the fingerprint of
    today's code with config ``section`` and ``timing`` (see the module docstring); ``code``: that
    fingerprint where the caller has it already (:func:`kernels.core.fingerprint.fingerprint` of
    the same arguments), else it is computed."""
    root = Path(root)
    envs, bad = read_envs(folder, study)
    minutes = study_minutes(Path(folder, "benchmarks"), study)
    if not envs:
        state = StudyState(study, NOT_MEASURED, "no rows", minutes=minutes)
    else:
        state = _rows_state(study, envs, minutes, root, code or fingerprint(study, section, timing, root))
    if bad is not None:  # the collect stops there: the rows are not the study's as they stand
        path, n, what = bad
        state.bad_row = f"{path.relative_to(root) if path.is_relative_to(root) else path}:{n}: {what}"
        state.state, state.why = STALE, f"bad row at {state.bad_row}" + (f"; {state.why}" if state.why else "")
    return state


def _rows_state(study: str, envs: list[dict], minutes: float | None, root: Path, code: dict) -> StudyState:
    """The state of ``study``'s rows (their ``env`` blocks, ``envs``, at least one) against the
    fingerprint ``code`` of today's code (:func:`study_state`)."""
    runs = runs_of(envs)
    state = StudyState(
        study, CURRENT, rows=len(envs), minutes=minutes,
        commits=sorted({str(e.get("git_commit")) for e in envs}),
        gpus=sorted({str(e["gpu_uuid"]) for e in envs if e.get("gpu_uuid")}),
        dates=sorted({e["date"][:10] for e in envs if e.get("date")}),
        fingerprints=sorted({row_fingerprint(e) for e in envs}, key=str))
    parts = envs[0].get("fingerprint_parts")
    parts = parts if isinstance(parts, dict) else {}
    if len(runs) == 1:
        state.timing_part = parts.get("timing")
    if len(runs) > 1:
        state.state, state.why = STALE, f"rows of {len(runs)} runs (commit, GPU, fingerprint)"
    elif state.fingerprints == [None]:
        state.state = STALE
        state.why = f"rows measured at {state.commit} carry no fingerprint"
        changed = _changed_files(state.commits[0], study, root)
        if changed is not None:
            state.differs = changed
            state.why += f"; {len(changed)} of its files changed since" if changed else \
                "; none of its files changed since"
    elif state.fingerprints != [code["digest"]]:
        state.state = STALE
        state.differs = differences(parts, code["parts"])
        state.why = f"rows measured at {state.commit} by other code or config"
    return state


def quoted_timing(timed_with: dict[str, str | None], candidates: list[dict]) -> tuple[dict, list[str]]:
    """The timing settings that the paper quotes, and the studies whose rows were timed with others.

    ``timed_with``: for each study the paper shows, the ``timing`` part of its rows' fingerprint
    (the digest of the settings they were timed with: :attr:`StudyState.timing_part`, or the
    run's own for a study it measures; None where not known); ``candidates``: timing settings in
    order of preference (the run's config's ``timing``, then ``config/config.yaml``'s). Quoted: the
    candidate whose digest the most studies' rows carry (the first of a tie), so a render under
    other settings than the rows' (a ``--configfile``) still quotes theirs, as their fingerprints
    prove; named: the studies (in ``timed_with``'s order) whose rows carry a known digest other
    than the quoted settings'. ValueError without candidates."""
    if not candidates:
        raise ValueError("quoted_timing: no candidate timing settings")
    digests = [_digest(c) for c in candidates]
    counts = [sum(part == d for part in timed_with.values()) for d in digests]
    best = counts.index(max(counts))
    others = [s for s, part in timed_with.items() if part is not None and part != digests[best]]
    return candidates[best], others


def load_config(root: str | Path = ROOT) -> dict:
    """``config/config.yaml`` with every ``config/studies/*.yaml`` merged in, as Snakemake reads them."""
    root = Path(root)
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    for path in sorted((root / "config" / "studies").glob("*.yaml")):
        config.update(yaml.safe_load(path.read_text()))
    return config


def states(folder: str | Path, config: dict, section: str = "sweep", root: str | Path = ROOT) -> list[StudyState]:
    """:func:`study_state` of every study of ``config["studies"]``, with its config ``section``."""
    return [study_state(s, folder, config[s][section], config["timing"], root) for s in config["studies"]]


def summary(folder: str | Path, found: list[StudyState]) -> str:
    """One line naming each study's state, for the start of a run: a stale study's commit, or its
    first bad row."""
    groups: dict[str, list[str]] = {}
    for s in found:
        name = (f"{s.study} (bad row at {s.bad_row})" if s.bad_row
                else f"{s.study} (at {s.commit})" if s.state == STALE else s.study)
        groups.setdefault(s.state, []).append(name)
    text = "; ".join(f"{state}: {', '.join(names)}" for state, names in groups.items())
    hint = " (python -m kernels.paper.provenance says what differs)" if STALE in groups else ""
    return f"Studies of {folder}/: {text}{hint}."


def table(found: list[StudyState]) -> pd.DataFrame:
    """One row per study: state, commit, GPU, date, minutes, rows and what differs."""
    return pd.DataFrame([{"study": s.study, "state": s.state, "commit": s.commit, "gpu": s.gpu, "date": s.date,
                          "minutes": None if s.minutes is None else round(s.minutes, 1), "rows": s.rows,
                          "why": s.why, "differs": " ".join(s.differs)} for s in found])


def _note(s: StudyState) -> str:
    """The sentence that opens a stale study's section in the paper (empty otherwise)."""
    if s.state != STALE:
        return ""
    what = (f"{len(s.differs)} of its files and settings differ" if s.differs else escape_latex(s.why))
    return (r"\emph{Stale data.} The rows of this section were measured at commit \texttt{" + escape_latex(s.commit)
            + "} by code that is not this tree's (" + what
            + r"; \texttt{python -m kernels.paper.provenance} lists them): its numbers are that code's"
            r" (Table~\ref{tab:provenance}).")


#: :func:`tree_name` where git cannot name the tree's commit.
NO_COMMIT = "no git commit known"


def tree_name(root: str | Path = ROOT) -> str:
    """The tree that the paper is built from, as its text names it: ``commit 1a2b3c4``, with
    ``and uncommitted changes`` where a tracked file differs from that commit, or
    :data:`NO_COMMIT` where git cannot tell (no git, ``root`` not the top of a repository of its
    own, as a tarball unpacked inside another one, or git refusing it: its message is logged)."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "--no-optional-locks", *args], cwd=root, capture_output=True, text=True,
                              timeout=60)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != Path(root).resolve():
            log.info("no commit of %s: %s", root, top.stderr.strip() or f"inside {top.stdout.strip()}")
            return NO_COMMIT
        head, status = git("rev-parse", "--short=7", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no commit of %s: %s", root, exc)
        return NO_COMMIT
    if head.returncode != 0 or status.returncode != 0:
        log.info("no commit of %s: %s", root, (head.stderr + status.stderr).strip())
        return NO_COMMIT
    return f"commit {head.stdout.strip()}" + (" and uncommitted changes" if status.stdout.strip() else "")


def states_record(fingerprints: dict[str, str], found: dict[str, StudyState], tree: str) -> tuple[dict, str]:
    """What the paper's provenance says, as the workflow sees it when it starts, and its digest
    (16 hex digits): ``{"tree": tree, "studies": {study: {"fingerprint": digest, **state}}}`` with
    each study's code fingerprint (``fingerprints``: study -> digest) and, where ``found`` has it, its
    :class:`StudyState` as a dict. The rule ``states`` writes it to a file named by the digest, which
    the rules that print a state read: a changed state is a missing file, so they run again whatever
    the files' times (``snakemake --touch`` marks outputs up to date and records their params)."""
    record = {"tree": tree, "studies": {s: {"fingerprint": digest, **(asdict(found[s]) if s in found else {})}
                                        for s, digest in sorted(fingerprints.items())}}
    return record, hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


def write_states(record: dict, out: str | Path) -> None:
    """Write ``record`` (:func:`states_record`) to ``out`` as JSON and delete the other records of
    its folder (``*.json``: those of earlier states)."""
    out = Path(out)
    write_atomic(out, json.dumps(record, indent=1, sort_keys=True) + "\n")
    for old in out.parent.glob("*.json"):
        if old != out:
            old.unlink()


def render_provenance(studies: list[str], folders: list[str | Path], sections: dict[str, dict], timing: dict,
                      out: str | Path, root: str | Path = ROOT) -> list[StudyState]:
    """Write the paper's provenance macros to ``out`` (LaTeX): ``ProvenanceTable`` (a table float,
    label ``tab:provenance``: per GPU model and study its state and GPU minutes; the table of every run,
    :mod:`kernels.paper.runs`, gives its commit, GPU, date and rows),
    ``ProvenanceTree`` (the tree the paper is built from: :func:`tree_name` of ``root`` when this
    runs, so that a measuring run's paper says that its rows are not committed yet),
    ``ProvenanceCurrent``, ``ProvenanceStudies`` and ``ProvenanceModels`` (how many of the models'
    studies are current, of how many, on how many models) and per study ``StaleNote<Study>`` (the
    sentence of a stale study's section, :func:`_note`, of the paper's model; empty otherwise).
    ``folders``: each model's ``data/raw/<model>`` folder, the paper's model first; ``sections``:
    each study's config section the rows were measured with. Returns the paper model's states."""
    codes = {s: fingerprint(s, sections[s], timing, Path(root)) for s in studies}  # one per study, for every model
    found = {Path(f).name: [study_state(s, f, sections[s], timing, root, codes[s]) for s in studies] for f in folders}
    frame = pd.DataFrame([{"Model": model_short(model), "Study": study_label(s.study), "State": s.state,
                           "GPU minutes": "" if s.minutes is None else f"{s.minutes:.1f}"}
                          for model, states in found.items() for s in states])
    table = "\n".join([r"\begin{table}[tbp]", r"\centering", r"\small",
                        r"\caption{Each study's measurement on each GPU model: its state against the code of this"
                        r" tree (current: its rows carry the fingerprint of today's code and config,"
                        r" Section~\ref{sec:method}; stale: they were measured by other code or config) and the GPU"
                        r" minutes of its jobs. Each study is one run, whose commit, GPU, day and rows"
                        r" Table~\ref{tab:runs} gives; different studies may come from different runs and GPUs.}",
                        r"\label{tab:provenance}", table_to_latex(frame.set_index(["Model", "Study"])).rstrip("\n"),
                        r"\end{table}"])
    every = [s for states in found.values() for s in states]
    paper = found[Path(folders[0]).name]
    values = {"ProvenanceCurrent": str(sum(s.state == CURRENT for s in every)),
              "ProvenanceStudies": str(len(every)), "ProvenanceModels": str(len(found)),
              "ProvenanceTree": escape_latex(tree_name(root)),
              **{f"StaleNote{camel(s.study)}": _note(s) for s in paper}}
    header = "% Generated by the rule `provenance` (kernels/paper/provenance.py); do not edit."
    write_atomic(out, "\n".join([header, *macro_lines(values),
                                 r"\newcommand{\ProvenanceTable}{" + table + "}"]) + "\n")
    return paper


def committed_second_runs(committed: dict, model: str) -> list[str]:
    """The folders that config ``reproduce.committed`` (``committed``: {model: one folder or a list}) names
    for ``model``, as a list (none where it names none)."""
    named = committed.get(model) or []
    return [named] if isinstance(named, str) else list(named)


def second_run_folders(model: str, study: str, config: dict, root: str | Path = ROOT) -> list[Path]:
    """The folders of config ``reproduce.committed`` for ``model`` (:func:`committed_second_runs`, each
    ``data/reproductions/<name>``, relative to ``root``) that hold rows of ``study``."""
    folders = [Path(root, f) for f in committed_second_runs((config.get("reproduce") or {}).get("committed", {}), model)]
    return [f for f in folders if any(Path(f, study).glob("*.jsonl"))]


def _run_line(s: StudyState) -> str:
    minutes = "n/a" if s.minutes is None else f"{s.minutes:.1f} min"
    return f"commit {s.commit}, GPU {s.gpu}, {s.date}, {minutes}, {s.rows} rows"


def main(argv: list[str] | None = None) -> int:
    """``python -m kernels.paper.provenance``: print each study's state (exit 0) for every GPU model's
    data folder (or ``--gpu``'s), with the second runs config ``reproduce.committed`` names for it,
    each with its own state (current where it is of today's code, as its committed rows are) and
    whether it ran on another GPU."""
    parser = argparse.ArgumentParser(prog="python -m kernels.paper.provenance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", default=None,
                        help="one data folder's GPU (data/raw/<gpu>; default: every folder of --raw)")
    parser.add_argument("--raw", default=str(ROOT / "data" / "raw"), help="the folder of the GPU folders")
    parser.add_argument("--section", default="sweep", choices=("sweep", "quick", "smoke"),
                        help="the config section the rows were measured with (default sweep)")
    args = parser.parse_args(argv)
    if args.gpu is not None:
        folders = [Path(args.raw, args.gpu)]
        if not folders[0].is_dir():
            parser.error(f"no folder {folders[0]}")
    else:
        folders = sorted(p for p in Path(args.raw).iterdir() if p.is_dir())
        if not folders:
            parser.error(f"no GPU folder in {args.raw}")
    config = load_config()
    for i, folder in enumerate(folders):
        found = states(folder, config, args.section)
        shown = os.path.relpath(folder)  # as the workflow names it, from the repository's root
        print(("\n" if i else "") + summary(folder if shown.startswith("..") else shown, found))
        for s in found:
            print(f"\n{s.study}: {s.state}" + (f" ({s.why})" if s.why else ""))
            if s.state != NOT_MEASURED:
                print(f"  run: {_run_line(s)}")
            if s.differs:
                print("  differs: " + ", ".join(s.differs))
            if args.section != "sweep" or s.state == NOT_MEASURED:
                continue
            seconds = second_run_folders(folder.name, s.study, config)
            if not seconds:
                print(f"  second run: none (config reproduce.committed.{folder.name})")
            for second in seconds:
                t = study_state(s.study, second, config[s.study][args.section], config["timing"])
                where = ("its committed rows' GPU, not a second one" if set(t.gpus) & set(s.gpus)
                         else "another GPU")
                print(f"  second run: {os.path.relpath(second)}/: {t.state}"
                      + (f" ({t.why})" if t.why else "") + f", {_run_line(t)} ({where})")
    return 0

if __name__ == "__main__":
    sys.exit(main())
