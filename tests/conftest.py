"""Test setup: Triton in the interpreter when there is no CUDA GPU, the `gpu` marker for tests
that need one (skipped on CPU machines), and the GPU tests' lanes (:mod:`gpu_lanes`): each GPU test
within its lane's share of the GPU's memory unless marked `gpu_memory` or `gpu_timing`, which run
alone and last (those marked `gpu_long` first; a lane holds one test and one queued); each lane
(pytest-xdist worker) with its share of the CPU's cores; a failed GPU test's traceback let go so
that the memory it held is freed."""

import gc
import os
import sys
from pathlib import Path

import pytest
import torch
import yaml
from gpu_lanes import SCHEDULE_CHUNK, lane, lane_order, lane_threads, over_budget, runs_alone

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before any test module imports triton
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:  # one of pytest-xdist's lanes: its share of the cores
    torch.set_num_threads(lane_threads(os.cpu_count() or 1, int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (run on the H200 with `pytest -m gpu`)")
    config.addinivalue_line("markers", "gpu_memory: needs most of the GPU's memory: runs alone, the other lanes "
                                       "of `pytest -m gpu -n 8` waiting (tests/gpu_lanes.py)")
    config.addinivalue_line("markers", "gpu_timing: asserts on measured times, which other lanes' kernels would "
                                       "disturb: runs alone, like gpu_memory")
    config.addinivalue_line("markers", "gpu_long: a shared GPU test that takes minutes in a lane: "
                                       "starts first in `pytest -m gpu -n 8`")
    config.addinivalue_line("markers", "slow: runs the Snakemake DAG (minutes)")
    config.addinivalue_line("markers", "slurm: submits jobs to a SLURM cluster (as root: .ci/slurm-up); "
                                       "skipped without one")
    if HAS_CUDA and getattr(config.option, "maxschedchunk", "absent") is None:  # pytest-xdist's, not given
        config.option.maxschedchunk = SCHEDULE_CHUNK


@pytest.hookimpl(trylast=True)  # after `-m gpu` deselects, or a long test's partner may be a test that does not run
def pytest_collection_modifyitems(config, items):
    items[:] = lane_order(items)  # on every host, so that a CPU host can check the order (tests/test_gpu_lanes.py)
    if HAS_CUDA:
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
    """A GPU test in its lane: alone when marked ``gpu_memory`` or ``gpu_timing``; otherwise beside the other lanes,
    failing when it reserved more than one lane's share of the GPU's memory. The memory it cached
    is returned to the GPU after it."""
    if not HAS_CUDA or "gpu" not in request.keywords:
        yield
        return
    exclusive = runs_alone(request.keywords)
    with lane(tmp_path_factory.getbasetemp().parent, exclusive):  # the parent: shared by the lanes of a run
        torch.cuda.reset_peak_memory_stats()
        yield
        peak = torch.cuda.max_memory_reserved()
        gc.collect()
        torch.cuda.empty_cache()
    message = None if exclusive else over_budget(request.node.nodeid, peak,
                                                  torch.cuda.get_device_properties(0).total_memory)
    if message:
        pytest.fail(message)


@pytest.fixture
def device():
    return torch.device("cuda" if HAS_CUDA else "cpu")


def configured_timing(**overrides) -> dict:
    """The ``timing`` block of config/config.yaml, with ``overrides`` (short warm-ups for tests)."""
    config = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "config.yaml").read_text())
    return {**config["timing"], **overrides}
