"""The GPU suite in parallel lanes (``pytest -m gpu -n 8``, pytest-xdist): the GPU is held as
:data:`LANES` shares of its memory, each an eighth of what the lanes' CUDA contexts leave of the
memory that torch reports (:func:`share_bytes`: 16.5 GiB of an H200's 140 GiB, 8.9 GiB of an H100's
79.2 GiB). A GPU test holds one share, or the shares that its marker asks for (:func:`lanes_of`):
``gpu_memory(gib=X)``, X its measured peak reservation in GiB, ``ceil(X GiB / share)`` of them on the
GPU it runs on (a test whose X is more than all of them is skipped, :func:`too_large`);
``gpu_timing`` (asserts on measured times, which other lanes' kernels would disturb) all of them, so
that it runs alone. A test must stay within the memory of the shares it holds (:func:`over_budget`).

The lanes coordinate through locks on files in the run's shared temporary folder (``fcntl.flock``):
one file per share, taken exclusively, by one test at a time through a turnstile (:func:`lane`). A
test waiting for several shares holds the turnstile and the shares it has until it has them all, so
that once it holds the turnstile, tests needing one share do not pass it (until then, the
turnstile's waiters are not served in order, so a few one-share tests may go first); the kernel
drops the locks of a lane that dies. The order (:func:`lane_order`): the tests marked ``gpu_long``
(minutes in a lane) first, each followed by a short one; the other shared tests taking turns by test
function and variant (:func:`_spread`); the tests holding several shares last. Each lane holds one
test and one queued (:data:`SCHEDULE_CHUNK`).
"""

import contextlib
import fcntl
import gc
import math
import os
import time
from pathlib import Path

import pytest

#: The shares the GPU is held as: the lanes that the GPU suite is planned for (README:
#: ``pytest -m gpu -n 8``). A GPU test fails when it reserves more than the memory of the shares it
#: holds (:func:`over_budget`).
LANES = 8
#: The marker of the GPU tests that may need more than a share of memory: ``gpu_memory(gib=X)``, X
#: the test's peak reservation in GiB (its ``gpu_peak_gib`` in a run, rounded up to the next GiB).
MEMORY = "gpu_memory"
#: GPU memory that a lane's process takes beside what torch reserves (its CUDA context, the CUDA
#: libraries' and Triton's kernels), in bytes: 0.7-1.1 GiB each, 6.7 GiB for the eight, at the end of
#: `pytest -m gpu -n 8` on an H100 80 GB (NVML's memory of each process less torch's reservation).
CONTEXT_BYTES = 2**30
#: The marker of the GPU tests that assert on measured times: they hold every share.
TIMING = "gpu_timing"
#: The marker of the GPU tests that take minutes in a lane: they start first (unless they hold every share).
LONG = "gpu_long"
#: Tests that pytest-xdist hands a lane at a time (its ``--maxschedchunk``). It keeps two with each
#: lane (the one running and the next) and hands each lane two consecutive tests at first; by default
#: it hands each lane about ten consecutive tests at first, and later ones too.
SCHEDULE_CHUNK = 1
#: Seconds between a waiting test's tries of the shares that other tests hold.
POLL_S = 0.05


