"""The job runner: every case of one (study, impl) measured into one JSONL file, with checkpoints
and the answers of the study's compile-ahead pass (:func:`run_job`; the pass itself:
:func:`compile_ahead_job`). The per-case work is :mod:`kernels.core.harness`'s.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import time
from pathlib import Path

from kernels.core.ahead import compile_ahead
from kernels.core.children import measure_in_child
from kernels.core.env import environment, git_commit
from kernels.core.files import write_atomic, write_jsonl
from kernels.core.fingerprint import fingerprint
from kernels.core.gpustate import recorded
from kernels.core.harness import measure_case

log = logging.getLogger("kernels.core.jobs")


def compile_ahead_job(jobs: list[dict], timing: dict, out: str | os.PathLike, workers: int) -> dict:
    """A study's compile-ahead pass: :func:`compile_ahead` over the cases that the measurement
    jobs of several implementations still have to measure, written to ``out``.

    Args:
        jobs: one dict per implementation: ``study``, ``impl``, ``sweep`` (the study's active
            config section) and ``checkpoint`` (its measurement job's checkpoint file, whose
            rows :func:`run_job` reuses, so their cases are left out).
        timing: the config's ``timing`` (part of each case's key, :func:`case_key`).
        out: JSON file written atomically: ``{"<study>/<impl>": {case key: answer}}``, which
            :func:`run_job` reads (its ``ahead`` argument).
        workers: child processes at a time.
    Returns what was written. On a machine without CUDA nothing is compiled ahead (``{}``).
    The commit of the case keys is :func:`kernels.core.env.git_commit`, the one of run_job's rows'
    ``env``; the rest of that block (nvidia-smi, the package versions) is not needed here.
    """
    import torch

    commit = git_commit()
    todo = []  # (study, impl, [(key, case)])
    for job in jobs:
        done = _read_checkpoint(Path(job["checkpoint"])) if job.get("checkpoint") else {}
        keyed = dict(keyed_cases(job["study"], job["impl"], job["sweep"], timing, commit))
        todo.append((job["study"], job["impl"], [(k, c) for k, c in keyed.items() if k not in done]))
    result = {}
    if torch.cuda.is_available() and any(pairs for _, _, pairs in todo):
        answers = compile_ahead([(s, i, [c for _, c in pairs]) for s, i, pairs in todo], workers)
        result = {f"{s}/{i}": {k: a for (k, _), a in zip(pairs, got)}
                  for (s, i, pairs), got in zip(todo, answers)}
    write_atomic(out, json.dumps(result, indent=1, sort_keys=True) + "\n")
    return result


class Progress:
    """Logs 'configuration i of n, elapsed, estimate left' for a long sweep."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.t0 = label, total, time.perf_counter()

    def step(self, i: int, what: str) -> None:
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / i * (self.total - i) if i else float("nan")
        log.info("[%s] configuration %d of %d (%s): elapsed %.0f s, about %.0f s left",
                 self.label, i, self.total, what, elapsed, eta)


