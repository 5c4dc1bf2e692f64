"""The GPU suite's lanes (tests/gpu_lanes.py): a test holds its shares of the GPU (a ``gpu_memory``
test those that its peak needs on the GPU at hand, on an H100 80 GB more than on an H200, and is
skipped where all of them are too few), is not passed forever by the other lanes' tests, and a test
over its shares of memory fails; the tests holding several shares come last."""

import fcntl
import multiprocessing
import queue
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpu_lanes import (LANES, SCHEDULE_CHUNK, _try_lock, in_lane, lane, lane_order, lane_threads, lanes_of, over_budget,
                       too_large)

FORK = multiprocessing.get_context("fork")
#: The memory (bytes) that torch reports of an H100 80 GB (``get_device_properties(0).total_memory``,
#: 79.2 GiB) and of an H200 141 GB (140 GiB): the GPUs faked here.
H100, H200 = 85_017_493_504, 140 * 2**30


def _hold(folder, shares, name, order, release):
    with lane(folder, shares):
        order.put(name)
        release.wait(30)


def _start(folder, shares, name, order):
    """A lane's test holding ``shares`` (True: every share, alone; False: one) until released."""
    shares = LANES if shares is True else 1 if shares is False else shares
    release = FORK.Event()
    proc = FORK.Process(target=_hold, args=(folder, shares, name, order, release), daemon=True)
    proc.start()
    return proc, release


def _next(order, timeout=10.0):
    return order.get(timeout=timeout)


def _none_for(order, seconds):
    """Nobody took the lock for ``seconds``."""
    with pytest.raises(queue.Empty):
        order.get(timeout=seconds)


def _takeable(path) -> bool:
    """Whether this process could take the lock of the file ``path`` now (it lets it go again)."""
    with open(path, "a") as f:
        if not _try_lock(f):
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def _gate_taken(folder) -> bool:
    return not _takeable(folder / "gpu_lanes.turnstile")


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


def test_a_test_of_several_shares_runs_beside_the_others_when_they_leave_it_enough(tmp_path):
    """Six one-share tests and one of two shares fill the eight; a second two-share test waits for
    two shares to free, and a one-share test behind it waits too (not passing it)."""
    order = FORK.Queue()
    held = []
    for i in range(6):
        held.append(_start(tmp_path, False, f"shared {i}", order))
        assert _next(order) == f"shared {i}"
    held.append(_start(tmp_path, 2, "two 1", order))
    assert _next(order) == "two 1"  # beside the six
    held.append(_start(tmp_path, 2, "two 2", order))
    _wait_gate_taken(tmp_path)
    held.append(_start(tmp_path, False, "shared later", order))
    _none_for(order, 0.5)
    held[0][1].set()
    _none_for(order, 0.3)  # one share free, two needed
    held[1][1].set()
    assert _next(order) == "two 2"
    _none_for(order, 0.3)  # all eight held again
    held[2][1].set()
    assert _next(order) == "shared later"
    for proc, release in held:
        release.set()
        proc.join(10)


def test_a_test_over_its_shares_fails_naming_the_marker():
    gib = 2**30
    assert over_budget("t::a", 16 * gib, H200) is None  # within (140 - 8 x 1) / 8 = 16.5 GiB
    message = over_budget("t::b", 113 * gib, H200)
    assert message.startswith("t::b reserved 113.0 GiB") and "(16.5 GiB)" in message and "gpu_memory(gib=X)" in message
    assert over_budget("t::c", 60 * gib, H200, shares=4) is None  # within 66 GiB
    assert "4 of 8 lanes' shares (66.0 GiB)" in over_budget("t::d", 67 * gib, H200, shares=4)
    assert "2 of 8 lanes' shares (17.8 GiB)" in over_budget("t::f", 18 * gib, H100, shares=2)  # 8.9 GiB a share
    assert over_budget("t::e", 139 * gib, H200, shares=LANES) is None  # alone: all of it


class _Marker:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _Item:
    """A pytest item's face to the lanes: its name, node id (its test function before ``[``),
    keywords and markers (name or (name, kwargs))."""

    def __init__(self, name, *markers, gpu=True):
        markers = dict(m if isinstance(m, tuple) else (m, {}) for m in markers)
        self.name, self.nodeid = name, f"t.py::{name.split()[0]}[{name}]"
        self.keywords = {name: 1, **({"gpu": 1} if gpu else {}), **dict.fromkeys(markers, 1)}
        self.markers = {m: _Marker(*kwargs.pop("args", ()), **kwargs) for m, kwargs in markers.items()}
        self.user_properties = []

    def get_closest_marker(self, name):
        return self.markers.get(name)

    def add_marker(self, mark):
        self.markers[mark.name] = mark


