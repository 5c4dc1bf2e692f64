"""The measurement harness: statuses, timing rows, atomic files, environment."""

import contextlib
import json
import os
import shutil
import statistics
import time

import pytest
import torch
from conftest import configured_timing

from kernels.core import ahead, children, correctness, files, harness, jobs, profiling
from kernels.core import env as env_mod
from kernels.core import timing as timing_mod


class FakeStudy:
    """A study module stand-in whose prepare does what each case asks."""

    STUDY = "fake"
    SHAPE_FIELDS = ("n",)

    @staticmethod
    def prepare(impl, case, device):
        x = torch.arange(case["n"], dtype=torch.float32, device=device)
        if impl == "ok":
            out = x * 2
            err = correctness.check_close("out", out, x.double() * 2, 1e-6)
            return harness.Prepared(fn=lambda: x * 2, bytes=8 * case["n"], flops=case["n"],
                                    extra={"rel_err": err})
        if impl == "wrong":
            correctness.check_close("out", x * 3, x.double() * 2, 1e-3)
        if impl == "nan":
            correctness.check_close("out", x * float("nan"), x.double(), 1e-3)
        if impl == "unsupported":
            raise harness.Unsupported("not on this device")
        if impl == "missing":
            import not_a_real_package  # noqa: F401
        if impl == "oom":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 TiB")
        raise RuntimeError("boom")


TIMING = configured_timing(warmup_ms=1, warmup_max_ms=50, rep_ms=5, min_reps=3, max_reps=50, cpu_reps=3)


@pytest.mark.parametrize("impl,status", [("ok", "ok"), ("wrong", "wrong"), ("nan", "wrong"),
                                         ("unsupported", "unsupported"), ("missing", "unsupported"),
                                         ("oom", "oom"), ("boom", "error")])
def test_measure_case_status(impl, status, device):
    row = harness.measure_case(FakeStudy, impl, {"pass": "fwd", "dtype": "float32", "n": 64},
                               device, TIMING)
    assert row["status"] == status
    assert row["study"] == "fake" and row["impl"] == impl and row["n"] == 64
    if status == "ok":
        assert len(row["times_ms"]) >= 3 and row["median_ms"] > 0
        assert len(row["device_times_ms"]) == len(row["times_ms"]) and row["device_ms"] > 0
        assert row["timing"]["method"] in ("cpu-wallclock", "cuda-events+spin")
        assert row["bytes"] == 512 and row["rel_err"] == 0.0 and row["error"] is None
    else:
        assert row["times_ms"] == [] and row["median_ms"] is None
        assert row["device_times_ms"] == [] and row["device_ms"] is None
        assert row["error"]


def test_case_warmup_replaces_the_configured_one(monkeypatch, device):
    seen = []
    monkeypatch.setattr(harness, "time_call", lambda prepared, dev, timing: seen.append(timing) or timing_mod.Timed([1.0], [1.0], {}))
    case = {"pass": "fwd", "dtype": "float32", "n": 64}
    harness.measure_case(FakeStudy, "ok", case, device, TIMING)
    row = harness.measure_case(FakeStudy, "ok", {**case, "warmup_ms": 1000}, device, TIMING)
    assert [t["warmup_ms"] for t in seen] == [1, 1000] and row["warmup_ms"] == 1000
    assert TIMING["warmup_ms"] == 1  # the shared config is not modified


def test_relative_rmse():
    ref = torch.ones(100, dtype=torch.float64)
    assert correctness.relative_rmse(ref, ref) == 0.0
    assert correctness.relative_rmse(ref * 1.01, ref) == pytest.approx(0.01)
    assert correctness.relative_rmse(torch.full((100,), float("inf")), ref) == float("inf")
    with pytest.raises(correctness.Mismatch, match="shape"):
        correctness.relative_rmse(torch.ones(3), torch.ones(4))
    with pytest.raises(correctness.Mismatch, match="o_final: RMSE/RMS"):
        correctness.check_close("o_final", ref * 2, ref, 0.01)
    zero = torch.zeros(100, dtype=torch.float64)
    assert correctness.relative_rmse(zero + 1e-3, zero) == pytest.approx(1e-3)       # RMS 0: the RMSE itself
    assert correctness.relative_rmse(zero + 1e-3, zero + 1e-9, floor=1e-6) == pytest.approx(1e3)  # noise floor
    assert correctness.relative_rmse(ref * 1.01, ref, floor=1e-6) == pytest.approx(0.01)  # above the floor
    assert correctness.relative_rmse(torch.ones(0, 3), torch.ones(0, 3)) == 0.0