def lane_threads(cpus: int, lanes: int, shares: int = 1) -> int:
    """torch's CPU threads for a test holding ``shares`` of the GPU's :data:`LANES` shares, in one of
    ``lanes`` test processes on ``cpus`` cores: the lane's share of the cores (at least one), or
    ``shares`` eighths of them when more. torch's default, every core in every process,
    oversubscribes the host's cores ``lanes`` times over."""
    return max(1, cpus // max(1, lanes), cpus * shares // LANES)


def share_bytes(total_bytes: float) -> float:
    """The memory of one of the :data:`LANES` shares of a GPU of ``total_bytes`` (bytes, as torch
    reports it: ``get_device_properties(0).total_memory``), in bytes: what the lanes' CUDA contexts
    leave of it (:data:`CONTEXT_BYTES` each), over :data:`LANES`."""
    return (total_bytes - LANES * CONTEXT_BYTES) / LANES


def peak_gib(item) -> float | None:
    """The peak reservation (GiB) that the test ``item``'s ``gpu_memory(gib=X)`` marker records;
    None without the marker.

    Raises:
        ValueError: the marker without a positive number ``gib``, or with anything else (the message
            names the test).
    """
    marker = item.get_closest_marker(MEMORY)
    if marker is None:
        return None
    gib = marker.kwargs.get("gib")
    if marker.args or set(marker.kwargs) != {"gib"} or type(gib) not in (int, float) or gib <= 0:
        given = ", ".join([*map(repr, marker.args), *(f"{k}={v!r}" for k, v in marker.kwargs.items())])
        raise ValueError(f"{item.nodeid}: gpu_memory({given}): give the test's peak reservation, gpu_memory(gib=X), "
                         "X a positive number of GiB")
    return gib


def lanes_of(item, total_bytes: float) -> int:
    """The shares of a GPU of ``total_bytes`` (bytes) that the test ``item`` (a pytest item) holds:
    every one (:data:`LANES`) when marked ``gpu_timing``; when marked ``gpu_memory(gib=X)``, as many
    as hold X GiB (``ceil(X GiB / share_bytes(total_bytes))``, at least one; more than
    :data:`LANES` when it does not fit the GPU: :func:`too_large`); else one."""
    if item.get_closest_marker(TIMING) is not None:
        return LANES
    gib = peak_gib(item)
    return 1 if gib is None else max(1, math.ceil(gib * 2**30 / share_bytes(total_bytes)))


def too_large(item, total_bytes: int) -> str | None:
    """Why the test ``item`` is skipped on a GPU of ``total_bytes`` (bytes): its ``gpu_memory``
    peak is more than the memory of every share; None when it fits."""
    if lanes_of(item, total_bytes) <= LANES:
        return None
    return (f"its peak of {peak_gib(item)} GiB of GPU memory (gpu_memory) is more than the "
            f"{LANES * share_bytes(total_bytes) / 2**30:.1f} GiB that this GPU's {total_bytes / 2**30:.1f} GiB "
            f"leave to the tests in {LANES} lanes")


def _function(item) -> str:
    """A test's function: its node id before the parameters."""
    return item.nodeid.split("[")[0]


def _first_parameter(item) -> str:
    """The first parameter of a test's id (``False`` of ``f[False-1-zero]``; empty without one)."""
    return item.nodeid.partition("[")[2].split("-")[0]


def _groups(items: list, key) -> list[list]:
    """``items`` grouped by ``key`` (a function of an item), the groups in the order of their first
    items, each in its order."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.values())


def _round_robin(items: list, key) -> list:
    """``items`` taking turns by ``key`` (a function of an item): the first item of each key (in the
    order of their first items), then the second of each, and so on."""
    groups = _groups(items, key)
    rounds = max((len(group) for group in groups), default=0)
    return [group[i] for i in range(rounds) for group in groups if i < len(group)]


def _spread(items: list) -> list:
    """``items`` (GPU tests) taking turns by test function, and each function's tests by the first
    part of their id (the innermost ``parametrize``'s value: in this suite mostly the kernel's
    variant, a product dtype or an implementation; a head size in some): the lanes start on different
    kernels at a time, each compiled once into Triton's cache on disk, which the other lanes then
    read, rather than all compiling the same ones. Once the other functions' tests are handed out,
    the rest of the largest function's follow each other."""
    turns = [item for group in _groups(items, _function) for item in _round_robin(group, _first_parameter)]
    return _round_robin(turns, _function)


def lane_order(items: list, total_bytes: float) -> list:
    """``items`` (pytest items) in the order that the lanes take them on a GPU of ``total_bytes``
    (bytes): the GPU tests marked :data:`LONG` first (unless they hold every share), each followed by
    one of the shared tests; then the rest of those, the tests without the ``gpu`` marker in their
    order and the GPU ones by :func:`_spread`; then the tests holding several shares
    (:func:`lanes_of`), those holding every share (or too large for the GPU) last.

    A test holding several shares waits for the tests in flight in as many lanes, and the lanes
    behind it idle until it has them: last (pytest-xdist hands tests out in this order), they run
    with the lanes near their end and every kernel compiled by the shared tests; the ones holding
    some shares beside each other, those holding all alone at the very end. A long test still in
    flight when they begin holds them up: first, each runs beside the others' short ones, and the
    short test after each puts the next long one in another lane (a lane gets two consecutive tests
    at first, :data:`SCHEDULE_CHUNK`). docs/measuring.md gives the runs."""
    shares = {id(item): lanes_of(item, total_bytes) for item in items}
    long = [item for item in items if LONG in item.keywords and shares[id(item)] < LANES]
    short = [item for item in items if shares[id(item)] == 1 and LONG not in item.keywords]
    short = [item for item in short if "gpu" not in item.keywords] + _spread(
        [item for item in short if "gpu" in item.keywords])
    paired = [item for pair in zip(long, short) for item in pair]
    wide = [item for item in items if 1 < shares[id(item)] < LANES and LONG not in item.keywords]
    whole = [item for item in items if shares[id(item)] >= LANES]
    return paired + long[len(short):] + short[len(long):] + wide + whole


@contextlib.contextmanager
def lane(folder: Path, shares: int = 1):
    """Hold ``shares`` of the GPU's :data:`LANES` shares (one lock file each in ``folder``, the
    folder shared by every lane of one run) while the block runs; wait for them through the
    turnstile, one waiting test at a time."""
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(folder / f"gpu_lanes.{i}", "a")) for i in range(LANES)]
        gate = stack.enter_context(open(folder / "gpu_lanes.turnstile", "a"))
        held, need = [], min(shares, LANES)
        stack.callback(lambda: [fcntl.flock(f, fcntl.LOCK_UN) for f in held])
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            while len(held) < need:
                for f in files:
                    if len(held) < need and f not in held and _try_lock(f):
                        held.append(f)
                if len(held) < need:
                    time.sleep(POLL_S)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


