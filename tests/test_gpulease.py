"""GPU leases: N concurrent jobs on N simulated GPUs, never two on one; a crash frees its GPU; the
lease record names the GPU (nvidia-smi's index and UUID) and how long the job held it.

The GPUs are faked by an ``nvidia-smi`` on ``PATH`` (:func:`fake_nvidia_smi`) and by lock files in a
temporary folder, so these tests run alike on a host with no GPU, one or eight."""

import json
import multiprocessing as mp
import os
import signal
import time
from datetime import datetime, timedelta

import pytest

from kernels.core import gpulease


def fake_nvidia_smi(folder, n, name="NVIDIA H100 80GB HBM3"):
    """Write an ``nvidia-smi`` into ``folder`` that lists ``n`` GPUs called ``name`` (for
    ``--query-gpu=name``) with made-up UUIDs (``--query-gpu=uuid``), and fails otherwise; returns
    (a ``PATH`` with it first, the UUIDs in its index order)."""
    uuids = [f"GPU-{i:08x}-1111-2222-3333-444444444444" for i in range(n)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nvidia-smi").write_text(
        "#!/bin/sh\ncase \"$*\" in\n"
        f"  *--query-gpu=uuid*) printf '%s\\n' {' '.join(uuids)} ;;\n"
        f"  *--query-gpu=name*) printf '%s\\n' {' '.join([repr(name)] * n)} ;;\n"
        "  *) exit 9 ;;\nesac\n")
    (folder / "nvidia-smi").chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}", uuids


def spans(records):
    """(start, end) of each lease record's hold, in seconds of wall time, by its GPU."""
    out = {}
    for r in records:
        start = datetime.fromisoformat(r["leased_at"])
        out.setdefault(r["cuda_visible_devices"], []).append(
            (start, start + timedelta(seconds=r["lease_held_s"])))
    return {gpu: sorted(s) for gpu, s in out.items()}


def peak(intervals):
    """The most of ``intervals`` ((start, end) pairs) that overlap at one time (one that ends
    when another starts does not overlap it)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = top = 0
    for _, step in events:
        running += step
        top = max(top, running)
    return top


def _hold(lock_dir, n, hold_s, queue, shared=False, record_file=None, barrier=None, visible=None):
    """A job: asks for a lease (once every job of ``barrier`` has started) with ``CUDA_VISIBLE_DEVICES``
    as ``visible`` (None: unset, not the parent's, which may be inside a lease), puts (GPU,
    ``CUDA_VISIBLE_DEVICES``, time) on ``queue`` once it holds it, then (GPU, "end", time) after
    ``hold_s`` seconds."""
    if visible is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    if barrier is not None:  # all the jobs ask at once
        barrier.wait(120)
    with gpulease.lease(n, lock_dir, poll_s=0.02, shared=shared, record_file=record_file) as gpu:
        start = time.monotonic()
        queue.put((gpu, os.environ["CUDA_VISIBLE_DEVICES"], start))
        time.sleep(hold_s)
        queue.put((gpu, "end", time.monotonic()))


@pytest.mark.parametrize("n", [2, 8])
def test_n_jobs_on_n_gpus_never_share(tmp_path, monkeypatch, n):
    """2N jobs ask at once on a host of N GPUs: N get a GPU each (``CUDA_VISIBLE_DEVICES`` set to
    that one), the other N wait until one ends, and no GPU is ever held by two; the lease records
    alone show it (GPU, UUID, when and how long), as a reader of ``*.lease.json`` would see it."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path, uuids = fake_nvidia_smi(tmp_path / "bin", n)
    monkeypatch.setenv("PATH", path)
    ctx = mp.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(2 * n + 1)
    records = [tmp_path / "bench" / f"measure_s{j}_impl.lease.json" for j in range(2 * n)]
    procs = [ctx.Process(target=_hold, args=(tmp_path / "locks", n, 1.0, queue, False, rec, barrier))
             for rec in records]
    for p in procs:
        p.start()
    barrier.wait(120)
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    events = [queue.get(timeout=5) for _ in range(4 * n)]
    # inside the lease, the job sees exactly the GPU it was given
    assert all(v == g for g, v, _ in events if v != "end")
    starts = sorted(t for _, v, t in events if v != "end")
    first_end = min(t for _, v, t in events if v == "end")
    assert sum(t < first_end for t in starts) == n  # N hold at once, the rest waited for one to end
    got = [json.loads(r.read_text()) for r in records]
    assert {r["cuda_visible_devices"] for r in got} == {str(i) for i in range(n)}
    assert all(r["gpu_uuid"] == uuids[int(r["cuda_visible_devices"])] for r in got)
    assert sorted(r["lease_wait_s"] > 0.5 for r in got) == [False] * n + [True] * n
    by_gpu = spans(got)
    tolerance = timedelta(milliseconds=2)  # leased_at is to the millisecond
    for held in by_gpu.values():
        for (_, end1), (start2, _) in zip(held, held[1:]):
            assert start2 >= end1 - tolerance
    assert peak([(s + tolerance, e) for held in by_gpu.values() for s, e in held]) == n


