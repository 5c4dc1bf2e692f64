"""Measurement harness shared by every study.

A *study* is a module ``kernels.<study>.study`` that defines

``STUDY: str``
    The study name written in every row (``swiglu``, ``flex``, ``gdn``).
``SHAPE_FIELDS: tuple[str, ...]``
    The shape fields every row of the study carries.
``cases(sweep: dict, impl: str) -> list[dict]``
    The configurations one implementation is measured on. Each case holds
    ``pass`` (fwd|bwd|fwdbwd), ``dtype`` and the shape fields; anything else
    it holds is copied into the row too.
``prepare(impl: str, case: dict, device: torch.device) -> Prepared``
    Builds random inputs, runs the implementation once, compares its output
    with the reference on the same inputs (:func:`kernels.correctness.check_close`, raising
    :class:`kernels.correctness.Mismatch`) and returns the call to time. It raises
    :class:`Unsupported` when the implementation cannot run the case here.
``ISOLATE: frozenset[str]`` (optional)
    Implementations whose every case runs in a child process, because a
    failure of theirs can poison the CUDA context.
``check_config(section: dict) -> None`` (optional)
    Checks the study's config section beyond its schema (a value against
    another) before any job runs; raises ValueError ``'<key>: what is wrong'``,
    the key relative to the section (``sweep.groups[0].impls``).

:func:`run_job` measures every case of one (study, impl) pair and writes one
JSON line per case, atomically (the row schema: ``workflow/schemas/row.schema.yaml``).
A failed case becomes a row with its ``status`` (ok|oom|unsupported|error|
wrong) and ``error``; the sweep goes on.

Each ok row holds two timings of every repetition (:mod:`kernels.timing`):
``device_times_ms`` / ``device_ms`` (their median), the GPU's work alone with
the host's launch hidden behind a GPU spin, and ``times_ms`` / ``median_ms``,
the latency of a call launched from Python onto an idle GPU; ``timing`` says
how (method, warm-up used and whether it settled, the spin). Both start each
repetition with the L2 flushed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from kernels import timing as timing_mod
from kernels.correctness import Mismatch
from kernels.env import environment, git_commit
from kernels.files import write_atomic, write_jsonl
from kernels.profiling import kernel_breakdown

log = logging.getLogger("kernels.harness")

STATUSES = ("ok", "oom", "unsupported", "error", "wrong")
PASSES = ("fwd", "bwd", "fwdbwd")


class Unsupported(Exception):
    """The implementation cannot run this case here (missing package, no GPU, ...)."""


@dataclasses.dataclass
class Prepared:
    """A checked call ready to be timed.

    Attributes:
        fn: zero-argument callable doing exactly the work to time.
        bytes: minimum bytes the operation must move through device memory
            (each input read once, each output written once), as an int.
        flops: minimum floating-point operations, as an int (0 for
            bandwidth-bound operations counted in bytes only).
        extra: study-specific fields copied into the row (compile seconds,
            recompile count, densities, the measured error, ...).
        cuda_graph: time replays of a CUDA graph of ``fn`` captured once
            (:func:`kernels.timing.time_cuda`) instead of launches.
        profile: after timing, also record the row's ``kernels`` field, the
            device time of each kernel ``fn`` launches (:func:`kernel_breakdown`).
    """

    fn: Callable[[], Any]
    bytes: int
    flops: int
    extra: dict = dataclasses.field(default_factory=dict)
    cuda_graph: bool = False
    profile: bool = False


# ----------------------------------------------------------------------------
# timing


def time_call(prepared: Prepared, device, timing: dict) -> "timing_mod.Timed":
    """Time ``prepared.fn``: every repetition's device time and latency (:mod:`kernels.timing`).

    On CUDA: :func:`kernels.timing.time_cuda` with the ``timing`` config,
    replaying a CUDA graph of ``fn`` when ``prepared.cuda_graph``. On the
    CPU: ``timing["cpu_reps"]`` wall-clock repetitions.
    """
    if device.type == "cuda":
        return timing_mod.time_cuda(prepared.fn, timing, cuda_graph=prepared.cuda_graph)
    return timing_mod.time_cpu(prepared.fn, timing["cpu_reps"])


# ----------------------------------------------------------------------------
# running cases


def _status_of(exc: BaseException) -> str:
    import torch

    if isinstance(exc, Mismatch):
        return "wrong"
    if isinstance(exc, (Unsupported, NotImplementedError, ImportError)):
        return "unsupported"
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    return "error"


def _row(study: str, impl: str, case: dict, status: str = "ok", error: str | None = None) -> dict:
    """A row of one case before timing: no times, no counts, the given status."""
    return {"study": study, "impl": impl, **case, "times_ms": [], "median_ms": None, "device_times_ms": [],
            "device_ms": None, "bytes": None, "flops": None, "status": status, "error": error,
            "peak_mem_bytes": None, "setup_s": None}


def measure_case(study_mod, impl: str, case: dict, device, timing: dict) -> dict:
    """Prepare, check and time one case; return its row (without ``env``).

    Never raises for a failure of the implementation: the row's ``status``
    and ``error`` say what happened, and ``times_ms`` is empty unless ok.
    A case's own ``warmup_ms`` (a config group's, kept in the row) replaces
    ``timing["warmup_ms"]``.
    """
    import torch

    if "warmup_ms" in case:
        timing = {**timing, "warmup_ms": case["warmup_ms"]}

    row = _row(study_mod.STUDY, impl, case)
    t0 = time.perf_counter()
    try:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        prepared = study_mod.prepare(impl, case, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        row["setup_s"] = round(time.perf_counter() - t0, 3)
        row.update(bytes=int(prepared.bytes), flops=int(prepared.flops), **prepared.extra)
        timed = time_call(prepared, device, timing)
        row["times_ms"] = [round(t, 6) for t in timed.latency_ms]
        row["median_ms"] = statistics.median(timed.latency_ms)
        row["device_times_ms"] = [round(t, 6) for t in timed.device_ms]
        row["device_ms"] = statistics.median(timed.device_ms)
        row["timing"] = timed.info
        if device.type == "cuda":
            row["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated())
        if prepared.profile:
            try:  # a profiler failure costs the breakdown, never the timed row
                row["kernels"] = kernel_breakdown(prepared.fn, device)
            except Exception as exc:  # noqa: BLE001
                row["kernels_error"] = f"{type(exc).__name__}: {exc}"[:500]
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        row["status"] = _status_of(exc)
        row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        row["times_ms"], row["median_ms"] = [], None
        row["device_times_ms"], row["device_ms"] = [], None
        if row["status"] == "error":
            log.debug("%s", traceback.format_exc())
    finally:
        prepared = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row


#: Environment of a :func:`compile_ahead` child: FLA's autotuner keeps its picks in Triton's
#: on-disk cache (``FLA_CACHE_RESULTS``, default on), where the timed pass would read back a
#: child's picks, made without timing (:func:`_compile_only_autotuning`) on a shared GPU.
AHEAD_ENV = {"FLA_CACHE_RESULTS": "0"}
#: Longest a :func:`compile_ahead` child may take, in seconds (the longest seen on the H200,
#: FlashQLA's backward at 1 x 32768, took 162 s); one that hangs is killed, and the timed job
#: compiles its case itself.
AHEAD_TIMEOUT_S = 900


def _in_child(request: dict, env: dict | None = None, timeout: float | None = None) -> tuple[dict | None, str]:
    """Run :func:`_child_main` on ``request`` in a fresh Python process (``env`` added to this
    process's environment): ``(its JSON answer, "")``, or ``(None, what went wrong)`` (exit
    status and the end of stderr) if it crashed or ran past ``timeout`` seconds (then it is
    killed). The answer is the child's last line that is a JSON object with a ``status`` (a row
    or :func:`prepare_case`'s answer): a library's log line that starts with "{" is not one."""
    try:
        proc = subprocess.run([sys.executable, "-m", "kernels.harness"], input=json.dumps(request),
                              capture_output=True, text=True, env={**os.environ, **(env or {})},
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"child process killed after its {timeout:g} s limit"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(answer, dict) and "status" in answer:
                return answer, ""
    return None, f"child process exited with {proc.returncode}: {proc.stderr[-1500:]}"


def _measure_in_child(study: str, impl: str, case: dict, timing: dict) -> dict:
    """Run :func:`measure_case` in a fresh Python process; a crash becomes an error row."""
    row, crash = _in_child({"study": study, "impl": impl, "case": case, "timing": timing})
    if row is not None:
        return row
    mod = importlib.import_module(f"kernels.{study}.study")
    return _row(mod.STUDY, impl, case, status="error", error=crash)


def prepare_case(study_mod, impl: str, case: dict, device) -> dict:
    """Prepare and check one case without timing it: ``{"status", "error", "setup_s"}``, plus the
    one-off seconds (``*_s``: ``first_call_s``, ``compile_s``, ...) and ``recompiles`` that the
    study's ``prepare`` put in ``extra``: a cold compile where this process is the first to compile.

    The first call compiles and autotunes the implementation (Triton, TileLang, Inductor, CuTe),
    which fills the on-disk caches that a later process preparing the same case reads back.
    """
    import torch

    t0 = time.perf_counter()
    status, error, cold = "ok", None, {}
    try:
        prepared = study_mod.prepare(impl, case, device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        cold = {k: v for k, v in prepared.extra.items() if k.endswith("_s") or k == "recompiles"}
    except Exception as exc:  # noqa: BLE001 - a failure here is the timed pass's to record
        status, error = _status_of(exc), f"{type(exc).__name__}: {exc}"[:500]
    return {"status": status, "error": error, "setup_s": round(time.perf_counter() - t0, 3), **cold}


def _run_once(fn: Callable[[], Any], quantiles=None, **_) -> list[float] | float:
    """A benchmarker that runs ``fn`` once (compiling it) and reports 0 ms, in the shape
    Triton's autotuner expects (one value per quantile)."""
    fn()
    return [0.0] * len(quantiles) if quantiles else 0.0


