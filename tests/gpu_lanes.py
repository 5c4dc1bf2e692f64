"""The GPU suite in parallel lanes (``pytest -m gpu -n 8``, pytest-xdist): a test marked
``gpu_memory`` (needs most of the GPU's memory) or ``gpu_timing`` (asserts on measured times,
which the other lanes' kernels would disturb) runs alone; every other GPU test shares the GPU
with the other lanes and must stay within a lane's share of its memory.

The lanes coordinate through a readers-writer lock on files in the run's shared temporary
folder (``fcntl.flock``): a test that runs alone takes it exclusively, the others shared. A
turnstile taken before either keeps a waiting test that runs alone from being passed by shared
ones forever (the lock itself does not queue its waiters). The tests marked ``gpu_long`` (minutes
in a lane) come first, each followed by a short one, and the tests that run alone last
(:func:`lane_order`); each lane holds one test and one queued (:data:`SCHEDULE_CHUNK`).
"""

import contextlib
import fcntl
from pathlib import Path

#: The lanes that the GPU suite is planned for (README: ``pytest -m gpu -n 8``). A GPU test that does
#: not run alone (:data:`ALONE`) fails when it reserves more than the GPU's memory over this many lanes.
LANES = 8
#: The markers of the GPU tests that run alone.
ALONE = ("gpu_memory", "gpu_timing")
#: The marker of the shared GPU tests that take minutes in a lane: they start first.
LONG = "gpu_long"
#: Tests that pytest-xdist hands a lane at a time (its ``--maxschedchunk``). It keeps two with each
#: lane (the one running and the next) and hands each lane two consecutive tests at first; by default
#: it hands each lane about ten consecutive tests at first, and later ones too.
SCHEDULE_CHUNK = 1


def lane_threads(cpus: int, lanes: int) -> int:
    """The CPU threads of each of ``lanes`` test processes on ``cpus`` cores (at least one): torch's
    default, every core in every process, oversubscribes the host's cores ``lanes`` times over."""
    return max(1, cpus // max(1, lanes))


def runs_alone(keywords) -> bool:
    """Whether a test of these ``keywords`` (a pytest item's) holds the GPU alone."""
    return any(marker in keywords for marker in ALONE)


def lane_order(items: list) -> list:
    """``items`` (pytest items): the tests marked :data:`LONG` first, each followed by one of the
    other shared tests, then the rest of those, then the tests that run alone; each group in its
    order.

    A test that runs alone waits for the shared test in flight in every other lane, and those lanes
    idle until it ends: last (pytest-xdist hands tests out in this order), the tests that run alone
    follow each other with the lanes near their end and every kernel compiled by the shared tests,
    in parallel (Triton's cache on disk; each lane autotunes its own); spread among the others,
    each drained the lanes once. A long shared test still in flight when they begin holds every
    lane up: first, each runs beside the others' short ones, and the short test after each puts the
    next long one in another lane (a lane gets two consecutive tests at first,
    :data:`SCHEDULE_CHUNK`). docs/measuring.md gives the runs."""
    alone = [item for item in items if runs_alone(item.keywords)]
    shared = [item for item in items if not runs_alone(item.keywords)]
    long = [item for item in shared if LONG in item.keywords]
    short = [item for item in shared if LONG not in item.keywords]
    paired = [item for pair in zip(long, short) for item in pair]
    return paired + long[len(short):] + short[len(long):] + alone


@contextlib.contextmanager
def lane(folder: Path, exclusive: bool):
    """Hold the GPU lanes' lock in ``folder`` (shared by every lane of one run): alone when
    ``exclusive`` (a test marked as in :data:`ALONE`), else beside the other lanes' tests."""
    with open(folder / "gpu_lanes.turnstile", "a") as gate, open(folder / "gpu_lanes.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def over_budget(nodeid: str, peak_bytes: int, total_bytes: int, lanes: int = LANES) -> str | None:
    """The failure message of a GPU test not marked ``gpu_memory`` that reserved ``peak_bytes`` of
    a GPU of ``total_bytes``: more than one lane's share (``total_bytes / lanes``); None within it."""
    share = total_bytes / lanes
    if peak_bytes <= share:
        return None
    return (f"{nodeid} reserved {peak_bytes / 2**30:.1f} GiB of GPU memory, more than one of {lanes} lanes' "
            f"share ({share / 2**30:.1f} GiB): mark it gpu_memory (it then runs alone) or make it smaller")
