"""The GPU suite's lanes (tests/gpu_lanes.py): a ``gpu_memory`` test holds the GPU alone, is not
passed forever by the other lanes' tests, and an unmarked test over a lane's share of memory fails;
the tests that run alone come last."""

import fcntl
import multiprocessing
import queue
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpu_lanes import SCHEDULE_CHUNK, lane, lane_order, lane_threads, over_budget, runs_alone

FORK = multiprocessing.get_context("fork")


def _hold(folder, exclusive, name, order, release):
    with lane(folder, exclusive):
        order.put(name)
        release.wait(30)


def _start(folder, exclusive, name, order):
    release = FORK.Event()
    proc = FORK.Process(target=_hold, args=(folder, exclusive, name, order, release), daemon=True)
    proc.start()
    return proc, release


def _next(order, timeout=10.0):
    return order.get(timeout=timeout)


def _none_for(order, seconds):
    """Nobody took the lock for ``seconds``."""
    with pytest.raises(queue.Empty):
        order.get(timeout=seconds)


def _gate_taken(folder) -> bool:
    with open(folder / "gpu_lanes.turnstile", "a") as gate:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(gate, fcntl.LOCK_UN)
        return False


def _wait_gate_taken(folder, timeout=10.0):
    end = time.monotonic() + timeout
    while not _gate_taken(folder):
        assert time.monotonic() < end, "the waiting gpu_memory test never took the turnstile"
        time.sleep(0.02)


def test_lanes_share_and_a_gpu_memory_test_waits_for_them(tmp_path):
    order = FORK.Queue()
    first, release_first = _start(tmp_path, False, "shared 1", order)
    assert _next(order) == "shared 1"
    second, release_second = _start(tmp_path, False, "shared 2", order)
    assert _next(order) == "shared 2"  # beside the first
    alone, release_alone = _start(tmp_path, True, "alone", order)
    _wait_gate_taken(tmp_path)
    release_first.set()
    _none_for(order, 0.5)  # one shared test still runs
    release_second.set()
    assert _next(order) == "alone"
    release_alone.set()
    for proc in (first, second, alone):
        proc.join(10)


def test_a_waiting_gpu_memory_test_is_not_passed_by_later_lanes(tmp_path):
    order = FORK.Queue()
    first, release_first = _start(tmp_path, False, "shared 1", order)
    assert _next(order) == "shared 1"
    alone, release_alone = _start(tmp_path, True, "alone", order)
    _wait_gate_taken(tmp_path)
    later, release_later = _start(tmp_path, False, "shared later", order)
    _none_for(order, 0.5)  # the later shared test waits behind the gpu_memory one
    release_first.set()
    assert _next(order) == "alone"
    _none_for(order, 0.3)  # and not beside it
    release_alone.set()
    assert _next(order) == "shared later"
    release_later.set()
    for proc in (first, alone, later):
        proc.join(10)


def test_an_unmarked_test_over_its_share_fails_naming_the_marker():
    gib = 2**30
    assert over_budget("t::a", 17 * gib, 140 * gib) is None  # within 140 / 8 = 17.5 GiB
    message = over_budget("t::b", 113 * gib, 140 * gib)
    assert message.startswith("t::b reserved 113.0 GiB") and "17.5 GiB" in message and "gpu_memory" in message


class _Item:
    def __init__(self, name, *markers):
        self.name, self.keywords = name, {name: 1, "gpu": 1, **dict.fromkeys(markers, 1)}


def test_long_tests_first_each_before_a_short_one_and_those_that_run_alone_last(monkeypatch):
    import conftest

    items = [_Item("a"), _Item("memory 1", "gpu_memory"), _Item("b"), _Item("timing", "gpu_timing"),
             _Item("long 1", "gpu_long"), _Item("memory 2", "gpu_memory"), _Item("c"), _Item("long 2", "gpu_long")]
    want = ["long 1", "a", "long 2", "b", "c", "memory 1", "timing", "memory 2"]
    assert [i.name for i in lane_order(items)] == want
    monkeypatch.setattr(conftest, "HAS_CUDA", True)  # the collection hook on a GPU host
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == want
    assert runs_alone({"gpu_timing": 1}) and runs_alone({"gpu_memory": 1}) and not runs_alone({"gpu": 1})
    # more long tests than short ones: the long ones left over follow the pairs
    items = [_Item("long 1", "gpu_long"), _Item("long 2", "gpu_long"), _Item("a"), _Item("long 3", "gpu_long")]
    assert [i.name for i in lane_order(items)] == ["long 1", "a", "long 2", "long 3"]