def case_key(study: str, impl: str, case: dict, timing: dict, commit: str) -> str:
    """Fingerprint of one measurement: study, impl, case, timing config and code commit."""
    blob = json.dumps([study, impl, case, timing, commit], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def keyed_cases(study: str, impl: str, sweep: dict, timing: dict, commit: str) -> list[tuple[str, dict]]:
    """The cases of ``impl`` in ``sweep`` (the study's ``cases``), each with its :func:`case_key`:
    the key under which :func:`run_job` finds a checkpointed row and a compile-ahead answer."""
    mod = importlib.import_module(f"kernels.{study}.study")
    return [(case_key(study, impl, case, timing, commit), case) for case in mod.cases(sweep, impl)]


def _read_checkpoint(path: Path) -> dict[str, dict]:
    """Rows of a checkpoint by key; a torn last line (the job was killed mid-write) is skipped."""
    done = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                done[entry["key"]] = entry["row"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return done


def run_job(study: str, impl: str, sweep: dict, out: str | os.PathLike, timing: dict,
            checkpoint: str | os.PathLike | None = None, ahead_workers: int = 0,
            ahead: str | os.PathLike | None = None) -> list[dict]:
    """Measure every case of ``impl`` in ``study`` and write ``out`` (JSONL, atomically).

    Args:
        study: module name under ``kernels`` (``swiglu``, ``flex``, ``gdn``).
        impl: implementation name known to that study.
        sweep: the study's sweep configuration (the config's ``<study>.sweep``).
        out: path of the JSONL file to write.
        timing: ``warmup_ms``, ``rep_ms``, ``min_reps``, ``max_reps`` (CUDA) and
            ``cpu_reps`` (CPU), as in ``config/config.yaml``.
        checkpoint: optional JSONL file (outside ``data/``) that receives each
            finished row as it comes. A job killed part-way (a time limit, a
            lost machine) leaves its finished rows there, and the next run of
            the same job reuses the rows whose case, timing and code commit
            (:func:`case_key`) match instead of measuring them again. Removed
            once ``out`` is written.
        ahead_workers: on a GPU, when above 1, the cases still to measure are first
            prepared this many at a time in child processes (:func:`compile_ahead`);
            each row's ``compile_ahead`` field holds that preparation's seconds, status
            and cold compile seconds, and its ``setup_s`` (and ``compile_s``,
            ``first_call_s``, ...) is then the timed pass's warm-cache setup.
        ahead: the study's compile-ahead file (:func:`compile_ahead_job`), if any:
            the cases it answers for were prepared there, and only the others are
            prepared here (``ahead_workers`` at a time).
    Every row's ``env`` is :func:`kernels.core.env.environment` of the job, with the study's
    :func:`kernels.core.fingerprint.fingerprint` for ``sweep`` and ``timing``: ``fingerprint`` (its
    digest) and ``fingerprint_parts``; its ``gpu_state`` is what the GPU did from just before the
    case to just after its timed repetitions (:func:`kernels.core.gpustate.recorded`).
    Returns the rows written.
    """
    import torch

    mod = importlib.import_module(f"kernels.{study}.study")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    isolate = impl in getattr(mod, "ISOLATE", ())
    code = fingerprint(study, sweep, timing)
    env = {**environment(), "fingerprint": code["digest"], "fingerprint_parts": code["parts"]}
    ckpt = Path(checkpoint) if checkpoint else None
    done = _read_checkpoint(ckpt) if ckpt else {}
    keyed = keyed_cases(study, impl, sweep, timing, env["git_commit"])
    keys, cases = [k for k, _ in keyed], [c for _, c in keyed]
    reused = sum(k in done for k in keys)
    if reused:
        log.info("[%s/%s] %d of %d cases reused from %s", study, impl, reused, len(cases), ckpt)
    sink = None
    if ckpt:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        # keep only the reusable rows, then append as cases finish
        write_atomic(ckpt, "".join(json.dumps({"key": k, "row": done[k]}, sort_keys=True) + "\n"
                                   for k in dict.fromkeys(keys) if k in done))
        sink = open(ckpt, "a")
    # case key -> compile_ahead's answer for the cases still to measure
    answered = json.loads(Path(ahead).read_text()).get(f"{study}/{impl}", {}) if ahead else {}
    todo = [(case, key) for case, key in zip(cases, keys) if key not in done and key not in answered]
    if ahead:
        log.info("[%s/%s] %d cases prepared ahead by the study's compile-ahead job, %d left to prepare",
                 study, impl, sum(k in answered for k in keys), len(todo))
    if device.type == "cuda" and ahead_workers > 1 and todo:
        [answers] = compile_ahead([(study, impl, [case for case, _ in todo])], ahead_workers)
        answered = {**answered, **{key: answer for (_, key), answer in zip(todo, answers)}}
    progress = Progress(f"{study}/{impl}", len(cases))
    rows = []
    try:
        for i, (case, key) in enumerate(zip(cases, keys)):
            progress.step(i, ", ".join(f"{k}={v}" for k, v in case.items()))
            if key in done:
                rows.append(done[key])
                continue
            if isolate:
                row = recorded(measure_in_child, study, impl, case, timing)
            else:
                row = recorded(measure_case, mod, impl, case, device, timing)
            if key in answered:
                row["compile_ahead"] = answered[key]
            row["env"] = env
            rows.append(row)
            if sink:
                sink.write(json.dumps({"key": key, "row": row}, sort_keys=True) + "\n")
                sink.flush()
                os.fsync(sink.fileno())
            if row["status"] != "ok":
                log.warning("[%s/%s] %s: %s", study, impl, row["status"], row["error"])
    finally:
        if sink:
            sink.close()
    progress.step(len(cases), "done")
    write_jsonl(out, rows)
    if ckpt:
        ckpt.unlink(missing_ok=True)
    return rows