def test_a_crashed_job_frees_its_gpu(tmp_path, monkeypatch):
    """Two GPUs, both held: a third job waits (here until its timeout); once the holder of GPU 1 is
    killed, the next job gets GPU 1, not the one still held."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    holders = []
    for expected in ("0", "1"):
        holders.append(ctx.Process(target=_hold, args=(tmp_path, 2, 60, queue)))
        holders[-1].start()
        assert queue.get(timeout=30)[0] == expected
    with pytest.raises(TimeoutError):
        with gpulease.lease(2, tmp_path, poll_s=0.02, timeout_s=0.3):
            pass
    os.kill(holders[1].pid, signal.SIGKILL)
    holders[1].join(10)
    with gpulease.lease(2, tmp_path, poll_s=0.02, timeout_s=5) as gpu:
        assert gpu == "1" and os.environ["CUDA_VISIBLE_DEVICES"] == "1"
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # CUDA's index 1 is nvidia-smi's
    assert "CUDA_VISIBLE_DEVICES" not in os.environ and "CUDA_DEVICE_ORDER" not in os.environ
    os.kill(holders[0].pid, signal.SIGKILL)
    holders[0].join(10)


def test_scheduler_choice_stands(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with gpulease.lease(8, tmp_path) as gpu:
        assert gpu is None and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    with pytest.raises(ValueError, match="n_gpus"):
        with gpulease.lease(0, tmp_path):
            pass


def test_a_listed_set_of_gpus_is_leased_among(tmp_path, monkeypatch):
    """``CUDA_VISIBLE_DEVICES=5,7`` on a host of eight (the others kept for someone else): the
    leases pick among GPUs 5 and 7 only, each job sees one of them, and the list is back after."""
    path, uuids = fake_nvidia_smi(tmp_path / "bin", 8)
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert gpulease.devices(8) == ["5", "7"] and gpulease.devices(1) == ["5"]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    holder = ctx.Process(target=_hold, args=(tmp_path / "locks", 8, 60, queue), kwargs={"visible": "5,7"})
    holder.start()
    assert queue.get(timeout=30)[:2] == ("5", "5")
    record_file = tmp_path / "measure_toy_scale.lease.json"
    with gpulease.lease(8, tmp_path / "locks", poll_s=0.02, timeout_s=5, record_file=record_file) as gpu:
        assert gpu == "7" and os.environ["CUDA_VISIBLE_DEVICES"] == "7"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5,7"
    record = json.loads(record_file.read_text())
    assert record["cuda_visible_devices"] == "7" and record["gpu_uuid"] == uuids[7]
    with pytest.raises(TimeoutError):  # GPU 5 held, GPU 7 not among the first one
        with gpulease.lease(1, tmp_path / "locks", poll_s=0.02, timeout_s=0.3):
            pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)


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
        assert gpu == "0" and all(kind == "end" and t <= got for _, kind, t in ends)
        waiting = ctx.Process(target=_hold, args=(tmp_path, 1, 0.0, queue, True))
        waiting.start()
        time.sleep(1.5)  # long enough for the process to start and try
        assert queue.empty()  # the shared lease waits while the exclusive one is held
        released = time.monotonic()
    assert queue.get(timeout=30)[2] >= released
    for p in (*shared, waiting):
        p.join(30)
        assert p.exitcode == 0


def test_shared_leases_take_a_gpu_no_measurement_holds(tmp_path, monkeypatch):
    """Two GPUs, a measurement job on GPU 0: the compile-ahead jobs (shared) both take GPU 1,
    together, and a second measurement job then waits for GPU 0 rather than join them."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    measuring = ctx.Process(target=_hold, args=(tmp_path, 2, 60, queue))
    measuring.start()
    assert queue.get(timeout=30)[0] == "0"
    ahead = [ctx.Process(target=_hold, args=(tmp_path, 2, 60, queue, True)) for _ in range(2)]
    for p in ahead:
        p.start()
    assert [queue.get(timeout=30)[0] for _ in ahead] == ["1", "1"]
    with pytest.raises(TimeoutError):
        with gpulease.lease(2, tmp_path, poll_s=0.02, timeout_s=0.3):
            pass
    for p in (measuring, *ahead):
        os.kill(p.pid, signal.SIGKILL)
        p.join(10)