def _peak(name, gib):
    """A test marked ``gpu_memory(gib=gib)``."""
    return _Item(name, ("gpu_memory", {"gib": gib}))


def _on_gpu(monkeypatch, total_bytes):
    """conftest on a GPU host of ``total_bytes`` (bytes) of memory."""
    import conftest

    monkeypatch.setattr(conftest, "HAS_CUDA", True)
    properties = type("Properties", (), {"total_memory": total_bytes})
    monkeypatch.setattr(conftest.torch.cuda, "get_device_properties", lambda _: properties)
    return conftest


def test_the_shares_a_test_holds_follow_its_peak_and_the_gpus_memory():
    """``ceil(peak / share)``: a share is 8.9 GiB of an H100 80 GB, 16.5 GiB of an H200; a test of more
    than 71.2 GiB does not fit an H100 (more shares than there are)."""
    for total in (H100, H200):
        assert lanes_of(_Item("a"), total) == 1 and lanes_of(_Item("t", "gpu_timing"), total) == LANES
    for gib, h100, h200 in ((0.5, 1, 1), (8.8, 1, 1), (9, 2, 1), (16, 2, 1), (17, 2, 2), (18, 3, 2), (25, 3, 2),
                            (58, 7, 4), (71, 8, 5), (72, 9, 5)):
        assert (lanes_of(_peak("m", gib), H100), lanes_of(_peak("m", gib), H200)) == (h100, h200), gib
    for given, marker in (("", {}), ("gib=0", {"gib": 0}), ("gib=True", {"gib": True}), ("gib='4'", {"gib": "4"}),
                          ("lanes=2", {"lanes": 2}), ("4", {"args": (4,)}), ("gib=4, lanes=2", {"gib": 4, "lanes": 2})):
        with pytest.raises(ValueError, match=rf"t.py::m\[m\]: gpu_memory\({given}\): give the test's peak"):
            lanes_of(_Item("m", ("gpu_memory", marker)), H200)


def test_a_test_larger_than_the_gpu_is_skipped_naming_its_peak_and_the_gpus_memory(monkeypatch):
    big, fits = _peak("big", 72), _peak("fits", 58)
    assert too_large(big, H200) is None and too_large(fits, H100) is None and too_large(_peak("all", 71), H100) is None
    assert too_large(big, H100) == ("its peak of 72 GiB of GPU memory (gpu_memory) is more than the 71.2 GiB that "
                                    "this GPU's 79.2 GiB leave to the tests in 8 lanes")
    items = [big, _Item("a"), fits]
    _on_gpu(monkeypatch, H100).pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["a", "fits", "big"]
    assert big.get_closest_marker("skip").kwargs == {"reason": too_large(big, H100)}
    assert fits.get_closest_marker("skip") is None
    items = [_peak("big", 72), _Item("a")]
    _on_gpu(monkeypatch, H200).pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["a", "big"] and items[1].get_closest_marker("skip") is None  # 5 shares there


def test_long_tests_first_each_before_a_short_one_and_those_of_several_shares_last(monkeypatch):
    items = [_Item("a"), _peak("memory 1", 200), _Item("b"), _Item("timing", "gpu_timing"),
             _Item("long 1", "gpu_long"), _peak("wide 1", 30), _Item("c"),
             _peak("memory 2", 200), _Item("long 2", "gpu_long", ("gpu_memory", {"gib": 13})), _peak("wide 2", 16)]
    # on an H100: wide 1 holds 4 shares, wide 2 and long 2 two; the memory tests fit no GPU (skipped on one)
    want = ["long 1", "a", "long 2", "b", "c", "wide 1", "wide 2", "memory 1", "timing", "memory 2"]
    assert [i.name for i in lane_order(items, H100)] == want
    _on_gpu(monkeypatch, H100).pytest_collection_modifyitems(None, items)  # the collection hook on a GPU host
    assert [i.name for i in items] == want
    # on an H200 wide 2 holds one share, and runs among the shared tests (long 2 too)
    assert [i.name for i in lane_order(items, H200)] == ["long 1", "a", "long 2", "b", "c", "wide 2", "wide 1",
                                                         "memory 1", "timing", "memory 2"]
    # more long tests than short ones: the long ones left over follow the pairs
    items = [_Item("long 1", "gpu_long"), _Item("long 2", "gpu_long"), _Item("a"), _Item("long 3", "gpu_long")]
    assert [i.name for i in lane_order(items, H100)] == ["long 1", "a", "long 2", "long 3"]