def _try_lock(file) -> bool:
    """Whether ``file``'s lock was free and is now taken (exclusively)."""
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def in_lane(node, folder: Path, workers: int, torch):
    """Run a GPU test (the pytest item ``node``) in its lane: holding its shares of the GPU
    (:func:`lanes_of`, :func:`lane` in ``folder``) and, in one of ``workers`` pytest-xdist lanes
    (0: none), :func:`lane_threads` of ``torch``'s CPU threads; then returning the memory it cached,
    recording its peak reservation (GiB) as the user property ``gpu_peak_gib`` and failing it
    (``pytest.fail``) when that is over its shares' memory (:func:`over_budget`). ``torch``: the
    module (a stand-in in the tests)."""
    total = torch.cuda.get_device_properties(0).total_memory
    shares = lanes_of(node, total)
    threads = torch.get_num_threads()
    with lane(folder, shares):
        if workers:
            torch.set_num_threads(lane_threads(os.cpu_count() or 1, workers, shares))
        torch.cuda.reset_peak_memory_stats()
        yield
        torch.set_num_threads(threads)
        peak = torch.cuda.max_memory_reserved()
        gc.collect()
        torch.cuda.empty_cache()
    node.user_properties.append(("gpu_peak_gib", round(peak / 2**30, 1)))
    message = over_budget(node.nodeid, peak, total, shares)
    if message:
        pytest.fail(message)


def over_budget(nodeid: str, peak_bytes: int, total_bytes: int, shares: int = 1) -> str | None:
    """The failure message of a GPU test holding ``shares`` of the :data:`LANES` shares of a GPU of
    ``total_bytes`` (bytes) that reserved ``peak_bytes`` (bytes): more than its shares' memory
    (``shares * share_bytes(total_bytes)``); None within it (and always when it holds them all)."""
    budget = shares * share_bytes(total_bytes)
    if shares >= LANES or peak_bytes <= budget:
        return None
    return (f"{nodeid} reserved {peak_bytes / 2**30:.1f} GiB of GPU memory, more than {shares} of {LANES} lanes' "
            f"shares ({budget / 2**30:.1f} GiB): mark it gpu_memory(gib=X), X its peak in GiB, or make it smaller")
