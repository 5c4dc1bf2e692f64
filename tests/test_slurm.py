"""The DAG on a SLURM cluster (profiles/slurm-ci, snakemake-executor-plugin-slurm).

Needs a running cluster with accounting, such as the one-node cluster of
.ci/slurm-up (as root: `.ci/slurm-up`, then `pytest -m slurm`); skipped when
`sinfo` shows no idle node or the executor plugin is not installed. Each test
runs the toy study's copy of the workflow (tests/test_workflow.py) through
`--executor slurm`: measurement jobs go to SLURM with one (simulated) GPU each,
rendering runs locally.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from test_workflow import ROOT, snakemake, toy_workflow  # noqa: F401 - toy_workflow is a fixture

PROFILE = ("--workflow-profile", "profiles/slurm-ci")
MEASURED = "results/smoke/raw/cpu/toy/scale.jsonl"
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+)")


NO_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is None
needs_plugin = pytest.mark.skipif(NO_PLUGIN, reason="snakemake-executor-plugin-slurm is not installed")


def _no_cluster():
    """Why the tests that submit jobs cannot run here, or None when they can."""
    if NO_PLUGIN:
        return "snakemake-executor-plugin-slurm is not installed"
    if shutil.which("sinfo") is None or shutil.which("sacct") is None:
        return "no SLURM client here (sinfo, sacct); start a cluster with .ci/slurm-up"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                                timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError) as err:
        return f"sinfo failed: {err}"
    if not {"idle", "mixed"} & set(states):
        return f"no idle SLURM node (sinfo: {states}); start a cluster with .ci/slurm-up"
    return None


_REASON = _no_cluster()
needs_cluster = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")
pytestmark = pytest.mark.slurm


@needs_plugin
def test_gpu_profile_asks_one_gpu_per_measurement(toy_workflow):  # noqa: F811
    """profiles/slurm (a dry run, no cluster needed): rule measure asks for one
    GPU of the named model with its CPUs and one task; the placeholders for
    partition and account are replaced from the command line."""
    proc = snakemake(toy_workflow, "--workflow-profile", "profiles/slurm", "-n", "--default-resources",
                     "slurm_partition=gpu", "slurm_account=my_project")
    resources, measure = _resources(proc.stdout + proc.stderr, "measure")
    wanted = {"gpu": "1", "gpu_model": "h200", "cpus_per_gpu": "8", "tasks": "1",
              "slurm_partition": "gpu", "slurm_account": "my_project"}
    assert resources | wanted == resources, resources
    assert "data/raw/h200/toy/scale.jsonl" in measure


def _resources(log, rule):
    """``({resource: value}, the dry run's text from the job)`` of the first job of ``rule`` in a dry run's log."""
    job = log[log.index(f"rule {rule}:"):]
    line = job[job.index("resources: "):].splitlines()[0].removeprefix("resources: ")
    return dict(item.split("=", 1) for item in line.split(", ")), job


@needs_plugin
def test_gpu_profile_gives_the_compile_ahead_job_a_gpu_and_a_cpu_per_process():
    """profiles/slurm on this repository's workflow (a dry run): each compile-ahead job asks
    for a GPU of the measurement jobs' model (it checks its GPU as they do) and one CPU per
    process of config key compile_ahead.workers, with their memory."""
    proc = snakemake(ROOT, "--workflow-profile", "profiles/slurm", "-n", "--forceall", "--until", "measure",
                     "--default-resources", "slurm_partition=gpu", "slurm_account=my_project",
                     "--config", "measure=[gdn, flex]", "gpu=h200")  # the studies with compile-ahead jobs
    resources, _ = _resources(proc.stdout + proc.stderr, "compile_ahead")
    workers = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["compile_ahead"]["workers"]
    wanted = {"gpu": "1", "gpu_model": "h200", "cpus_per_gpu": str(workers), "tasks": "1"}
    assert resources | wanted == resources, resources
    assert int(resources["mem_mb"]) >= 4000 * workers, resources


def slurm_states(job_ids, want, timeout_s=30):
    """``{job id: state}`` from sacct once every job is in accounting with a
    state starting with one of ``want`` (slurmdbd records the end a moment late)."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(["sacct", "-X", "-P", "-n", "-o", "JobIdRaw,State", "-j", ",".join(job_ids)],
                             capture_output=True, text=True, check=True).stdout
        states = dict(line.split("|", 1) for line in out.splitlines() if line)
        if set(states) == set(job_ids) and all(s.startswith(want) for s in states.values()):
            return states
        if time.monotonic() > deadline:
            return states
        time.sleep(0.5)