def test_consecutive_shared_gpu_tests_are_of_different_functions_and_variants():
    """The shared GPU tests take turns by test function (the first of each, then the second...), and
    each function's by its first parameter, so that the lanes do not all compile one kernel variant at
    once (on an H200 at 8cd2bc5 six lanes started the backward's regime tests of one product dtype
    within 11 s, each taking 42-50 s where the later ones took under a second); tests without the gpu
    marker keep their order, first."""
    items = [_Item("f 1"), _Item("f 2"), _Item("f 3"), _Item("g 1"), _Item("cpu 1", gpu=False), _Item("h 1"),
             _Item("g 2"), _Item("cpu 2", gpu=False)]
    assert [i.name for i in lane_order(items, H100)] == ["cpu 1", "cpu 2", "f 1", "g 1", "h 1", "f 2", "g 2", "f 3"]
    items = [_Item(f"f {dtype}-{n}") for dtype in ("False", "True") for n in (1, 2, 3)] + [_Item("g 1")]
    assert [i.name for i in lane_order(items, H100)] == ["f False-1", "g 1", "f True-1", "f False-2", "f True-2",
                                                         "f False-3", "f True-3"]


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


#: The shares of the GPU suite's tests that hold more than one on an H100 80 GB or an H200 (test id:
#: shares on each), from their ``gpu_memory`` peaks; every other GPU test holds one.
SUITE_SHARES = {
    "test_gdn_backward.py::test_gpu_bwd_study_shapes_deterministic[False-4-8192-16]": (2, 1),
    "test_gdn_backward.py::test_gpu_bwd_study_shapes_deterministic[True-4-8192-16]": (2, 1),
    "test_gdn_backward.py::test_gpu_bwd_many_sequences_grid[2048-32-32]": (7, 4),
    "test_gdn_backward.py::test_gpu_bwd_many_sequences_grid[4096-8-16]": (7, 4),
    "test_gdn_backward.py::test_gpu_bwd_flash_qla_shapes_deterministic[1-32768-8-16]": (2, 1),
    "test_gdn_kernels.py::test_gpu_chunk_study_shapes[1-32768-32]": (3, 2),
    "test_gdn_kernels.py::test_gpu_many_sequences_grid[chunk-2048-32-32]": (3, 2),
    "test_gdn_kernels.py::test_gpu_many_sequences_grid[chunk-4096-8-16]": (3, 2),
    "test_gdn_kernels.py::test_gpu_many_sequences_grid[recurrent-2048-32-32]": (2, 1),
    "test_gdn_kernels.py::test_gpu_many_sequences_grid[recurrent-4096-8-16]": (2, 1),
    "test_gdn_kernels.py::test_gpu_chunk_flash_qla_shapes[1-32768-16-32]": (3, 2),
    "test_gdn_kernels.py::test_gpu_chunk_flash_qla_shapes[4-8192-16-64]": (3, 2),
    "test_swiglu_kernels.py::test_more_than_2_31_elements[flat]": (3, 2),
    "test_swiglu_kernels.py::test_more_than_2_31_elements[strided_halves]": (3, 2),
    **{f"test_swiglu_kernels.py::test_autotuned_path_on_gpu[(8192, 14336)-torch.{dtype}]": (2, 1)
       for dtype in ("bfloat16", "float16", "float32")},
    **{f"test_harness.py::{name}": (LANES, LANES) for name in (
        "test_cuda_timing_bounds_repetitions", "test_device_time_hides_the_hosts_launch_and_latency_keeps_it",
        "test_graph_replay_is_timed_cold_and_matches_the_launch")},
}
#: Collects the GPU tests of the files given after the GPU memories (bytes) and prints each test's
#: shares on each GPU (run in the repository's root).
_PRINT_SHARES = """
import sys
import pytest

class Shares:
    def pytest_collection_finish(self, session):
        from gpu_lanes import lanes_of   # tests/ is on the path once pytest loads its conftest
        for item in session.items:
            print("shares", item.nodeid, *(lanes_of(item, int(total)) for total in sys.argv[1:3]))

sys.exit(pytest.main(["--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider", *sys.argv[3:]],
                     plugins=[Shares()]))
"""