def test_the_wait_for_a_lease_is_written_down(tmp_path, monkeypatch):
    """A job that Snakemake starts while another holds the GPU writes how long it waited, when it
    got the GPU and how long it then held it (what kernels.paper.render.benchmark_macros counts),
    and which GPU it was (nvidia-smi's index and UUID); a scheduler's GPU: no wait, its value, no
    UUID; without nvidia-smi, no UUID."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path, uuids = fake_nvidia_smi(tmp_path / "bin", 1)
    monkeypatch.setenv("PATH", path)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    holder = ctx.Process(target=_hold, args=(tmp_path / "locks", 1, 0.8, queue))
    holder.start()
    assert queue.get(timeout=30)[0] == "0"
    record_file = tmp_path / "bench" / "measure_toy_scale.lease.json"
    asked = datetime.now().astimezone()
    with gpulease.lease(1, tmp_path / "locks", poll_s=0.02, timeout_s=30, record_file=record_file):
        pass
    record = json.loads(record_file.read_text())
    holder.join(30)
    assert 0.3 < record["lease_wait_s"] < 10 and 0 <= record["lease_held_s"] < 1
    assert record["cuda_visible_devices"] == "0" and record["gpu_uuid"] == uuids[0]
    leased_at = datetime.fromisoformat(record["leased_at"])
    assert abs((leased_at - asked).total_seconds() - record["lease_wait_s"]) < 0.5  # UTC, after the wait
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # a scheduler's choice: no lease, no wait
    with gpulease.lease(1, tmp_path / "locks", record_file=record_file):
        time.sleep(0.2)
    record = json.loads(record_file.read_text())
    assert record["lease_wait_s"] == 0.0 and 0.2 <= record["lease_held_s"] < 5
    assert record["cuda_visible_devices"] == "0" and record["gpu_uuid"] is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi
    with gpulease.lease(1, tmp_path / "locks", record_file=record_file):
        pass
    assert json.loads(record_file.read_text())["gpu_uuid"] is None
    record_file.unlink()
    with pytest.raises(RuntimeError):  # a job that failed writes nothing
        with gpulease.lease(1, tmp_path / "locks", record_file=record_file):
            raise RuntimeError("no such GPU")
    assert not record_file.exists()