def test_check_all_names_every_failed_check_and_returns_every_error():
    ref = torch.ones(100, dtype=torch.float64)
    checks = [("a", ref * 1.001, ref, 0.01), ("b", ref * 1.1, ref, 0.01), ("c", ref * 3, ref, 0.5)]
    assert correctness.check_all(checks[:1]) == [pytest.approx(0.001)]
    with pytest.raises(correctness.Mismatch) as err:
        correctness.check_all(checks)
    assert str(err.value) == "b: RMSE/RMS 0.1 above tolerance 0.01; c: RMSE/RMS 2 above tolerance 0.5"
    with pytest.raises(correctness.Mismatch, match="^a: RMSE/RMS 1e\\+03 above tolerance 1$"):
        correctness.check_all([("a", ref * 1e-3, ref * 1e-9, 1.0)], floor=1e-6)


def test_write_jsonl_is_atomic(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTIFACT_TMPDIR", str(tmp_path / "tmp"))
    target = tmp_path / "data" / "x.jsonl"
    files.write_jsonl(target, [{"a": 1}, {"b": 2}])
    assert [json.loads(line) for line in target.read_text().splitlines()] == [{"a": 1}, {"b": 2}]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask

    class Boom:  # not JSON serialisable: the write fails half way
        pass

    with pytest.raises(TypeError):
        files.write_jsonl(target, [{"a": 3}, {"b": Boom()}])
    assert [json.loads(line) for line in target.read_text().splitlines()] == [{"a": 1}, {"b": 2}]
    assert os.listdir(tmp_path / "tmp") == []
    assert sorted(os.listdir(target.parent)) == ["x.jsonl"]


def test_environment_block():
    env = env_mod.environment()
    for key in ("gpu_name", "torch", "triton", "python", "git_commit", "cuda", "driver", "host_cpu_model",
                "host_cpus", "host_load_1min"):
        assert key in env
    assert env["torch"] == torch.__version__
    assert env["host_cpus"] == os.cpu_count() and env["host_load_1min"] >= 0


def test_gpu_slug():
    assert env_mod.gpu_slug("NVIDIA H200") == "h200"
    assert env_mod.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert env_mod.gpu_slug("cpu") == "cpu"


@contextlib.contextmanager
def fixture_study(name: str, source: str):
    """A study package ``kernels.<name>`` whose ``study.py`` is ``source``, for child processes
    (which import the study by name), removed afterwards."""
    import kernels

    study_dir = os.path.join(os.path.dirname(kernels.__file__), name)
    os.makedirs(study_dir)
    try:
        open(os.path.join(study_dir, "__init__.py"), "w").close()
        with open(os.path.join(study_dir, "study.py"), "w") as f:
            f.write(source)
        yield name
    finally:
        shutil.rmtree(study_dir)


def test_a_child_past_its_time_limit_is_killed_and_says_so():
    source = "import time\nSTUDY = 'slow'\nSHAPE_FIELDS = ()\ndef prepare(impl, case, device):\n    time.sleep(60)\n"
    with fixture_study("_slow_fixture", source) as study:
        t0 = time.perf_counter()
        answer, crash = children.in_child({"study": study, "impl": "x", "case": {"pass": "fwd"},
                                           "prepare_only": True}, timeout=8)
    assert answer is None and crash == "child process killed after its 8 s limit"
    assert time.perf_counter() - t0 < 30


def test_child_process_isolation_records_a_crash():
    """A case whose process dies becomes an error row instead of ending the sweep."""
    source = "import os\nSTUDY = 'crash'\nSHAPE_FIELDS = ()\ndef prepare(impl, case, device):\n    os._exit(9)\n"
    with fixture_study("_crash_fixture", source) as study:
        row = children.measure_in_child(study, "x", {"pass": "fwd", "dtype": "float32"}, TIMING)
    assert row["status"] == "error" and "exited with 9" in row["error"]
    assert row["study"] == "crash" and row["times_ms"] == []


@pytest.mark.parametrize("impl,status", [("ok", "ok"), ("wrong", "wrong"), ("unsupported", "unsupported"),
                                         ("oom", "oom"), ("boom", "error")])
def test_prepare_case_checks_without_timing(impl, status, device):
    answer = harness.prepare_case(FakeStudy, impl, {"pass": "fwd", "dtype": "float32", "n": 64}, device)
    assert answer["status"] == status and answer["setup_s"] >= 0
    assert (answer["error"] is None) == (status == "ok")


def test_compile_ahead_prepares_each_case_in_its_own_process(tmp_path):
    """Every case of every job is prepared once, in a child process of one queue (here each
    leaves a file, as a compiler fills its on-disk cache), backward passes first; a failing or
    crashing case is an answer, not the end of the pass (also when it printed a line that looks like
    one before it died); the answers come back per job in
    case order, with the cold one-off seconds that the child's prepare reported."""
    source = ("import os\nimport time\nfrom kernels.core.harness import Prepared, Unsupported\n"
              "STUDY = 'ahead'\nSHAPE_FIELDS = ('n',)\n"
              "def prepare(impl, case, device):\n"
              f"    open(os.path.join({str(tmp_path)!r}, f\"{{impl}}{{case['n']}}-{{time.time_ns()}}-{{os.getpid()}}\"),"
              " 'w').write(os.environ.get('FLA_CACHE_RESULTS', ''))\n"
              "    if case['n'] == 2:\n        raise Unsupported('not here')\n"
              "    if case['n'] == 3:\n        print(\"{'a log line': 1}\\n{\\\"another\\\": 2}\", flush=True)\n        os._exit(7)\n"
              "    return Prepared(fn=None, bytes=0, flops=0, extra={'compile_s': 1.5, 'recompiles': 1, "
              "'rel_err': 0.0})\n")
    cases = [{"pass": "fwd", "dtype": "float32", "n": n} for n in (1, 2, 3, 4)]
    bwd = [{"pass": "bwd", "dtype": "float32", "n": 5}]
    with fixture_study("_ahead_fixture", source) as study:
        answers = ahead.compile_ahead([(study, "x", cases), (study, "y", bwd)], workers=1)
    assert [[a["status"] for a in job] for job in answers] == [["ok", "unsupported", "error", "ok"], ["ok"]]
    first = answers[0]
    assert "exited with 7" in first[2]["error"] and first[1]["error"] == "Unsupported: not here"
    assert all(a["workers"] == 1 for job in answers for a in job) and first[0]["setup_s"] >= 0
    assert first[0]["compile_s"] == 1.5 and first[0]["recompiles"] == 1 and "rel_err" not in first[0]
    made = sorted(p.name.split("-") for p in tmp_path.iterdir())
    assert [n for n, _, _ in sorted(made, key=lambda m: int(m[1]))] == ["y5", "x1", "x2", "x3", "x4"]
    assert len({pid for *_, pid in made}) == 5 and str(os.getpid()) not in {pid for *_, pid in made}
    assert {p.read_text() for p in tmp_path.iterdir()} == {"0"}  # FLA keeps no autotuning picks there


def test_compile_ahead_leaves_a_training_step_to_its_forward_and_backward(tmp_path):
    """A fwdbwd case whose fwd and bwd cases of the same shape are queued too compiles nothing of
    its own: it is not prepared, and its answer carries theirs (the worse status) with covered_by;
    a fwdbwd case without both is prepared as any other."""
    fwd, bwd, step = ({"pass": p, "dtype": "float32", "n": 6, "roles": [r]} for p, r in
                      (("fwd", "main"), ("bwd", "backward"), ("fwdbwd", "backward")))
    alone = {"pass": "fwdbwd", "dtype": "float32", "n": 7}
    assert ahead.covered([fwd, alone, bwd, step, {**bwd, "n": 7}]) == {3: (0, 2)}
    source = ("import os\nfrom kernels.core.harness import Prepared, Unsupported\nSTUDY = 'ahead'\nSHAPE_FIELDS = ('n',)\n"
              "def prepare(impl, case, device):\n"
              f"    open(os.path.join({str(tmp_path)!r}, case['pass'] + str(case['n'])), 'w').close()\n"
              "    if case['pass'] == 'bwd':\n        raise Unsupported('no backward')\n"
              "    return Prepared(fn=None, bytes=0, flops=0)\n")
    with fixture_study("_covered_fixture", source) as study:
        [answers] = ahead.compile_ahead([(study, "x", [fwd, bwd, step, alone])], workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bwd6", "fwd6", "fwdbwd7"]
    assert [a["status"] for a in answers] == ["ok", "unsupported", "unsupported", "ok"]
    assert answers[2] == {"status": "unsupported", "error": "Unsupported: no backward", "setup_s": None,
                          "workers": 2, "covered_by": ["fwd", "bwd"]}
    assert "covered_by" not in answers[3]


def test_compile_ahead_queues_backward_cases_first_and_the_implementations_in_turn():
    """With fewer workers than backward cases, every implementation's first backward case is among
    the first to start (one implementation's long compile never waits behind another's)."""
    def case(p, n):
        return {"pass": p, "dtype": "float32", "n": n}
    chunk = [case("fwd", 1), case("bwd", 1), case("bwd", 2), case("bwd", 3), case("fwdbwd", 1)]
    qla = [case("fwd", 1), case("bwd", 1), case("fwdbwd", 1)]
    order = ahead._queue_order([chunk, qla], [{4: (0, 1)}, {}])
    assert order == [(0, 1), (1, 1), (0, 2), (0, 3), (1, 2), (0, 0), (1, 0)]


def test_shared_compile_ahead_leaves_out_checkpointed_cases_and_the_jobs_read_its_answers(tmp_path, monkeypatch):
    """The run's compile-ahead job prepares what the measurement jobs still have to measure
    (not the cases their checkpoints hold), writes the answers by case key, and run_job puts
    each answer in its case's row, preparing ahead itself only the case the file has no answer for."""
    monkeypatch.setattr(jobs, "environment", _fake_env("abc"))
    monkeypatch.setenv("ARTIFACT_GIT_COMMIT", "abc")  # the commit of compile_ahead_job's keys (env.git_commit)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the children still run on the CPU
    queued = []
    monkeypatch.setattr(jobs, "compile_ahead", lambda jobs, workers: [
        [queued.append(case["seqlen"]) or {"status": "ok", "error": None, "setup_s": 1.0, "workers": workers}
         for case in cases] for _, _, cases in jobs])
    timing, ckpt, ahead = {"rep_ms": 100}, tmp_path / "ckpt.jsonl", tmp_path / "ahead.json"
    key16 = jobs.case_key("gdn", "chunk", jobs.importlib.import_module("kernels.gdn.study").cases(
        GDN_SWEEP, "chunk")[0], timing, "abc")
    ckpt.write_text(json.dumps({"key": key16, "row": {"seqlen": 16, "status": "ok"}}) + "\n")
    written = jobs.compile_ahead_job([{"study": "gdn", "impl": "chunk", "sweep": GDN_SWEEP,
                                          "checkpoint": str(ckpt)}], timing, ahead, workers=3)
    assert queued == [32, 48, 64, 80] and json.loads(ahead.read_text()) == written
    assert len(written["gdn/chunk"]) == 4 and key16 not in written["gdn/chunk"]
    key80 = jobs.case_key("gdn", "chunk", jobs.importlib.import_module("kernels.gdn.study").cases(
        GDN_SWEEP, "chunk")[-1], timing, "abc")
    ahead.write_text(json.dumps({"gdn/chunk": {k: {**a, "workers": 16} for k, a in written["gdn/chunk"].items()
                                               if k != key80}}))
    monkeypatch.setattr(jobs, "measure_case", _fake_measure([]))  # on a "GPU" still: run_job may prepare
    rows = jobs.run_job("gdn", "chunk", GDN_SWEEP, tmp_path / "out.jsonl", timing, checkpoint=ckpt,
                           ahead_workers=3, ahead=ahead)
    assert [r["seqlen"] for r in rows] == [16, 32, 48, 64, 80]
    assert [r.get("compile_ahead", {}).get("workers") for r in rows] == [None, 16, 16, 16, 3]
    assert queued == [32, 48, 64, 80, 80]  # only the case without an answer, prepared by the job itself


def test_shared_compile_ahead_without_cuda_prepares_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(jobs, "compile_ahead", lambda *a: pytest.fail("compiled ahead on the CPU"))
    out = tmp_path / "ahead.json"
    assert jobs.compile_ahead_job([{"study": "gdn", "impl": "chunk", "sweep": GDN_SWEEP}], {}, out, 2) == {}
    assert json.loads(out.read_text()) == {}


def test_compile_only_benchmarker_runs_once_in_the_autotuners_shape():
    calls = []
    assert children._run_once(lambda: calls.append(1), quantiles=(0.5, 0.2, 0.8)) == [0.0, 0.0, 0.0]
    assert children._run_once(lambda: calls.append(1)) == 0.0 and calls == [1, 1]


@pytest.mark.gpu
@pytest.mark.gpu_timing
def test_cuda_timing_bounds_repetitions():
    x = torch.randn(1 << 20, device="cuda")
    fast = timing_mod.time_cuda(lambda: x.mul(2), TIMING | {"rep_ms": 100, "min_reps": 5, "max_reps": 40})
    assert len(fast.device_ms) == len(fast.latency_ms) == 40 and all(t > 0 for t in fast.device_ms)
    slow = timing_mod.time_cuda(lambda: torch.cuda._sleep(20_000_000), TIMING | {"rep_ms": 1, "min_reps": 5})
    assert len(slow.device_ms) == 5


@pytest.mark.gpu
@pytest.mark.gpu_timing
def test_device_time_hides_the_hosts_launch_and_latency_keeps_it():
    """A call that spends 300 us on the host before a ~10 us kernel: the device time is the kernel's,
    the latency includes the host's 300 us, and no repetition's spin was short."""
    x = torch.randn(1 << 22, device="cuda")

    def slow_host_call():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 300e-6:
            pass
        return x.mul(2)

    plain = timing_mod.time_cuda(lambda: x.mul(2), TIMING | {"warmup_ms": 20, "warmup_max_ms": 500})
    slowed = timing_mod.time_cuda(slow_host_call, TIMING | {"warmup_ms": 20, "warmup_max_ms": 500})
    kernel = statistics.median(plain.device_ms)
    assert statistics.median(slowed.device_ms) < kernel * 1.2 + 0.003
    assert statistics.median(slowed.latency_ms) > 0.3
    assert slowed.info["spin_short"] == 0 and slowed.info["spin_us"] > 300
    assert slowed.info["enqueue_us"] >= 300


@pytest.mark.gpu
@pytest.mark.gpu_timing
def test_graph_replay_is_timed_cold_and_matches_the_launch():
    x = torch.randn(1 << 24, device="cuda")
    launched = timing_mod.time_cuda(lambda: x.mul(2), TIMING | {"warmup_ms": 20, "warmup_max_ms": 500})
    replayed = timing_mod.time_cuda(lambda: x.mul(2), TIMING | {"warmup_ms": 20, "warmup_max_ms": 500}, cuda_graph=True)
    assert replayed.info["method"] == "cuda-graph+spin"
    ratio = statistics.median(replayed.device_ms) / statistics.median(launched.device_ms)
    assert 0.9 < ratio < 1.1  # 64 MiB in, 64 MiB out: beyond the L2 either way


def test_enqueue_sampling_stops_after_its_budget(monkeypatch):
    """Five enqueue samples of a short call, fewer of a long one: sampling stops once
    ENQUEUE_BUDGET_MS have passed, after one sample at least (no GPU: the timer's torch is a stub)."""
    import types

    timer = object.__new__(timing_mod._CudaTimer)
    timer.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    for call_ms, expected in ((1, 5), (0.6 * timing_mod.ENQUEUE_BUDGET_MS, 2), (3 * timing_mod.ENQUEUE_BUDGET_MS, 1)):
        timer.fn = lambda: time.sleep(call_ms / 1e3)
        samples = timer.enqueue_us()
        assert len(samples) == expected, (call_ms, samples)
        assert min(samples) >= call_ms * 1e3 * 0.9


def test_warmup_settles_when_three_windows_agree():
    assert not timing_mod._settled([1.0, 1.0], 0.02)
    assert timing_mod._settled([2.0, 1.0, 1.01, 0.995], 0.02)
    assert not timing_mod._settled([1.0, 1.1, 1.0], 0.02)
    assert timing_mod._settled([0.0050, 0.0055, 0.0052], 0.02)  # within 1 us


def test_cpu_timing_is_wall_clock_for_both():
    timed = timing_mod.time_cpu(lambda: sum(range(1000)), 4)
    assert timed.device_ms == timed.latency_ms and len(timed.device_ms) == 4
    assert timed.info["method"] == "cpu-wallclock"


# ---------------------------------------------------------------------------- checkpoint and resume

GDN_SWEEP = {"impls": ["chunk"], "passes": ["fwd"], "dtype": "bfloat16", "head_dim": 32,
             "naive_max_seqlen": 64, "main_shapes": [{"batch": 1, "seqlen": t, "heads": 1} for t in (16, 32, 48)],
             "seqlen_sweep": {"batch": 1, "heads": 1, "seqlens": [64, 80]}}


def _fake_env(commit):
    return lambda: {"gpu_name": "cpu", "torch": "x", "triton": "x", "python": "x", "git_commit": commit}


def _fake_measure(calls, fail_at=None):
    def measure(mod, impl, case, device, timing):
        if fail_at is not None and len(calls) == fail_at:
            raise KeyboardInterrupt("killed")  # what a time limit does mid-job
        calls.append(case["seqlen"])
        return {"study": "gdn", "impl": impl, **case, "status": "ok", "times_ms": [1.0], "median_ms": 1.0,
                "error": None}
    return measure


def test_killed_job_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    out, ckpt = tmp_path / "data" / "chunk.jsonl", tmp_path / "ckpt" / "chunk.jsonl"
    timing = {"warmup_ms": 1}
    monkeypatch.setattr(jobs, "environment", _fake_env("abc"))
    first = []
    monkeypatch.setattr(jobs, "measure_case", _fake_measure(first, fail_at=2))
    with pytest.raises(KeyboardInterrupt):
        jobs.run_job("gdn", "chunk", GDN_SWEEP, out, timing, checkpoint=ckpt)
    assert first == [16, 32] and not out.exists()
    with open(ckpt, "a") as f:
        f.write('{"key": "torn')  # a write cut short by the kill
    second = []
    monkeypatch.setattr(jobs, "measure_case", _fake_measure(second))
    rows = jobs.run_job("gdn", "chunk", GDN_SWEEP, out, timing, checkpoint=ckpt)
    assert second == [48, 64, 80]
    assert [r["seqlen"] for r in files.read_jsonl(out)] == [16, 32, 48, 64, 80] == [r["seqlen"] for r in rows]
    assert not ckpt.exists()


@pytest.mark.parametrize("change", ["commit", "timing"])
def test_checkpoint_rows_of_other_code_or_timing_are_not_reused(tmp_path, monkeypatch, change):
    out, ckpt = tmp_path / "out.jsonl", tmp_path / "ckpt.jsonl"
    monkeypatch.setattr(jobs, "environment", _fake_env("abc"))
    monkeypatch.setattr(jobs, "measure_case", _fake_measure([], fail_at=3))
    with pytest.raises(KeyboardInterrupt):
        jobs.run_job("gdn", "chunk", GDN_SWEEP, out, {"rep_ms": 100}, checkpoint=ckpt)
    if change == "commit":
        monkeypatch.setattr(jobs, "environment", _fake_env("def"))
    calls = []
    monkeypatch.setattr(jobs, "measure_case", _fake_measure(calls))
    jobs.run_job("gdn", "chunk", GDN_SWEEP, out, {"rep_ms": 50 if change == "timing" else 100},
                    checkpoint=ckpt)
    assert calls == [16, 32, 48, 64, 80]


def test_kernel_breakdown_on_the_cpu_lists_ops_longest_first():
    a, b = torch.randn(512, 512), torch.randn(64)  # the product dwarfs the relu (a loaded host cannot swap them)
    entries = profiling.kernel_breakdown(lambda: ((a @ a), b.relu_()), torch.device("cpu"), calls=3, top=1)
    assert entries[0]["us"] > 0 and entries[0]["calls"] >= 1
    names = [e["name"] for e in entries]
    assert any("mm" in n for n in names[:1]) and names[-1] == "other" and len(entries) == 2


def test_kernel_breakdown_drops_api_calls_not_kernels():
    api = ["cudaLaunchKernel", "cuLaunchKernelEx", "cudaDeviceSynchronize", "Activity Buffer Request"]
    kernels = ["cutlass3x_sm90_tensorop_gemm_bf16", "cub::DeviceReduceKernel", "_chunk_state_kernel"]
    assert all(profiling._API_EVENT.match(n) for n in api)
    assert not any(profiling._API_EVENT.match(n) for n in kernels)


def test_nvidia_smi_fields_in_one_call(monkeypatch):
    import subprocess

    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="580.1, 1980\n", stderr="")

    monkeypatch.setattr(env_mod.subprocess, "run", fake_run)
    assert env_mod._nvidia_smi(["driver_version", "clocks.max.sm"], "GPU-x") == {
        "driver_version": "580.1", "clocks.max.sm": "1980"}
    assert len(calls) == 1 and "--id=GPU-x" in calls[0] and "--query-gpu=driver_version,clocks.max.sm" in calls[0]

    def failing(cmd, **kw):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(env_mod.subprocess, "run", failing)
    assert env_mod._nvidia_smi(["driver_version"]) == {"driver_version": None}


def test_rows_record_every_pinned_anchor():
    """env.anchors names the distributions of pyproject's anchors extra, no more and no fewer."""
    import re
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    pinned = {re.split(r"[=<>!~ ;\[]", req, maxsplit=1)[0] for req in project["optional-dependencies"]["anchors"]}
    assert set(env_mod.ANCHORS) == pinned