def test_the_test_after_each_long_one_is_a_gpu_test_that_runs():
    """The order is made after ``-m gpu`` deselects (collected here on any host): the test after
    each long one, a lane's second at first, is a GPU test. Made before, it could be a CPU test,
    deselected, and both long tests went to one lane, one after the other (on an H200 at 8cd2bc5:
    FLA's 160 s, then FlashQLA's 245 s)."""
    from test_longctx import LONG_IN_A_LANE

    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                           "tests/test_longctx.py"], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    long = [f"[{impl}]" for impl in LONG_IN_A_LANE]
    is_long = [any(line.endswith(name) for name in long) for line in ids]
    assert is_long[:4] == [True, False, True, False] and sum(is_long) == len(long), ids[:6]


def test_a_lane_takes_one_test_at_a_time_on_a_gpu_host(monkeypatch):
    """On a GPU host pytest-xdist's --maxschedchunk becomes one unless given (each lane then holds
    the test it runs and the next; two consecutive tests at first, so a long one and a short one);
    a value given stays, and without pytest-xdist nothing is set."""
    import conftest

    class Config:
        def __init__(self, **option):
            self.option = type("Option", (), option)()

        def addinivalue_line(self, *_):
            pass

    monkeypatch.setattr(conftest, "HAS_CUDA", True)
    for given, want in ((None, SCHEDULE_CHUNK), (5, 5)):
        config = Config(maxschedchunk=given)
        conftest.pytest_configure(config)
        assert config.option.maxschedchunk == want
    config = Config()
    conftest.pytest_configure(config)
    assert not hasattr(config.option, "maxschedchunk")
    assert SCHEDULE_CHUNK == 1


def test_the_long_context_anchors_cases_start_first():
    """FlashQLA's and FLA's cases took 216 s and 144 s in a lane; started midway, FlashQLA's held the
    first test that runs alone 187 s with every other lane idle. The other implementations' cases
    took seconds to 41 s."""
    import test_longctx

    params = test_longctx.test_every_impl_runs_each_of_its_cases_on_gpu.pytestmark
    (parametrize,) = [m for m in params if m.name == "parametrize"]
    long = {p.values[0] for p in parametrize.args[1]
            if hasattr(p, "marks") and any(m.name == "gpu_long" for m in p.marks)}
    assert long == {"flash_qla", "fla_chunk"}


def test_the_timing_tests_are_marked_to_run_alone():
    """The tests that assert on measured times run alone (one failed beside seven lanes on an H200)."""
    import test_harness

    for name in ("test_cuda_timing_bounds_repetitions", "test_device_time_hides_the_hosts_launch_and_latency_keeps_it",
                 "test_graph_replay_is_timed_cold_and_matches_the_launch"):
        marks = {m.name for m in getattr(test_harness, name).pytestmark}
        assert {"gpu", "gpu_timing"} <= marks, name


def test_each_lane_takes_its_share_of_the_cores():
    assert lane_threads(16, 8) == 2 and lane_threads(2, 8) == 1 and lane_threads(16, 1) == 16


def test_a_failed_gpu_test_frees_what_its_frames_held(monkeypatch):
    """The report hook drops pytest's post-mortem reference to a failed GPU test's traceback: once
    the call's own references go, a tensor that only the test's frames held is freed by the lane's
    teardown (gc.collect), before the others go on."""
    import gc
    import sys
    import weakref

    import conftest

    class Held:
        pass

    def failing_test():
        held = Held()
        ref.append(weakref.ref(held))
        assert held is None   # a rewritten assert: its frame's locals() hold `held` too

    ref = []
    try:
        failing_test()
    except AssertionError:
        excinfo = pytest.ExceptionInfo.from_current()
    sys.last_traceback = excinfo.tb   # as pytest's call phase does

    class Call:
        pass

    call = Call()
    call.excinfo = excinfo
    monkeypatch.setattr(conftest, "HAS_CUDA", True)
    hook = conftest.pytest_runtest_makereport(_Item("t"), call)
    next(hook)
    with pytest.raises(StopIteration) as done:
        hook.send("the report")
    assert done.value.value == "the report"
    del call, excinfo
    gc.collect()
    kept = hasattr(sys, "last_traceback")
    if kept:
        del sys.last_traceback
    assert ref[0]() is None and not kept