def _compile_only_autotuning() -> None:
    """Make Triton's autotuner compile and launch each config once instead of timing it.

    For a :func:`compile_ahead` child, whose picks are never used: the timed pass autotunes
    again in its own process. Triton's ``Autotuner.do_bench`` asks the active driver for its
    benchmarker (Triton 3.x); where that fails the child times as usual.
    """
    try:
        from triton.runtime import driver

        driver.active.get_benchmarker = lambda: _run_once
    except Exception as exc:  # noqa: BLE001 - the child then autotunes as usual
        log.debug("compile-only autotuning not set: %s", exc)


def _longest_first(case: dict) -> int:
    """Order of a case in :func:`compile_ahead`'s queue: backward passes first, whose compiles
    take longest (2-3 minutes for FLA's and FlashQLA's on the H200), so that no long one starts last."""
    return {"bwd": 0, "fwdbwd": 1}.get(case.get("pass"), 2)


def compile_ahead(jobs: list[tuple[str, str, list[dict]]], workers: int) -> list[list[dict]]:
    """Prepare the cases of several implementations in child processes, ``workers`` at a time,
    before any is timed.

    Compilation dominates a cold sweep of an implementation that compiles per shape (tens of
    seconds per new shape for FLA's Triton autotuning, FlashQLA's TileLang JIT and the CuTe
    kernels of FlexAttention's FLASH backend) and runs on one CPU core each; preparing the cases
    side by side fills the on-disk caches, so that the timed pass's own first calls load the
    kernels instead of compiling them. One queue for every implementation keeps the cores busy
    while the longest compiles run (:func:`_longest_first`). The children's autotuners compile
    every config without timing it (:func:`_compile_only_autotuning`) and keep no picks
    (:data:`AHEAD_ENV`): the timed pass autotunes in its own process, alone on the GPU, as
    without this pass.

    Args:
        jobs: ``(study, impl, cases)`` triples.
        workers: child processes at a time (>= 1).
    Returns, per job and case in their order, :func:`prepare_case`'s answer with ``workers``
    added (``status: error`` where the child crashed).
    """
    def one(item: tuple[str, str, dict]) -> dict:
        study, impl, case = item
        answer, crash = _in_child({"study": study, "impl": impl, "case": case, "prepare_only": True},
                                  env=AHEAD_ENV, timeout=AHEAD_TIMEOUT_S)
        return {**(answer or {"status": "error", "error": crash[:500], "setup_s": None}), "workers": workers}

    items = [(study, impl, case) for study, impl, cases in jobs for case in cases]
    order = sorted(range(len(items)), key=lambda i: _longest_first(items[i][2]))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(order, pool.map(one, [items[i] for i in order])))
    log.info("compiled ahead: %d cases of %s in %.0f s, %d processes at a time", len(items),
             ", ".join(f"{study}/{impl}" for study, impl, _ in jobs), time.perf_counter() - t0, workers)
    answers, start = [], 0
    for _, _, cases in jobs:
        answers.append([done[i] for i in range(start, start + len(cases))])
        start += len(cases)
    return answers


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
    The commit of the case keys is :func:`kernels.env.git_commit`, the one of run_job's rows'
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
    Returns the rows written.
    """
    import torch

    mod = importlib.import_module(f"kernels.{study}.study")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    isolate = impl in getattr(mod, "ISOLATE", ())
    env = environment()
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
                row = _measure_in_child(study, impl, case, timing)
            else:
                row = measure_case(mod, impl, case, device, timing)
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


def _child_main() -> None:
    import torch

    req = json.loads(sys.stdin.read())
    mod = importlib.import_module(f"kernels.{req['study']}.study")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if req.get("prepare_only"):
        if device.type == "cuda":
            _compile_only_autotuning()
        answer = prepare_case(mod, req["impl"], req["case"], device)
    else:
        answer = measure_case(mod, req["impl"], req["case"], device, req["timing"])
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


if __name__ == "__main__":
    # run as a child (python -m kernels.harness): use the imported module's functions, whose
    # Unsupported is the class the studies raise (this file's own __main__ copy is another class)
    from kernels.harness import _child_main as child_main

    child_main()
