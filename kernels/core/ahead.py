"""The compile-ahead pass: the cases of the implementations that compile per shape or per mask,
prepared in parallel child processes before any of them is timed, to fill the on-disk kernel caches
(:func:`compile_ahead`; a study's job of it is :func:`kernels.core.jobs.compile_ahead_job`).
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from kernels.core.children import in_child

log = logging.getLogger("kernels.core.ahead")


#: Environment of a :func:`compile_ahead` child: FLA's autotuner keeps its picks in Triton's
#: on-disk cache (``FLA_CACHE_RESULTS``, default on), where the timed pass would read back a
#: child's picks, made without timing (:func:`_compile_only_autotuning`) on a shared GPU.
AHEAD_ENV = {"FLA_CACHE_RESULTS": "0"}
#: Longest a :func:`compile_ahead` child may take, in seconds (the longest seen on the H200,
#: FlashQLA's backward at 1 x 32768, took 162 s); one that hangs is killed, and the timed job
#: compiles its case itself.
AHEAD_TIMEOUT_S = 900


def _longest_first(case: dict) -> int:
    """Rank of a case in :func:`compile_ahead`'s queue: backward passes first, whose compiles
    take longest (1.5-2.5 minutes for FLA's and FlashQLA's on the H200), so that no long one starts last."""
    return {"bwd": 0, "fwdbwd": 1}.get(case.get("pass"), 2)


def _queue_order(jobs: list[list[dict]], skipped: list[dict]) -> list[tuple[int, int]]:
    """(job, case index) of every case to prepare, in :func:`compile_ahead`'s order: by
    :func:`_longest_first`, and within a rank the jobs in turn (each implementation's first
    backward case, then each one's second, ...), so that every implementation's longest compile
    starts at once, whatever the number of workers."""
    keyed = []
    for j, (cases, skip) in enumerate(zip(jobs, skipped)):
        seen: dict[int, int] = {}
        for i, case in enumerate(cases):
            if i in skip:
                continue
            rank = _longest_first(case)
            seen[rank] = seen.get(rank, -1) + 1
            keyed.append(((rank, seen[rank], j), (j, i)))
    return [item for _, item in sorted(keyed)]


def covered(cases: list[dict]) -> dict[int, tuple[int, int]]:
    """The ``fwdbwd`` cases among ``cases`` (one implementation's) whose ``fwd`` and ``bwd`` cases
    of the same shape are there too: index -> (index of that fwd, index of that bwd). Such a case
    compiles nothing that those two do not (a training step is the forward and then the backward),
    so :func:`compile_ahead` leaves it out of its queue. The shape is every field but ``pass`` and
    ``roles``."""
    shapes = [json.dumps({k: v for k, v in case.items() if k not in ("pass", "roles")}, sort_keys=True, default=str)
              for case in cases]
    first: dict[tuple[str, str], int] = {}
    for i, (case, shape) in enumerate(zip(cases, shapes)):
        first.setdefault((case.get("pass"), shape), i)
    out = {}
    for i, (case, shape) in enumerate(zip(cases, shapes)):
        fwd, bwd = first.get(("fwd", shape)), first.get(("bwd", shape))
        if case.get("pass") == "fwdbwd" and fwd is not None and bwd is not None:
            out[i] = (fwd, bwd)
    return out


def compile_ahead(jobs: list[tuple[str, str, list[dict]]], workers: int) -> list[list[dict]]:
    """Prepare the cases of several implementations in child processes, ``workers`` at a time,
    before any is timed.

    Compilation dominates a cold sweep of an implementation that compiles per shape (tens of
    seconds per new shape for FLA's Triton autotuning, FlashQLA's TileLang JIT and the CuTe
    kernels of FlexAttention's FLASH backend) and runs on one CPU core each; preparing the cases
    side by side fills the on-disk caches, so that the timed pass's own first calls load the
    kernels instead of compiling them. One queue for every implementation keeps the cores busy
    while the longest compiles run (:func:`_queue_order`). The children's autotuners compile
    every config without timing it (:func:`kernels.core.children._compile_only_autotuning`) and keep no picks
    (:data:`AHEAD_ENV`): the timed pass autotunes in its own process, alone on the GPU, as
    without this pass.

    A ``fwdbwd`` case whose forward and backward are in the same job is not prepared
    (:func:`covered`); its answer is theirs, with ``setup_s`` None and ``covered_by``.

    Args:
        jobs: ``(study, impl, cases)`` triples.
        workers: child processes at a time (>= 1).
    Returns, per job and case in their order, :func:`kernels.core.harness.prepare_case`'s answer with ``workers``
    added (``status: error`` where the child crashed).
    """
    def one(item: tuple[str, str, dict]) -> dict:
        study, impl, case = item
        answer, crash = in_child({"study": study, "impl": impl, "case": case, "prepare_only": True},
                                  env=AHEAD_ENV, timeout=AHEAD_TIMEOUT_S)
        return {**(answer or {"status": "error", "error": crash[:500], "setup_s": None}), "workers": workers}

    skipped = [covered(cases) for _, _, cases in jobs]
    # (job, case index, (study, impl, case)) of every case to prepare, longest compiles first
    items = [(j, i, (jobs[j][0], jobs[j][1], jobs[j][2][i]))
             for j, i in _queue_order([cases for _, _, cases in jobs], skipped)]
    answers: list[list[dict | None]] = [[None] * len(cases) for _, _, cases in jobs]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for (j, i, _), answer in zip(items, pool.map(one, [item for _, _, item in items])):
            answers[j][i] = answer
    log.info("compiled ahead: %d cases of %s in %.0f s, %d processes at a time (%d training steps left to "
             "their forward and backward)", len(items), ", ".join(f"{study}/{impl}" for study, impl, _ in jobs),
             time.perf_counter() - t0, workers, sum(map(len, skipped)))
    for got, skip in zip(answers, skipped):
        for i, (fwd, bwd) in skip.items():
            worst = next((a for a in (got[fwd], got[bwd]) if a["status"] != "ok"), got[bwd])
            got[i] = {"status": worst["status"], "error": worst.get("error"), "setup_s": None, "workers": workers,
                      "covered_by": ["fwd", "bwd"]}
    return answers
