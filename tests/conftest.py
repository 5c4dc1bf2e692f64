"""Test setup: Triton in the interpreter when there is no CUDA GPU, the `gpu` marker for tests
that need one (skipped on CPU machines), and the GPU tests' lanes (:mod:`gpu_lanes`): each GPU test
within its lane's share of the GPU's memory unless marked `gpu_memory(gib=X)` (the shares that hold
its peak of X GiB on this GPU; skipped when all of them do not) or `gpu_timing` (alone), which run
last (those marked `gpu_long` first; a lane holds one test and one queued); each lane (pytest-xdist
worker) with its share of the CPU's cores; a failed GPU test's traceback let go so that the memory
it held is freed."""

import math
import os
import sys
from pathlib import Path

import pytest
import torch
import yaml
from gpu_lanes import LANES, SCHEDULE_CHUNK, in_lane, lane_order, lane_threads, too_large

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before any test module imports triton
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 0))  # in one of pytest-xdist's lanes: how many
if WORKERS:  # its share of the cores
    torch.set_num_threads(lane_threads(os.cpu_count() or 1, WORKERS))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (run on the H200 with `pytest -m gpu`, in lanes `-n 8`)")
    config.addinivalue_line("markers", f"gpu_memory(gib=X): reserves X GiB of GPU memory at its peak: holds as many of "
                                       f"the GPU's {LANES} lanes' shares as that needs in `pytest -m gpu -n 8`, "
                                       "skipped where all of them are less (tests/gpu_lanes.py)")
    config.addinivalue_line("markers", "gpu_timing: asserts on measured times, which other lanes' kernels would "
                                       "disturb: runs alone")
    config.addinivalue_line("markers", "gpu_long: a GPU test that takes minutes in a lane: "
                                       "starts first in `pytest -m gpu -n 8`")
    config.addinivalue_line("markers", "slow: runs the Snakemake DAG (minutes)")
    config.addinivalue_line("markers", "slurm: submits jobs to a SLURM cluster (as root: .ci/slurm-up); "
                                       "skipped without one")
    if HAS_CUDA and getattr(config.option, "maxschedchunk", "absent") is None:  # pytest-xdist's, not given
        config.option.maxschedchunk = SCHEDULE_CHUNK


@pytest.hookimpl(trylast=True)  # after `-m gpu` deselects, or a long test's partner may be a test that does not run
def pytest_collection_modifyitems(config, items):
    # the GPU's memory (bytes); unbounded on a host without one, whose order holds each test in one share
    total = torch.cuda.get_device_properties(0).total_memory if HAS_CUDA else math.inf
    items[:] = lane_order(items, total)  # on every host, so that a CPU host can check the order (test_gpu_lanes.py)
    if HAS_CUDA:
        for item in items:
            reason = too_large(item, total)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed GPU test's traceback is let go once its failure is reported (the report holds it
    formatted): pytest's post-mortem references to it (``sys.last_traceback`` and the like) are
    dropped, so that its lane's teardown (``gc.collect``) frees the GPU memory that its frames held
    before the lane lets the others in. One failed test so kept 133 GiB of an H200, failing the next
    test of every other lane out of memory. ``--pdb`` still gets the traceback (from ``call``)."""
    report = yield
    if HAS_CUDA and call.excinfo is not None and "gpu" in item.keywords:
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
    return report


@pytest.fixture(autouse=True)
def _gpu_lane(request, tmp_path_factory):
    """A GPU test in its lane (:func:`gpu_lanes.in_lane`): holding its shares of the GPU and of the cores,
    failing when it reserved more than its shares of the GPU's memory, which it returns after."""
    if not HAS_CUDA or "gpu" not in request.keywords:
        yield
        return
    with in_lane(request.node, tmp_path_factory.getbasetemp().parent, WORKERS, torch):  # the parent: the run's
        yield


@pytest.fixture
def device():
    return torch.device("cuda" if HAS_CUDA else "cpu")


def configured_timing(**overrides) -> dict:
    """The ``timing`` block of config/config.yaml, with ``overrides`` (short warm-ups for tests)."""
    config = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "config.yaml").read_text())
    return {**config["timing"], **overrides}
