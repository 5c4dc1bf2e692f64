"""GPU leases: N concurrent jobs on N simulated GPUs, never two on one; a crash frees its GPU."""

import multiprocessing as mp
import os
import signal
import time

import pytest

from kernels.core import gpulease


def _hold(lock_dir, n, hold_s, queue, shared=False):
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    with gpulease.lease(n, lock_dir, poll_s=0.02, shared=shared) as gpu:
        start = time.monotonic()
        queue.put((gpu, os.environ["CUDA_VISIBLE_DEVICES"], start))
        time.sleep(hold_s)
        queue.put((gpu, "end", time.monotonic()))


def test_n_jobs_on_n_gpus_never_share(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_hold, args=(tmp_path, 3, 0.4, queue)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    events = [queue.get(timeout=5) for _ in range(12)]
    starts = [(g, t) for g, v, t in events if v != "end"]
    ends = [(g, t) for g, v, t in events if v == "end"]
    assert all(v == str(g) for g, v, _ in events if v != "end")
    assert {g for g, _ in starts} == {0, 1, 2}
    # on each GPU, the holds never overlap
    for gpu in range(3):
        spans = sorted(zip(sorted(t for g, t in starts if g == gpu), sorted(t for g, t in ends if g == gpu)))
        for (_, end1), (start2, _) in zip(spans, spans[1:]):
            assert start2 >= end1


def test_a_crashed_job_frees_its_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    holder = ctx.Process(target=_hold, args=(tmp_path, 1, 60, queue))
    holder.start()
    assert queue.get(timeout=30)[0] == 0
    with pytest.raises(TimeoutError):
        with gpulease.lease(1, tmp_path, poll_s=0.02, timeout_s=0.3):
            pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    with gpulease.lease(1, tmp_path, poll_s=0.02, timeout_s=5) as gpu:
        assert gpu == 0 and os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_scheduler_choice_stands(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with gpulease.lease(8, tmp_path) as gpu:
        assert gpu is None and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    with pytest.raises(ValueError, match="n_gpus"):
        with gpulease.lease(0, tmp_path):
            pass


def test_shared_leases_hold_a_gpu_together_and_an_exclusive_one_waits(tmp_path, monkeypatch):
    """Two compile-ahead jobs (shared) on a one-GPU host hold it at once; a measurement job
    (exclusive) gets it only once both have ended, and a shared lease waits for an exclusive one."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    shared = [ctx.Process(target=_hold, args=(tmp_path, 1, 0.6, queue, True)) for _ in range(2)]
    for p in shared:
        p.start()
    first = [queue.get(timeout=30), queue.get(timeout=30)]
    assert [kind for _, kind, _ in first] == ["0", "0"]  # both hold GPU 0 before either ends
    with gpulease.lease(1, tmp_path, poll_s=0.02, timeout_s=30) as gpu:
        got = time.monotonic()
        ends = [queue.get(timeout=5) for _ in range(2)]
        assert gpu == 0 and all(kind == "end" and t <= got for _, kind, t in ends)
        waiting = ctx.Process(target=_hold, args=(tmp_path, 1, 0.0, queue, True))
        waiting.start()
        time.sleep(1.5)  # long enough for the process to start and try
        assert queue.empty()  # the shared lease waits while the exclusive one is held
        released = time.monotonic()
    assert queue.get(timeout=30)[2] >= released
    for p in (*shared, waiting):
        p.join(30)
        assert p.exitcode == 0


def test_the_wait_for_a_lease_is_written_down(tmp_path, monkeypatch):
    """A job that Snakemake starts while another holds the GPU writes how long it waited and how
    long it then held the GPU (what kernels.paper.render.benchmark_macros counts); a scheduler's GPU: no
    wait."""
    import json

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    holder = ctx.Process(target=_hold, args=(tmp_path / "locks", 1, 0.8, queue))
    holder.start()
    assert queue.get(timeout=30)[0] == 0
    record_file = tmp_path / "bench" / "measure_toy_scale.lease.json"
    with gpulease.lease(1, tmp_path / "locks", poll_s=0.02, timeout_s=30, record_file=record_file):
        pass
    record = json.loads(record_file.read_text())
    holder.join(30)
    assert 0.3 < record["lease_wait_s"] < 10 and 0 <= record["lease_held_s"] < 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # a scheduler's choice: no lease, no wait
    with gpulease.lease(1, tmp_path / "locks", record_file=record_file):
        time.sleep(0.2)
    record = json.loads(record_file.read_text())
    assert record["lease_wait_s"] == 0.0 and 0.2 <= record["lease_held_s"] < 5
    record_file.unlink()
    with pytest.raises(RuntimeError):  # a job that failed writes nothing
        with gpulease.lease(1, tmp_path / "locks", record_file=record_file):
            raise RuntimeError("no such GPU")
    assert not record_file.exists()