@needs_cluster
def test_smoke_dag_runs_through_slurm(toy_workflow):  # noqa: F811
    """The smoke DAG, up to the paper's inputs (the PDF needs TeX, and
    tests/test_workflow.py builds it): the measurement job runs on SLURM and
    is in sacct; the rendering rules ran locally."""
    proc = snakemake(toy_workflow, *PROFILE, "--omit-from", "paper")
    log = proc.stdout + proc.stderr
    job_ids = SUBMITTED.findall(log)
    assert len(job_ids) == 1, f"expected one SLURM job (rule measure), got {job_ids}:\n{log[-3000:]}"
    states = slurm_states(job_ids, "COMPLETED")
    assert states == {job_ids[0]: "COMPLETED"}, states
    alloc = subprocess.run(["sacct", "-X", "-P", "-n", "-o", "AllocTRES", "-j", job_ids[0]],
                           capture_output=True, text=True, check=True).stdout
    assert "gres/gpu=1" in alloc, alloc
    rows = [json.loads(line) for line in (toy_workflow / MEASURED).read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    out = toy_workflow / "results" / "smoke"
    assert (out / "figures" / "toy_time.pdf").stat().st_size > 0
    assert (out / "paper" / "generated" / "numbers.tex").stat().st_size > 0


def _hold_measurements(wf):
    """Make the copy's toy measurement wait while the file named by $TOY_HOLD
    exists (after touching ``$TOY_HOLD.started``): a job that is running when
    the test cancels it."""
    study = wf / "kernels" / "toy" / "study.py"
    study.write_text(study.read_text() + '''

_prepare = prepare


def prepare(impl, case, device):
    import os, time
    from pathlib import Path
    hold = os.environ.get("TOY_HOLD")
    if hold:
        Path(hold + ".started").touch()
        while Path(hold).exists():
            time.sleep(0.2)
    return _prepare(impl, case, device)
''')


def _wait(what, predicate, proc, log, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"gave up waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


@needs_cluster
def test_scancelled_job_is_reported_and_rerun(toy_workflow):  # noqa: F811
    """A measurement job cancelled with scancel while it runs is reported as
    failed and, with `retries: 1` in the profile, submitted again and completed."""
    _hold_measurements(toy_workflow)
    hold = toy_workflow / "hold"
    hold.touch()
    log = toy_workflow / "snakemake.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(toy_workflow), os.environ.get("PYTHONPATH")])),
               TOY_HOLD=str(hold))
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "snakemake", *PROFILE, MEASURED],
                                cwd=toy_workflow, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            _wait("the measurement job to start", (toy_workflow / "hold.started").exists, proc, log)
            (first,) = SUBMITTED.findall(log.read_text())
            subprocess.run(["scancel", first], check=True)
            # the first attempt is dead before the retry may go through
            _wait("the job to be cancelled", lambda: slurm_states([first], "CANCELLED", 0)
                  .get(first, "").startswith("CANCELLED"), proc, log)
            hold.unlink()
            proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert proc.returncode == 0, text[-4000:]
    assert f"SLURM-job '{first}' failed, SLURM status is: 'CANCELLED'" in text, text[-4000:]
    job_ids = SUBMITTED.findall(text)
    assert len(job_ids) == 2 and job_ids[0] == first, job_ids
    states = slurm_states(job_ids, ("CANCELLED", "COMPLETED"))
    assert states[first].startswith("CANCELLED") and states[job_ids[1]] == "COMPLETED", states
    rows = [json.loads(line) for line in (toy_workflow / MEASURED).read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok"]