def test_the_gpu_suites_shares_on_an_h100_and_an_h200():
    """On an H100 80 GB the tests of more than 8.9 GiB hold more shares than on an H200 (16.5 GiB a
    share), and none holds more than on an H200 before the shares followed the GPU's memory (the
    backward over many sequences four there, the other ``gpu_memory`` tests two, the timing tests
    all); none is too large for either."""
    files = [f"tests/{name}" for name in sorted({key.split("::")[0] for key in SUITE_SHARES})]
    proc = subprocess.run([sys.executable, "-c", _PRINT_SHARES, str(H100), str(H200), *files],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shares = {}
    for line in proc.stdout.splitlines():
        if line.startswith("shares tests/"):
            test, h100, h200 = line.removeprefix("shares tests/").rsplit(maxsplit=2)
            shares[test] = int(h100), int(h200)
    assert {test: s for test, s in shares.items() if s != (1, 1)} == SUITE_SHARES
    assert len(shares) > 2 * len(SUITE_SHARES)


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
    # a test of k shares: k eighths of the cores, at least its lane's share
    assert lane_threads(16, 8, 4) == 8 and lane_threads(16, 8, 8) == 16 and lane_threads(2, 8, 4) == 1
    assert lane_threads(16, 4, 2) == 4 and lane_threads(16, 16, 4) == 8


def _free(folder) -> int:
    """How many of the shares' and turnstile's lock files in ``folder`` this process can take now."""
    return sum(_takeable(folder / name) for name in [f"gpu_lanes.{i}" for i in range(LANES)] + ["gpu_lanes.turnstile"])


def _held_elsewhere(folder, queue_):
    """In another process: how many lock files are free."""
    queue_.put(_free(folder))


def test_a_lane_lets_go_of_its_shares_when_it_ends_or_raises(tmp_path):
    """One process (as a lane lives on between tests): its shares are held only inside the block,
    whether the block ends or raises."""
    seen = FORK.Queue()
    with lane(tmp_path, 3):
        proc = FORK.Process(target=_held_elsewhere, args=(tmp_path, seen))
        proc.start()
        proc.join(10)
    assert seen.get(timeout=5) == LANES + 1 - 3   # flock: another process sees the three held
    assert _free(tmp_path) == LANES + 1
    with pytest.raises(RuntimeError), lane(tmp_path, LANES):
        raise RuntimeError("the test failed")
    assert _free(tmp_path) == LANES + 1


class _Torch:
    """torch's face to :func:`in_lane`: CPU threads and the CUDA memory calls, recorded."""

    def __init__(self, peak_gib, total_bytes=H200):
        self.threads, self.calls = 16, []
        self.cuda = self
        self.peak, self.total_memory = int(peak_gib * 2**30), total_bytes

    def get_num_threads(self):
        return self.threads

    def set_num_threads(self, n):
        self.threads = n
        self.calls.append(("threads", n))

    def reset_peak_memory_stats(self):
        self.calls.append("reset")

    def max_memory_reserved(self):
        return self.peak

    def empty_cache(self):
        self.calls.append("empty")

    def get_device_properties(self, _):
        return self


def test_a_gpu_test_in_its_lane_holds_its_shares_and_threads_and_is_held_to_its_memory(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    wide = _peak("wide", 58)
    for total, shares, threads in ((H200, 4, 8), (H100, 7, 14)):   # k shares, k eighths of the cores
        torch_ = _Torch(peak_gib=57.9, total_bytes=total)
        with in_lane(wide, tmp_path, 8, torch_):
            assert _free(tmp_path) == LANES - shares + 1 and torch_.threads == threads
        assert torch_.calls == [("threads", threads), "reset", ("threads", 16), "empty"]
        assert _free(tmp_path) == LANES + 1
    assert wide.user_properties == [("gpu_peak_gib", 57.9)] * 2   # within 4 x 16.5 and 7 x 8.9 GiB
    shared, torch_ = _Item("a"), _Torch(peak_gib=18)
    with pytest.raises(pytest.fail.Exception, match=r"t.py::a\[a\] reserved 18.0 GiB .* 1 of 8 lanes' shares"):
        with in_lane(shared, tmp_path, 0, torch_):
            assert _free(tmp_path) == LANES and torch_.threads == 16   # outside pytest-xdist: threads as they were
    assert shared.user_properties == [("gpu_peak_gib", 18.0)] and _free(tmp_path) == LANES + 1


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
