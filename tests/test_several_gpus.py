"""Several GPUs of one host, as Snakemake schedules them: a real run of the toy workflow
(tests/test_workflow.py) on a host whose nvidia-smi lists eight GPUs (tests/test_gpulease.py's
fake), measuring on the CPU (the GPUs are called ``cpu``, so the rows go to results/cpu/raw/cpu/).

What it checks is the slot arithmetic of workflow/rules/measure.smk with the lease of
kernels/core/gpulease.py: under ``--resources gpu=N`` Snakemake runs 2N measurement jobs at once
(``gpu_slots`` = 2 * GPU_SLOTS * N, each job taking GPU_SLOTS), at most N of them hold a GPU, each
its own, and the others have imported their study and wait for a lease before they pick a GPU;
the lease records say which GPU measured which study and when.
"""

import json
import re
from datetime import datetime, timedelta

import pytest
import test_workflow
from test_gpulease import fake_nvidia_smi, peak, spans
from test_workflow import _add_toy_study, snakemake

#: The toy workflow (tests/test_workflow.py's fixture).
toy_workflow = test_workflow.toy_workflow

#: Appended to each toy study's study.py in the copy: a line in the trace file when a process
#: imports the study (the Snakemake process too), and one in each case's prepare (where a GPU study
#: touches CUDA), with the process, the time and its CUDA_VISIBLE_DEVICES; the case then takes 2 s,
#: so that the jobs' holds overlap.
TRACE = '''
import json as _json, os as _os, time as _time

def _trace(what):
    with open({trace!r}, "a") as f:
        f.write(_json.dumps([what, STUDY, _os.getpid(), _time.time(),
                            _os.environ.get("CUDA_VISIBLE_DEVICES")]) + "\\n")

_trace("import")
_prepare = prepare

def prepare(impl, case, device):
    _trace("prepare")
    _time.sleep(2)
    return _prepare(impl, case, device)
'''


def _running(log, rule):
    """The most jobs of ``rule`` that Snakemake's ``log`` shows running at once."""
    running = top = 0
    for match in re.finditer(rf"rule {rule}:|Finished jobid: \d+ \(Rule: {rule}\)", log):
        running += 1 if match.group().startswith("rule") else -1
        top = max(top, running)
    return top


@pytest.mark.slow
def test_n_gpus_measure_n_studies_at_once_each_on_its_own(toy_workflow, tmp_path, monkeypatch):
    """Five toy studies on a host of eight GPUs under ``--resources gpu=2``: Snakemake runs four
    measurement jobs at once (gpu_slots 2 * 1 * 2, one each), two hold a lease, on GPUs 0 and 1
    only (the leases pick among min(GPUs, gpu) of them), never two on one; a job that waited
    imported its study while another measured on the GPU it then got, and saw no GPU
    (``CUDA_VISIBLE_DEVICES`` unset) until its lease gave it one, the one its lease record names."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path, uuids = fake_nvidia_smi(tmp_path / "bin", 8, name="cpu")
    monkeypatch.setenv("PATH", path)
    trace = tmp_path / "trace.jsonl"
    study_py = toy_workflow / "kernels" / "toy" / "study.py"
    study_py.write_text(study_py.read_text() + TRACE.format(trace=str(trace)))
    studies = ["toy", "toyb", "toyc", "toyd", "toye"]
    for study in studies[1:]:
        _add_toy_study(toy_workflow, study)
    targets = [f"results/cpu/raw/cpu/{study}/scale.jsonl" for study in studies]
    proc = snakemake(toy_workflow, "--cores", "8", "--resources", "gpu=2", "--config", "measure=true", "--",
                     *targets)
    log = proc.stdout + proc.stderr
    assert _running(log, "measure") == 4, log

    bench = toy_workflow / "results" / "cpu" / "raw" / "cpu" / "benchmarks"
    records = {study: json.loads((bench / f"measure_{study}_scale.lease.json").read_text()) for study in studies}
    assert {r["cuda_visible_devices"] for r in records.values()} == {"0", "1"}, records
    assert all(r["gpu_uuid"] == uuids[int(r["cuda_visible_devices"])] for r in records.values())
    by_gpu = spans(records.values())
    tolerance = timedelta(milliseconds=2)  # leased_at is to the millisecond
    for held in by_gpu.values():
        for (_, end1), (start2, _) in zip(held, held[1:]):
            assert start2 >= end1 - tolerance, records
    assert peak([(s + tolerance, e) for held in by_gpu.values() for s, e in held]) == 2

    events = [json.loads(line) for line in trace.read_text().splitlines()]
    imports = {pid: (t, visible) for what, _, pid, t, visible in events if what == "import"}
    imported = {}  # each job's process: it imported its study with no GPU chosen, before its lease
    for what, study, pid, t, visible in events:
        if what == "prepare":  # where a GPU study starts CUDA: on the GPU of its lease
            assert visible == records[study]["cuda_visible_devices"], (study, events, records)
            imported[study], before = imports[pid]
            assert before is None and imported[study] < datetime.fromisoformat(records[study]["leased_at"]).timestamp()
    assert sorted(imported) == studies, events
    # a job that waited for its lease had imported its study while another job measured on that GPU
    overlapped = [study for study, r in records.items() if r["lease_wait_s"] > 0 and any(
        start.timestamp() <= imported[study] < end.timestamp()
        for start, end in by_gpu[r["cuda_visible_devices"]]
        if start != datetime.fromisoformat(r["leased_at"]))]
    assert overlapped, (records, events)
    for study in studies:
        assert [r["status"] for r in test_workflow._rows(toy_workflow / f"results/cpu/raw/cpu/{study}/scale.jsonl")] \
            == ["ok"]
