"""Nothing overwrites or silently corrupts the committed data: a careless run, a bad
config, a bad row and a killed build each end in a clear error naming the file, the
line or the config key, and leave data/ as it was.

The workflow runs in a git copy of this repository (the tracked and new files), so
that `git status` of its data/ shows what a run changed. nvidia-smi is replaced by a
script that lists the GPUs a test asks for, so that these tests behave the same on
a host with a GPU.
"""

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import statistics
import sys
import time
from pathlib import Path

import pytest
import yaml

from kernels.core import checks
from kernels.paper import claims, collect, latex, provenance, render, rows
from kernels.core.harness import _row

ROOT = Path(__file__).resolve().parent.parent
#: The configured studies.
STUDIES = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"]
GDN_CHUNK = "data/raw/h200/gdn/chunk.jsonl"
#: Rows of the committed GDN chunk file (the bad-row cases below add one after the last or cut the last).
CHUNK_ROWS = len((ROOT / GDN_CHUNK).read_text().splitlines())


@functools.cache
def current_studies() -> tuple[str, ...]:
    """The studies whose committed rows in data/raw/h200/ are current (of today's code and config).
    A measuring run measures a stale study again, so the loss of one of its row files stops nothing,
    and its rows are not checked against today's config: the tests of those checks take a current
    study's rows, and skip when there is none (a kernel change landed before its study's new rows)."""
    found = provenance.states(ROOT / "data" / "raw" / "h200", provenance.load_config(ROOT))
    return tuple(s.study for s in found if s.state == provenance.CURRENT)


def current_row_file(but: str | None = None) -> tuple[str, str, str]:
    """(study, impl, row file) of a current study other than ``but``: GDN's chunked kernel while GDN
    is current, else the first implementation of the first current study."""
    studies = [s for s in current_studies() if s != but]
    if not studies:
        other = f" other than {but}" if but else ""
        pytest.skip(f"no current study{other} in data/raw/h200/")
    study = "gdn" if "gdn" in studies else studies[0]
    impl = sorted((ROOT / "data" / "raw" / "h200" / study).glob("*.jsonl"))[0].stem
    return study, impl, f"data/raw/h200/{study}/{impl}.jsonl"


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """A git repository holding a copy of this checkout's files (tracked and new, not ignored)."""
    tree = tmp_path_factory.mktemp("template") / "tree"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "copy"]):
        subprocess.run(git + cmd, cwd=tree, check=True, capture_output=True)
    return tree


@pytest.fixture
def tree(template, tmp_path):
    """A fresh copy of the template repository for one test."""
    return Path(shutil.copytree(template, tmp_path / "tree", symlinks=True))


def gpus(tmp_path, *names):
    """Environment whose nvidia-smi lists ``names`` (none: it fails, as on a host without a driver)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = "".join(f"echo '{n}'\n" for n in names) if names else "exit 9\n"
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n" + script)
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def snakemake(tree, *args, env=None):
    """Run Snakemake in ``tree`` (its jobs import that copy's kernels); returns the process."""
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=tree, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(tree), **(env or {})))


def data_state(tree):
    """`git status` of data/ and the bytes of every file under it."""
    status = subprocess.run(["git", "status", "--porcelain", "--", "data"], cwd=tree, capture_output=True,
                            text=True, check=True).stdout
    files = {str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted((tree / "data").rglob("*")) if p.is_file()}
    return status, files


def fails(proc, *messages):
    """Assert that ``proc`` failed and printed every one of ``messages``."""
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    for message in messages:
        assert message in out, f"{message!r} not in:\n{out[-3000:]}"


# ----------------------------------------------------------------------------
# measuring


@pytest.mark.parametrize("overwrite", ["false", "true"])
def test_measuring_on_a_host_without_the_gpu_stops_before_any_job(tree, tmp_path, overwrite):
    env = gpus(tmp_path)
    before = data_state(tree)
    config = ["--config", "measure=[flex]", "gpu=h200", f"overwrite={overwrite}"]
    assert snakemake(tree, "-n", "--cores", "1", *config, env=env).returncode == 0  # a dry run still plans
    proc = snakemake(tree, "--cores", "1", "data/raw/h200/flex/naive.jsonl", *config, env=env)
    fails(proc, "measuring into data/raw/h200/ needs its GPU (h200) on this host, and nvidia-smi lists no GPU")
    assert "rule measure:" not in proc.stdout + proc.stderr
    assert data_state(tree) == before
    assert not (tree / "results" / "logs").exists()


@pytest.mark.parametrize("git", [True, False])
def test_replacing_a_studys_committed_rows_needs_an_overwrite_naming_it(tree, tmp_path, git):
    """A measuring run stops before its first job when it would replace committed rows of a study
    that config overwrite does not name (naming another is not enough), also in a copy of the
    artifact without its history, where every row file counts as committed."""
    if not git:
        shutil.rmtree(tree / ".git")
    before = data_state(tree) if git else None
    env = gpus(tmp_path, "NVIDIA H200")
    for overwrite in ([], ["overwrite=[gdn]"]):
        proc = snakemake(tree, "--cores", "1", "--config", "measure=[swiglu]", *overwrite, env=env)
        fails(proc, "measuring swiglu into data/raw/h200/swiglu/ would replace its committed rows (10 files, "
                    "e.g. data/raw/h200/swiglu/compile.jsonl; current)",
             "add --config overwrite='[swiglu]' to re-measure it")
        assert len([line for line in proc.stderr.splitlines() if "committed rows (" in line]) == 1
        assert "rule measure:" not in proc.stdout + proc.stderr
    assert not (tree / "results" / "logs").exists()
    if git:
        assert data_state(tree) == before


def test_deleting_all_output_keeps_the_committed_rows_of_a_study_overwrite_does_not_name(tree, tmp_path):
    """--delete-all-output runs no onstart (the guard above): on a measuring run, the committed rows
    of a study it would measure are outputs of no job unless config overwrite names the study."""
    env = gpus(tmp_path, "NVIDIA H200")
    before = data_state(tree)
    proc = snakemake(tree, "--cores", "1", "--delete-all-output", "--config", "measure=[gdn, flex]", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Keeping the committed rows of gdn, flex in data/raw/h200/" in proc.stderr
    assert data_state(tree) == before
    proc = snakemake(tree, "-n", "--cores", "1", "--delete-all", "--config", "measure=[gdn, flex]", "overwrite=[gdn]",
                     env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Keeping the committed rows of flex in data/raw/h200/" in out, out[-3000:]
    assert "Would delete data/raw/h200/gdn/chunk.jsonl" in out and "data/raw/h200/flex/flex.jsonl" not in out
    assert data_state(tree) == before


@pytest.mark.slow
def test_a_measurement_job_checks_its_gpu_before_writing(tree, tmp_path):
    """nvidia-smi names a GPU that torch does not see (or a different one): the job
    stops before it measures, its log holds the traceback, nothing reaches data/."""
    before = data_state(tree)
    proc = snakemake(tree, "--cores", "1", "data/raw/h100/gdn/recurrent.jsonl",
                     env=gpus(tmp_path, "NVIDIA H100"))
    fails(proc, "measuring into data/raw/h100/ needs a")
    log = (tree / "results" / "logs" / "measure_gdn_recurrent.log").read_text()
    assert "Traceback (most recent call last)" in log and "RuntimeError: measuring into data/raw/h100/" in log
    assert "nothing was written" in log
    assert data_state(tree) == before
    assert not [p for p in (tree / "data" / "raw" / "h100").rglob("*") if p.is_file()]
    assert not (tree / ".tmp" / "checkpoints").exists()


def test_require_gpu_names_the_folder_and_the_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"measuring into data/raw/h200/ needs a CUDA GPU \(h200\)"):
        checks.require_gpu("data/raw/h200")
    checks.require_gpu("data/raw/cpu")  # without CUDA the harness measures on the CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA A100-SXM4-80GB")
    with pytest.raises(RuntimeError, match=r"needs a h200 GPU but this one is 'NVIDIA A100-SXM4-80GB' "
                                           r"\(folder a100-sxm4-80gb\); set --config gpu=a100-sxm4-80gb"):
        checks.require_gpu("data/raw/h200")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H200")
    checks.require_gpu("data/raw/h200")
    with pytest.raises(RuntimeError, match=r"needs a cpu GPU but this one is 'NVIDIA H200'"):
        checks.require_gpu("data/raw/cpu")  # with CUDA it measures on the GPU: not the folder cpu


def test_committed_rows_are_the_tracked_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = tmp_path / "data" / "raw" / "g" / "s"
    rows.mkdir(parents=True)
    (rows / "a.jsonl").write_text("{}\n")
    (rows / "b.jsonl").write_text("{}\n")
    assert checks.committed_rows("data/raw/g") == ["data/raw/g/s/a.jsonl", "data/raw/g/s/b.jsonl"]  # no git
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run(["git", "add", "data/raw/g/s/a.jsonl"], check=True)
    assert checks.committed_rows("data/raw/g") == ["data/raw/g/s/a.jsonl"]
    assert checks.committed_rows("data/raw/other") == []


# ----------------------------------------------------------------------------
# rendering


@pytest.mark.parametrize("dry", [True, False])
def test_rendering_a_gpu_folder_that_does_not_exist_stops_before_any_job(tree, dry):
    before = data_state(tree)
    proc = snakemake(tree, *(["-n"] if dry else []), "--cores", "1", "--config", "measure=false", "gpu=a100")
    fails(proc, "config gpu=a100: no folder data/raw/a100/ to render from (folders there: h100-80gb-hbm3, h200)")
    assert data_state(tree) == before
    assert not (tree / "results").exists() and not (tree / "paper" / "generated").exists()
    assert not list((tree / "figures").glob("*.pdf"))


def test_rendering_several_models_reads_config_paper_gpu_and_stops_when_it_names_none(tree):
    """data/raw/ holds the rows of two models: the render reads paper_gpu's, and stops before any
    job when paper_gpu names no folder there."""
    assert {"h200", "h100-80gb-hbm3"} <= {p.name for p in (tree / "data" / "raw").iterdir()}
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "paper_gpu=h100-80gb-hbm3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rendering from the committed data in data/raw/h100-80gb-hbm3/" in proc.stderr
    before = data_state(tree)
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "paper_gpu=a100")
    fails(proc, "config gpu=auto: data/raw/ holds the rows of ['h100-80gb-hbm3', 'h200'] and config key "
                "'paper_gpu' (a100) names none of them")
    assert data_state(tree) == before


def test_rendering_without_rows_of_a_configured_study_stops_before_any_job(tree):
    for path in (tree / "data" / "raw" / "h200" / "flex").glob("*.jsonl"):
        path.unlink()
    before = data_state(tree)
    proc = snakemake(tree, "--cores", "1", "--config", "measure=false")
    fails(proc, "data/raw/h200/ holds no rows of the configured study flex (no data/raw/h200/flex/*.jsonl")
    assert data_state(tree) == before
    assert not (tree / "results").exists()


@pytest.mark.parametrize("measure", ["false", "true"])
def test_a_lost_row_file_of_an_implementation_the_run_measured_stops_before_any_job(tree, tmp_path, measure):
    """One configured implementation's rows gone (its benchmark file says its job ran): rendering,
    or a measuring run that does not measure that study (a current one), stops naming the file."""
    study, impl, lost = current_row_file()
    (tree / lost).unlink()
    before = data_state(tree)
    proc = snakemake(tree, "-n", "--cores", "1", "--config", f"measure={measure}", "gpu=h200",
                     env=gpus(tmp_path, "NVIDIA H200"))
    fails(proc, f"{lost} is missing, but the run of data/raw/h200/ measured {impl} of {study} "
                f"(data/raw/h200/benchmarks/measure_{study}_{impl}.tsv): restore it")
    assert data_state(tree) == before


def test_a_lost_row_file_of_a_current_study_stops_before_any_job_without_its_benchmark_file(tree):
    """Its benchmark files gone too: the study's other rows are current, and their fingerprint holds
    the config that names the implementation, so its rows are missing, not unmeasured."""
    study, impl, lost = current_row_file()
    (tree / lost).unlink()
    for path in (tree / "data" / "raw" / "h200" / "benchmarks").glob(f"measure_{study}_{impl}.*"):
        path.unlink()
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false")
    fails(proc, f"{lost} is missing, but the run of data/raw/h200/ measured {study} with {impl} among its "
                "implementations (its rows are current): restore it")


def test_a_study_the_committed_run_did_not_measure_renders_as_not_measured(tree):
    """A configured study with neither rows nor measurement jobs in the folder (one added after its
    run) is rendered as not measured, saying so, and the quick run has none of its rows to compare;
    a study whose jobs ran but whose rows are gone stops the render (above)."""
    *_, compared = current_row_file(but="flex")   # the quick run compares current rows only
    for path in [*(tree / "data" / "raw" / "h200" / "flex").glob("*.jsonl"),
                 *(tree / "data" / "raw" / "h200" / "benchmarks").glob("measure_flex_*.tsv")]:
        path.unlink()
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("Studies of data/raw/h200/: ")]
    assert "not measured: flex" in line, line
    proc = snakemake(tree, "-n", "--forceall", "--profile", "profiles/quick", "--config", "measure=true", "gpu=h200")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "output: results/quick/raw/h200/flex/flex.jsonl" in proc.stdout
    assert "data/raw/h200/flex/" not in proc.stdout and compared in proc.stdout


def test_a_folder_without_rows_is_not_a_gpu_to_render(tree):
    """What a failed measurement leaves (an empty folder) does not make gpu=auto ambiguous."""
    (tree / "data" / "raw" / "h100" / "benchmarks").mkdir(parents=True)
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rendering from the committed data in data/raw/h200/" in proc.stderr


# ----------------------------------------------------------------------------
# rows


def _edit_line(n, **fields):
    def edit(lines):
        row = json.loads(lines[n - 1])
        row.update(fields)
        lines[n - 1] = json.dumps(row)
        return lines
    return edit


#: The name an H100 SXM5 80 GB reports (torch.cuda.get_device_name), of folder h100-80gb-hbm3.
H100 = "NVIDIA H100 80GB HBM3"
#: The first committed row of FlexAttention (a row of another study than GDN, of its own schema).
FLEX_ROW = (ROOT / "data" / "raw" / "h200" / "flex" / "flex.jsonl").read_text().splitlines()[0]

ROW_CASES = {
    # the cases: a string shape field, duplicates, NaN, an empty file, a cut last line
    "string": (_edit_line(4, seqlen="8192"), f"{GDN_CHUNK}:4: seqlen: '8192' is not of type 'integer'"),
    "identical": (lambda lines: lines + [lines[2]], f"{GDN_CHUNK}:{CHUNK_ROWS + 1}: same case as {GDN_CHUNK}:3"),
    "conflicting": (lambda lines: lines + _edit_line(3, median_ms=0.001, times_ms=[0.001])(list(lines))[2:3],
                    f"{GDN_CHUNK}:{CHUNK_ROWS + 1}: same case as {GDN_CHUNK}:3"),
    "nan": (lambda lines: lines[:4] + [lines[4].replace('"median_ms": ', '"median_ms": NaN, "x": ')] + lines[5:],
            f"{GDN_CHUNK}:5: non-finite number NaN"),
    "empty": (lambda lines: [], f"{GDN_CHUNK}: no rows (an empty file)"),
    # a valid row of a case its config cannot make (the config check's error: 40000 sequences do not fit in 32768)
    "impossible": (_edit_line(9, num_seqs=40000), f"{GDN_CHUNK}:9: fwd bfloat16 batch=1 head_dim=128 heads=16 "
                   "num_seqs=40000 seqlen=32768 varlen=True: not a case of the config section it was measured with"),
    "unknown field": (_edit_line(4, note="re-timed by hand"),
                      f"{GDN_CHUNK}:4: (top level): Unevaluated properties are not allowed ('note' was unexpected)"),
    "cut": (lambda lines: lines[:-1] + [lines[-1][:60]],
            f"{GDN_CHUNK}:{CHUNK_ROWS}: not valid JSON: the line ends at column"),
    # a row measured on another GPU model than its folder's (the H100 as a second measured GPU)
    "other gpu": (lambda lines: _edit_line(4, env={**json.loads(lines[3])["env"], "gpu_name": H100})(lines),
                  f"{GDN_CHUNK}:4: row of GPU '{H100}' (h100-80gb-hbm3) in h200 data (data/raw/h200/)"),
    # a row of another study (copied from its file): named as such, not by what GDN's schema misses in it
    "other study": (lambda lines: lines + [FLEX_ROW],
                    f"{GDN_CHUNK}:{CHUNK_ROWS + 1}: row of study 'flex' in 'gdn' data"),
}
#: The bad rows of ROW_CASES that the start-of-run summary names (a line that is not a JSON object,
#: a row of another study: kernels.paper.provenance.read_envs), instead of calling GDN current.
SUMMARY_CASES = {"cut": f"gdn (bad row at {GDN_CHUNK}:{CHUNK_ROWS}: not JSON)",
                 "other study": f"gdn (bad row at {GDN_CHUNK}:{CHUNK_ROWS + 1}: row of study 'flex' in 'gdn' data)"}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(ROW_CASES))
def test_a_bad_row_stops_its_collect_naming_file_and_line(tree, case):
    """The collect stops with one line naming the file, the line and what is wrong, on the console
    and in its log, without a traceback; a line that is not a row of the study is named as early
    as the summary of the studies' states at the run's start."""
    if case == "impossible" and "gdn" not in current_studies():
        pytest.skip("the config check reads current rows only, and GDN's are stale")
    edit, message = ROW_CASES[case]
    path = tree / GDN_CHUNK
    lines = edit(path.read_text().splitlines())
    path.write_text("".join(line + "\n" for line in lines))
    before = data_state(tree)
    proc = snakemake(tree, "--cores", "1", "results/tidy/gdn.csv", "--config", "measure=false")
    fails(proc, message)
    out = proc.stdout + proc.stderr
    [summary] = [line for line in out.splitlines() if line.startswith("Studies of data/raw/h200/: ")]
    if case in SUMMARY_CASES:
        assert SUMMARY_CASES[case] in summary and "stale: " in summary, summary
    said = [line for line in out.splitlines() if message in line and line != summary]
    assert "Traceback" not in out and len(said) == 1, out[-3000:]
    log = (tree / "results" / "logs" / "collect_gdn.log").read_text()
    assert "Traceback" not in log and message in log
    assert not (tree / "results" / "tidy" / "gdn.csv").exists()
    assert data_state(tree) == before


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


GOOD = json.loads((ROOT / GDN_CHUNK).read_text().splitlines()[0])


@pytest.mark.parametrize("text,message", [
    ('{"a": Infinity}', "non-finite number Infinity"),
    ('{"a": -Infinity}', "non-finite number -Infinity"),
    ("[1, 2]", "a row is a JSON object, not list"),
    ('{"a": 1} {"b": 2}', "not valid JSON: Extra data (column 10)"),
    ('{"a": 1, "b": "cut', "not valid JSON: the line ends at column 18 inside a row (cut short?)"),
    ('{"a": 1, "b":', "not valid JSON: the line ends at column 13 inside a row (cut short?)"),
    (json.dumps({**GOOD, "batch": 0}), "batch: 0 is less than the minimum of 1"),
    (json.dumps({**GOOD, "varlen": "no"}), "varlen: 'no' is not of type 'boolean'"),
    (json.dumps({**GOOD, "head_dim": 100}), "head_dim: 100 is not one of [16, 32, 64, 128]"),
    (json.dumps({**GOOD, "times_ms": [1.0, -1.0]}), "times_ms[1]: -1.0 is less than the minimum of 0"),
    (json.dumps({**GOOD, "times_ms": []}), "times_ms: [] should be non-empty"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "num_seqs"}), "num_seqs: required, missing"),
    (json.dumps({**GOOD, "impl": "fla_chunk"}), "row of impl 'fla_chunk' in the file of impl 'chunk'"),
    (json.dumps({**GOOD, "study": "flex"}), "row of study 'flex' in 'gdn' data"),
    (FLEX_ROW, "row of study 'flex' in 'gdn' data"),  # of another schema: its study, not what it lacks
    (json.dumps({**GOOD, "rel_err_dq": "small"}), "rel_err_dq: 'small' is not of type 'number'"),
    (json.dumps({**GOOD, "env": {**GOOD["env"], "note": "re-timed"}}), "env.note: unknown key (expected one "),
    # a median edited apart from its repetitions (the reproduction check reads the median)
    (json.dumps({**GOOD, "device_ms": GOOD["device_ms"] / 2}), f"device_ms {GOOD['device_ms'] / 2:g} is not"),
    (json.dumps({**GOOD, "median_ms": GOOD["median_ms"] * 2}), "is not the median of times_ms"),
])
def test_row_problems_name_file_and_line(tmp_path, text, message):
    path = _write(tmp_path / "gdn" / "chunk.jsonl", [GOOD, "", text])
    with pytest.raises(ValueError) as err:
        collect.load_rows([path], "gdn")
    assert str(err.value).startswith(f"{path}:3: ") and message in str(err.value)


def _on(gpu_name, **fields):
    """The good row, measured on ``gpu_name`` (``env.gpu_name``), with ``fields`` changed."""
    return {**GOOD, **fields, "env": {**GOOD["env"], "gpu_name": gpu_name}}


def _refused(paths, study="gdn") -> str:
    """The error of :func:`kernels.paper.collect.load_rows` on ``paths``."""
    with pytest.raises(ValueError) as err:
        collect.load_rows(paths, study)
    return str(err.value)


def test_a_row_of_another_gpu_model_than_its_folders_names_file_line_gpu_and_model(tmp_path):
    """The rows of a folder named after a GPU model (data/raw/h200) are of that model: an H100's
    row among an H200's stops the collect, naming its file and line, its GPU and the folder's model;
    the same row loads from the H100's folder, and a row measured on the CPU from the CPU's."""
    other = {"seqlen": GOOD["seqlen"] * 2}  # another case than GOOD's
    h200 = tmp_path / "h200"
    path = _write(h200 / "gdn" / "chunk.jsonl", [GOOD, "", _on(H100, **other)])
    assert _refused([path]) == f"{path}:3: row of GPU '{H100}' (h100-80gb-hbm3) in h200 data ({h200}/)"
    path = _write(h200 / "gdn" / "chunk.jsonl", [_on(H100), GOOD])  # its first row too
    assert _refused([path]) == f"{path}:1: row of GPU '{H100}' (h100-80gb-hbm3) in h200 data ({h200}/)"
    # the whole collect stops before it writes the tidy table
    with pytest.raises(ValueError, match=f"^{re.escape(path)}:1: row of GPU '{H100}'"):
        collect.collect("gdn", [path], "h200", str(tmp_path / "gdn.csv"))
    assert not (tmp_path / "gdn.csv").exists()
    h100 = _write(tmp_path / "h100-80gb-hbm3" / "gdn" / "chunk.jsonl", [_on(H100), _on(H100, **other)])
    assert len(collect.load_rows([h100], "gdn")) == 2
    # rows measured on the CPU (the smoke run's): in the CPU's folder, not in the H200's
    cpu = _write(tmp_path / "results" / "smoke" / "raw" / "cpu" / "gdn" / "chunk.jsonl", [_on("cpu")])
    assert len(collect.load_rows([cpu], "gdn")) == 1
    path = _write(h200 / "gdn" / "chunk.jsonl", [_on("cpu")])
    assert _refused([path]) == f"{path}:1: row of GPU 'cpu' (cpu) in h200 data ({h200}/)"
    path = _write(tmp_path / "cpu" / "gdn" / "chunk.jsonl", [_on("cpu"), _on("NVIDIA H200", **other)])
    assert _refused([path]) == f"{path}:2: row of GPU 'NVIDIA H200' (h200) in cpu data ({tmp_path / 'cpu'}/)"
    assert [rows.row_model(r) for r in (GOOD, _on(H100), _on("cpu"))] == ["h200", "h100-80gb-hbm3", "cpu"]
    assert [rows.model_label(m) for m in ("h200", "h100-80gb-hbm3", "a100-sxm4-80gb")] == [
        "H200", "H100 SXM", "A100 SXM4 80GB"]


def test_a_folder_not_named_after_a_model_holds_one_models_rows(tmp_path):
    """A second run's folder (data/reproductions/<name>) or a test's is of the model of its first
    row: a row of another model names its file and line, its GPU and that first row; the reproduction
    check reads its runs so (kernels.paper.claims.load_run). A CPU row in such a folder loads."""
    run = tmp_path / "reproductions" / "h200-x"
    a = _write(run / "gdn" / "chunk.jsonl", [GOOD])
    b = _write(run / "gdn" / "fla_chunk.jsonl", [_on(H100, impl="fla_chunk")])
    message = (f"{b}:1: row of GPU '{H100}' (h100-80gb-hbm3) in h200 data ({run}/, whose row {a}:1 is of "
               f"'NVIDIA H200': a folder holds the rows of one GPU model)")
    assert _refused([a, b]) == message
    with pytest.raises(ValueError) as err:
        claims.load_run([a, b])
    assert str(err.value) == message
    # each folder has its model: the H100's rows of another folder load beside the H200's
    c = _write(tmp_path / "reproductions" / "h100-y" / "gdn" / "fla_chunk.jsonl", [_on(H100, impl="fla_chunk")])
    assert len(collect.load_rows([a, c], "gdn")) == 2
    assert len(collect.load_rows([_write(tmp_path / "gdn" / "chunk.jsonl", [_on("cpu")])], "gdn")) == 1


def test_a_median_of_repetitions_rounded_to_the_nanosecond_is_the_rows_median(tmp_path):
    """The harness stores each repetition rounded to 1 ns and the median of the unrounded times (a
    CPU clock counting from boot is not on a 1 ns grid): such a row is valid, one 2 ns off is not."""
    times = [0.01835749 + 0.000001 * i for i in range(21)]  # medians 0.01836749 and 0.018367
    row = {**GOOD, "device_times_ms": [round(t, 6) for t in times], "device_ms": statistics.median(times)}
    assert len(collect.load_rows([_write(tmp_path / "gdn" / "chunk.jsonl", [row])], "gdn")) == 1
    row["device_ms"] += 2e-6
    with pytest.raises(ValueError, match="is not the median of device_times_ms"):
        collect.load_rows([_write(tmp_path / "other" / "chunk.jsonl", [row])], "gdn")


def test_a_byte_that_is_not_utf8_is_named_by_file_and_line(tmp_path):
    """The collect names it; so does the study's state at the run's start, which leaves the line out."""
    path = tmp_path / "gdn" / "chunk.jsonl"
    _write(path, [GOOD, GOOD])
    path.write_bytes(path.read_bytes().replace(b'"study"', b'"\xffstudy"', 1))
    with pytest.raises(ValueError, match=f"^{path}:1: not UTF-8 text \\(byte 0xff at column "):
        collect.load_rows([str(path)], "gdn")
    from kernels.paper import provenance

    assert provenance.read_envs(tmp_path, "gdn") == ([GOOD["env"]], (path, 1, "not JSON"))


def test_files_without_rows_and_duplicates_across_files(tmp_path):
    blank = _write(tmp_path / "gdn" / "chunk.jsonl", ["", "  "])
    with pytest.raises(ValueError, match=f"^{blank}: no rows"):
        collect.load_rows([blank], "gdn")
    a = _write(tmp_path / "a" / "chunk.jsonl", [GOOD])
    b = _write(tmp_path / "b" / "chunk.jsonl", [{**GOOD, "status": "error", "times_ms": [], "median_ms": None,
                                                 "device_times_ms": [], "device_ms": None, "error": "RuntimeError: x",
                                                 "env": {**GOOD["env"], "gpu_uuid": "y"}}])
    with pytest.raises(ValueError, match=f"^{b}:1: same case as {a}:1"):
        collect.load_rows([a, b], "gdn")
    other = _write(tmp_path / "c" / "chunk.jsonl", [{**GOOD, "seqlen": GOOD["seqlen"] * 2}])
    assert len(collect.load_rows([a, other], "gdn")) == 2


def test_the_committed_rows_are_valid():
    for study in STUDIES:
        paths = sorted(str(p) for p in (ROOT / "data" / "raw" / "h200" / study).glob("*.jsonl"))
        assert len(collect.load_rows(paths, study)) > 0


def test_each_committed_second_run_is_one_run_of_the_code_of_some_committed_study():
    """Each second run that config reproduce.committed names holds valid rows, all of one run (one
    commit, one GPU), and it is of the code that measured at least one study of its GPU folder
    (the studies the check compares, kernels.paper.provenance.same_code)."""
    from kernels.paper import provenance

    second = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["reproduce"]["committed"]
    for gpu, folder in [(gpu, f) for gpu, fs in second.items() for f in ([fs] if isinstance(fs, str) else fs)]:
        runs, same = set(), []
        for study in STUDIES:
            paths = sorted(str(p) for p in (ROOT / folder / study).glob("*.jsonl"))
            if not paths:
                continue
            got = collect.load_rows(paths, study)
            runs |= {(r["env"]["git_commit"], r["env"].get("gpu_uuid")) for r in got}
            if provenance.same_code(provenance.code_identity(provenance.row_envs(ROOT / "data" / "raw" / gpu, study)),
                                    provenance.code_identity([r["env"] for r in got])):
                same.append(study)
        assert len(runs) == 1, (folder, runs)
        assert same, f"{folder} is of the code of none of data/raw/{gpu}/'s studies"


def test_committed_rows_carry_the_roles_the_config_gives_them():
    """Each committed row carries the roles of its case in the sweep section (those that
    :func:`kernels.paper.collect.with_roles` gives a row measured without them), and the kernel
    breakdowns sit on the rows of role profile."""
    for study in STUDIES:
        section = yaml.safe_load((ROOT / "config" / "studies" / f"{study}.yaml").read_text())[study]["sweep"]
        paths = sorted(str(p) for p in (ROOT / "data" / "raw" / "h200" / study).glob("*.jsonl"))
        got = collect.load_rows(paths, study)
        assert all(r[rows.ROLES] for r in got)
        bare = [{k: v for k, v in r.items() if k != rows.ROLES} for r in got]
        assert [r[rows.ROLES] for r in collect.with_roles(bare, study, section)] == [r[rows.ROLES] for r in got]
        if study == "gdn":
            assert all(("profile" in r["roles"]) == ("kernels" in r) for r in got if r["impl"] != "naive")
            chunk = [r for r in got if r["impl"] == "chunk" and r["pass"] == "fwd" and r["batch"] == 4
                     and not r.get("value_heads")]
            assert [r["roles"] for r in chunk] == [["main", "profile", "published"]]
        if study == "flex":
            assert {"masks", "score_mods"} <= {role for r in got for role in r["roles"]}


def test_rows_keep_their_roles_and_unknown_cases_get_none():
    row = {"study": "gdn", "impl": "chunk", "pass": "fwd", "dtype": "bfloat16", "head_dim": 128, "batch": 3,
           "seqlen": 3, "heads": 3, "num_seqs": 3, "varlen": False}
    section = yaml.safe_load((ROOT / "config" / "studies" / "gdn.yaml").read_text())["gdn"]["sweep"]
    assert collect.with_roles([row], "gdn", section)[0][rows.ROLES] == []
    assert collect.with_roles([{**row, "roles": ["x"]}], "gdn", section)[0][rows.ROLES] == ["x"]
    assert rows.case_id({**row, "roles": ["x"]}) == rows.case_id(row)  # roles are not part of a case


@pytest.mark.parametrize("study", yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"])
def test_row_schemas_accept_every_configured_case(study):
    """Every case a study's sweep and smoke run make, as a row, is valid, and its fields are case fields."""
    import importlib

    mod = importlib.import_module(f"kernels.{study}.study")
    section = yaml.safe_load((ROOT / "config" / "studies" / f"{study}.yaml").read_text())[study]
    schema = rows.row_schema(study)
    required = set(checks.schema_at(schema)["required"])
    assert set(mod.SHAPE_FIELDS) <= required
    env = {"gpu_name": "x", "torch": "x", "triton": "x", "python": "x", "git_commit": "x"}
    for run in ("sweep", "smoke"):
        for impl in section[run]["impls"]:
            for case in mod.cases(section[run], impl):
                assert not set(case) & rows.measured_fields(study), case
                row = {**_row(study, impl, case, status="unsupported", error="x"), "env": env}
                assert checks.schema_error(row, schema) is None, (case, checks.schema_error(row, schema))


# ----------------------------------------------------------------------------
# config


CONFIG_CASES = {
    # file, text to replace, replacement, message
    "flex_documents": ("config/studies/flex.yaml", "documents: [2, 8, 64]", "documents: [2, 8, 9000]",
                       "config/studies/flex.yaml: flex.sweep.groups[0].masks[2].documents: 9000 is more than "
                       "seqlen 8192 of the group's shapes (documents <= seqlen)"),
    "flex_prefix": ("config/studies/flex.yaml", "prefix: [1024, 4096]", "prefix: [1024, 9000]",
                    "config/studies/flex.yaml: flex.sweep.groups[0].masks[4].prefix: 9000 is more than seqlen 8192"),
    "flex_misspelt": ("config/studies/flex.yaml", "{mask: window, window: [256, 512",
                      "{mask: window, windw: [256, 512",
                      "config/studies/flex.yaml: flex.sweep.groups[0].masks[1].windw: unknown key (expected one of: "
                      "doc_dist, documents, mask, prefix, score_mod, window)"),
    "flex_heads": ("config/studies/flex.yaml", "heads: [[16, 4]]", "heads: [[16, 3]]",
                   "config/studies/flex.yaml: flex.sweep.groups[10].heads: 16 heads are not a multiple of 3 kv_heads"),
    "flex_unused_knob": ("config/studies/flex.yaml", "{mask: causal, score_mod: [alibi",
                         "{mask: causal, window: 64, score_mod: [alibi",
                         "config/studies/flex.yaml: flex.sweep.groups[3].masks[0].window: mask causal does not use "
                         "window"),
    "swiglu_misspelt": ("config/studies/swiglu.yaml", "dtypes: [float16, float32]", "dtype: [float16, float32]",
                        "config/studies/swiglu.yaml: swiglu.sweep.groups[4].dtype: unknown key"),
    "swiglu_gemm_impl": ("config/studies/swiglu.yaml", "impls: [eager, triton, seed, liger, copy]\n",
                         "impls: [eager, triton, seed, liger, copy, matmul]\n",
                         "config/studies/swiglu.yaml: swiglu.sweep.groups[0].impls: impl 'matmul' in series 'grid' "
                         "needs gemm_in shapes"),
    "swiglu_two_hidden": ("config/studies/swiglu.yaml", "hidden: [8192]\n", "hidden: [8192, 4096]\n",
                          "config/studies/swiglu.yaml: swiglu.sweep.groups[1].hidden: numel_log2 takes one hidden"),
    "swiglu_flat_rows": ("config/studies/swiglu.yaml", "hidden: [8192]\n", "hidden: [14336]\n",
                         # the roles' check meets the bad group first (swiglu.study.check_config), without its key
                         "config/studies/swiglu.yaml: swiglu.numel_log2: 2**16 elements is not a "
                         "whole number of rows of 14336"),
    "swiglu_two_shapes": ("config/studies/swiglu.yaml", "hidden: [8192]\n", "hidden: [8192]\n        tokens: [4]\n",
                          "config/studies/swiglu.yaml: swiglu.sweep.groups[1]: give exactly one of: shapes; "
                          "tokens + hidden; numel_log2 + hidden"),
    "gdn_varlen": ("config/studies/gdn.yaml", "{num_seqs: 32, seqlen: 32768", "{num_seqs: 40000, seqlen: 32768",
                   "config/studies/gdn.yaml: gdn.sweep.varlen[0].num_seqs: 40000 sequences of at least one token "
                   "do not fit in seqlen 32768"),
    "gdn_smoke_misspelt": ("config/studies/gdn.yaml", "  smoke:   # 2-core CPU under TRITON_INTERPRET=1\n"
                           "    impls:", "  smoke:\n    impl:",
                           "config/studies/gdn.yaml: gdn.smoke.impl: unknown key"),
    "gdn_unknown_impl": ("config/studies/gdn.yaml", "impls: [naive, recurrent, chunk, fla_chunk, flash_qla, flashinfer]",
                         "impls: [naive, recurrent, chunk, fla_chunk, flash_qlaa, flashinfer]",  # names from the registry
                         "config/studies/gdn.yaml: gdn.sweep.impls[4]: 'flash_qlaa' is not one of ['naive', "),
    "flex_dense_in_group": ("config/studies/flex.yaml", "impls: [flex, flex_flash]\n",
                            "impls: [flex, flex_flash, sdpa_cudnn]\n",
                            "config/studies/flex.yaml: flex.sweep.groups[0].impls: sdpa_cudnn is a dense baseline"),
    "timing_reps": ("config/config.yaml", "min_reps: 5 ", "min_reps: 500 ",
                    "config/config.yaml: timing.min_reps (500) is above timing.max_reps (200)"),
    "timing_misspelt": ("config/config.yaml", "rep_ms: 100", "rep_mss: 100",
                        "config/config.yaml: timing.rep_mss: unknown key"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_config_problems_stop_before_any_job_naming_file_and_key(tree, case):
    name, old, new, message = CONFIG_CASES[case]
    path = tree / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    before = data_state(tree)
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false")
    fails(proc, message)
    # one line, not the schema
    assert "$defs" not in proc.stderr and len(proc.stderr.splitlines()) < 15, proc.stderr
    assert data_state(tree) == before and not (tree / "results").exists()


def test_config_given_on_the_command_line_is_typed_and_its_errors_name_it(tree, tmp_path):
    """--config values come as text: numbers are numbers; a bad value of --config or of a
    --configfile is blamed on it besides the config file it changes."""
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "timing={min_reps: 7}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "timing={min_reps: x}")
    fails(proc, "config/config.yaml (or --config): timing.min_reps: 'x' is not of type 'integer'")
    (tmp_path / "mine.yaml").write_text("gdn:\n  sweep:\n    dtype: float8\n")
    proc = snakemake(tree, "-n", "--cores", "1", "--configfile", str(tmp_path / "mine.yaml"), "--config", "measure=false")
    fails(proc, f"config/studies/gdn.yaml (or {tmp_path / 'mine.yaml'}): gdn.sweep.dtype: 'float8' is not one of")


@pytest.mark.slow
def test_the_paper_quotes_the_timing_settings_the_rows_were_timed_with(tree, tmp_path):
    """A render under other timing settings than the committed rows' (a --configfile) quotes the
    rows' settings, which their fingerprints prove, and says every study's rows were timed with
    them; a study whose rows carry another timing digest is named as timed with other settings."""
    numbers = tree / "paper" / "generated" / "numbers.tex"
    rows_reps = yaml.safe_load((tree / "config" / "config.yaml").read_text())["timing"]["min_reps"]
    (tmp_path / "mine.yaml").write_text(f"timing:\n  min_reps: {rows_reps + 2}\n")
    render = ("paper/generated/numbers.tex", "--cores", "2", "--configfile", str(tmp_path / "mine.yaml"),
              "--config", "measure=false")
    proc = snakemake(tree, *render)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = numbers.read_text()
    assert f"\\newcommand{{\\TimingMinReps}}{{{rows_reps}}}" in text and "\\newcommand{\\TimingRowsNote}{}" in text
    for path in (tree / "data" / "raw" / "h200" / "tensorcore").glob("*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            row["env"]["fingerprint_parts"]["timing"] = "0" * 16
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    proc = snakemake(tree, *render)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = numbers.read_text()
    assert f"\\newcommand{{\\TimingMinReps}}{{{rows_reps}}}" in text
    assert "The rows of tensor cores were timed with other settings than these" in text


def test_a_run_of_a_subset_of_the_studies_makes_no_paper(tree):
    """config studies naming some of the studies: their tidy tables, figures and tables, no paper
    (it needs every study), no paper-wide macros, no second-run check; the paper cannot be asked for."""
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "studies=[swiglu, flex]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("config studies leaves out gdn, longctx, tensorcore: this run makes the tidy tables, figures and "
            "tables of swiglu, flex, and no paper") in proc.stderr
    assert "output: results/tidy/flex.csv" in proc.stdout and "output: results/tidy/gdn.csv" not in proc.stdout
    for absent in ("rule paper:", "rule numbers:", "rule reproduce:", "rule provenance:"):
        assert absent not in proc.stdout
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "studies=[swiglu, flex]", "--",
                     "paper/main.pdf")
    fails(proc, "No rule to produce paper/main.pdf")


def test_a_study_without_its_schema_stops_before_any_job(tree):
    (tree / "workflow" / "schemas" / "gdn.schema.yaml").unlink()
    fails(snakemake(tree, "-n", "--cores", "1", "--config", "measure=false"),
          "study gdn (config key 'studies') has no schema workflow/schemas/gdn.schema.yaml")


def test_a_study_schema_without_its_rows_is_refused(tmp_path, monkeypatch):
    (tmp_path / "toy.schema.yaml").write_text("$defs: {}\n")
    monkeypatch.setattr(rows, "SCHEMAS", tmp_path)
    with pytest.raises(ValueError, match=r"study 'toy' has no row schema .*toy\.schema\.yaml#/\$defs/row"):
        rows.row_schema("toy")


# ----------------------------------------------------------------------------
# the paper build and the logs


PAPER = r"""\documentclass{article}
\input{generated/numbers.tex}
\begin{document}
Rows: \Rows{}; see \cite{ref}.
\bibliographystyle{plain}
\bibliography{references}
\end{document}
"""


@pytest.fixture
def paper(tmp_path, monkeypatch):
    """A small paper (a generated input, a citation: bibtex runs) in tmp_path/paper."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARTIFACT_TMPDIR", str(tmp_path / ".tmp"))
    (tmp_path / "paper" / "generated").mkdir(parents=True)
    (tmp_path / "paper" / "main.tex").write_text(PAPER)
    (tmp_path / "paper" / "references.bib").write_text("@misc{ref, title={A Title}, author={Ann Author}, year={2020}}\n")
    (tmp_path / "paper" / "generated" / "numbers.tex").write_text("\\newcommand{\\Rows}{42}\n")
    return [f"paper/{name}" for name in ("main.tex", "references.bib", "generated/numbers.tex")]


def _pdf_text(path):
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout


def test_leftover_jobs_are_this_folders_and_their_children(tmp_path):
    """A job script or a measurement's child process working in the folder, and the processes
    descended from one (wherever they work); not another folder's job, nor an unrelated process."""
    folder, other, proc = tmp_path / "run", tmp_path / "other", tmp_path / "proc"
    folder.mkdir()
    other.mkdir()
    for pid, ppid, cwd, cmd in ((10, 1, folder, "python .snakemake/scripts/tmpa.measure.py"),
                                (11, 10, other, "python -c x"), (12, 11, other, "nvcc"),
                                (20, 1, other, "python .snakemake/scripts/tmpb.measure.py"),
                                (30, 1, folder, "vim Snakefile"),
                                (40, 1, folder, "python -m kernels.core.children")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(cmd.replace(" ", "\0").encode() + b"\0")
        (proc / str(pid) / "status").write_text(f"Name:\tpython\nPPid:\t{ppid}\n")
        (proc / str(pid) / "cwd").symlink_to(cwd)
    (proc / "50").mkdir()  # ended while read
    assert checks.leftover_jobs(folder, proc) == [(10, "python .snakemake/scripts/tmpa.measure.py"),
                                                  (11, "python -c x"), (12, "nvcc"),
                                                  (40, "python -m kernels.core.children")]
    assert checks.leftover_jobs(folder, tmp_path / "none") == []


def test_after_a_killed_run_the_next_names_its_jobs_still_running(tree):
    """The lock a killed run left (its output paper/main.pdf): the next run, which Snakemake
    refuses, first lists the jobs of this folder still running (PID and command line) and their
    children, or says that none is; a dry run, which Snakemake does not refuse, says nothing."""
    locks = tree / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("paper/main.pdf\n")
    proc = snakemake(tree, "--cores", "1", "--config", "measure=false")
    fails(proc, "A Snakemake lock is in .snakemake/locks/ and no job of a run of this folder is running on this "
                "host", "Directory cannot be locked")
    assert "Snakemake lock" not in snakemake(tree, "-n", "--cores", "1", "--config", "measure=false").stderr
    script = tree / ".snakemake" / "scripts" / "tmpleft.reproduce.py"
    script.parent.mkdir(parents=True)
    script.write_text("import subprocess, sys\n"
                      "subprocess.run([sys.executable, '-c', 'import time; time.sleep(120)'])\n")
    job = subprocess.Popen([sys.executable, ".snakemake/scripts/tmpleft.reproduce.py"], cwd=tree)
    try:
        for _ in range(100):  # until its child has started
            if checks.leftover_jobs(tree)[1:]:
                break
            time.sleep(0.1)
        proc = snakemake(tree, "--cores", "1", "--config", "measure=false")
        child = checks.leftover_jobs(tree)[1][0]
        fails(proc, f"Jobs of a Snakemake run of this folder are still running (PID {job.pid}: ",
              f"stop them (kill {job.pid} {child}), then run snakemake --unlock")
    finally:
        job.kill()
        job.wait()


@pytest.mark.skipif(not shutil.which("latexmk") or not shutil.which("pdftotext"), reason="needs TeX and poppler")
def test_a_killed_paper_build_does_not_wedge_the_next(paper, tmp_path):
    out = tmp_path / "paper" / "main.pdf"
    latex.build_paper(paper[0], str(out), paper)
    # what a build killed during bibtex leaves: an empty main.aux and a partial PDF in its
    # folder, and (from builds beside main.tex) LaTeX files next to the sources
    scratch = next(latex.paper_scratch(out).rglob("main.tex")).parent
    (scratch / "main.aux").write_text("")
    (scratch / "main.pdf").write_bytes(b"%PDF-1.5 partial")
    for name in ("main.aux", "main.bbl"):
        (tmp_path / "paper" / name).write_text("\\bibitem{stale} stale\n")
    latex.build_paper(paper[0], str(out), paper)
    text = _pdf_text(out)
    assert "Rows: 42; see [1]" in text and "Ann Author" in text and "stale" not in text
    assert out.read_bytes()[:4] == b"%PDF"
    assert "Output written on main.pdf" in (tmp_path / "paper" / "main.log").read_text()


@pytest.mark.skipif(not shutil.which("latexmk"), reason="needs TeX")
def test_a_paper_whose_box_warning_prints_a_font_byte_builds(paper, tmp_path):
    """LaTeX prints an underfull box's text in its font encoding (T1's Ö is the byte 0xd6, not UTF-8)."""
    tex = PAPER.replace(r"\begin{document}", "\\usepackage[T1]{fontenc}\n\\begin{document}")
    (tmp_path / "paper" / "main.tex").write_text(tex.replace("Rows:", r"\"O\break Rows:"))
    out = tmp_path / "paper" / "main.pdf"
    latex.build_paper(paper[0], str(out), paper)
    assert out.read_bytes()[:4] == b"%PDF" and "Underfull" in (tmp_path / "paper" / "main.log").read_text()


@pytest.mark.skipif(not shutil.which("latexmk"), reason="needs TeX")
def test_a_failed_paper_build_leaves_the_pdf_as_it_was(paper, tmp_path):
    out = tmp_path / "paper" / "main.pdf"
    latex.build_paper(paper[0], str(out), paper)
    built = out.read_bytes()
    (tmp_path / "paper" / "main.tex").write_text(PAPER.replace(r"\Rows{}", r"\NoSuchMacro{}"))
    with pytest.raises(RuntimeError, match="latexmk failed"):
        latex.build_paper(paper[0], str(out), paper)
    assert out.read_bytes() == built


def test_an_uncaught_exception_goes_to_the_log(tmp_path):
    script = ("from kernels.core.logs import setup_logging\n"
              f"setup_logging({str(tmp_path / 'rule.log')!r})\n"
              "raise ValueError('data/raw/x.jsonl:3: bad row')\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1
    log = (tmp_path / "rule.log").read_text()
    assert "Traceback (most recent call last)" in log and "ValueError: data/raw/x.jsonl:3: bad row" in log
    assert proc.stderr.count("Traceback") == 1  # on the console once, as before


def test_a_study_that_starts_cuda_on_import_is_refused_before_the_lease(monkeypatch):
    """A measurement job imports its study before its GPU lease sets CUDA_VISIBLE_DEVICES: a
    study whose import started CUDA would measure on whatever GPU CUDA saw first."""
    import importlib

    import torch

    study = importlib.import_module("kernels.gdn.study")
    checks.require_no_cuda_yet(study)  # no study starts CUDA when imported
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="kernels.gdn.study initialised CUDA before the job's GPU lease"):
        checks.require_no_cuda_yet(study)


# ----------------------------------------------------------------------------
# per-study measurement: stale studies only, replaced whole, named overwrites


def _measure_jobs(proc) -> dict[str, int]:
    """{study: measurement jobs} of a dry run's plan (the 'output: data/raw/h200/<study>/...' lines)."""
    found: dict[str, int] = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        line = line.strip()
        if line.startswith("output: data/raw/h200/") and line.endswith(".jsonl"):
            study = line.split("/")[3]
            found[study] = found.get(study, 0) + 1
    return found


def test_a_measuring_dry_run_lists_exactly_the_stale_studies(tree):
    """On a CPU host, `snakemake -n --config measure=true gpu=h200` plans the jobs of the studies
    whose committed rows are not current, every implementation of each, and no other; a change of a
    study's kernel makes it stale, a changed docstring does not."""
    from kernels.paper import provenance

    config = provenance.load_config(tree)
    stale = {s.study for s in provenance.states(tree / "data" / "raw" / "h200", config, root=tree)
             if s.state != provenance.CURRENT}
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=true", "gpu=h200")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _measure_jobs(proc) == {s: len(config[s]["sweep"]["impls"]) for s in stale}
    assert f"Measuring into data/raw/h200/: {', '.join(s for s in config['studies'] if s in stale)}" in proc.stderr
    chunk = tree / "kernels" / "gdn" / "chunk.py"
    chunk.write_text(chunk.read_text().replace('"""', '"""A reworded docstring. ', 1))
    assert set(_measure_jobs(snakemake(tree, "-n", "--cores", "1", "--config", "measure=true",
                                       "gpu=h200"))) == stale
    chunk.write_text(chunk.read_text() + "\nEXTRA_CONSTANT = 1\n")
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=true", "gpu=h200")
    assert set(_measure_jobs(proc)) == stale | {"gdn", "longctx"}   # the long-context study runs GDN's kernels
    # the record of why, newer than the rows, is what makes Snakemake run the jobs
    assert "reason: Updated input files: .tmp/stale/data/raw/h200/gdn.json" in proc.stdout + proc.stderr
    commit = json.loads((tree / GDN_CHUNK).read_text().splitlines()[0])["env"]["git_commit"][:7]
    assert f"rows measured at {commit}" in (tree / ".tmp/stale/data/raw/h200/gdn.json").read_text()


def test_a_measuring_run_says_it_unsets_triton_autotuning_picks_on_disk(tree):
    """Triton's on-disk autotuning picks (TRITON_CACHE_AUTOTUNING) are off for a measuring run's
    jobs (TRITON_CACHE_AUTOTUNING popped from the environment they inherit), which it says; a
    render says nothing."""
    env = {"TRITON_CACHE_AUTOTUNING": "1"}
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=true", "gpu=h200", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TRITON_CACHE_AUTOTUNING is unset for this run's jobs" in proc.stderr
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", env=env)
    assert proc.returncode == 0 and "TRITON_CACHE_AUTOTUNING" not in proc.stderr, proc.stderr[-3000:]


def test_a_study_named_by_measure_is_measured_whatever_its_state(tree):
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=[tensorcore]", "gpu=h200")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _measure_jobs(proc) == {"tensorcore": 2}
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=[tensorcores]", "gpu=h200")
    fails(proc, "config measure=['tensorcores']: ['tensorcores'] not among the studies of this run")


def test_a_measuring_run_on_the_cpu_writes_under_results_never_into_data(tree):
    """Rows measured on the CPU are never committed data: a measuring run with gpu=cpu (outside
    the smoke and quick profiles) measures into results/cpu/raw/cpu/, so data/raw/ keeps the one
    folder of committed rows that a plain render reads."""
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=[tensorcore]", "gpu=cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "output: results/cpu/raw/cpu/tensorcore/bf16.jsonl" in out and "data/raw/cpu" not in out
    assert "Measuring into results/cpu/raw/cpu/" in out


def test_each_studys_second_run_comes_from_one_of_the_committed_folders(tree):
    """config reproduce.committed lists one folder per second run: the check reads each study's
    rows from the folder holding them, and refuses a study that two of them hold, naming both."""
    folders = yaml.safe_load((tree / "config" / "config.yaml").read_text())["reproduce"]["committed"]["h200"]
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "-R", "reproduce")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x.strip() for x in (proc.stdout + proc.stderr).splitlines()
              if x.strip().startswith("input: data/reproductions/")]
    read = {"/".join(p.split("/")[:3]) for p in line.removeprefix("input: ").split(", ")
            if p.startswith("data/reproductions/")}
    assert read == set(folders) and len(folders) > 1
    study = next(p.parent.name for p in (tree / folders[0]).glob("*/*.jsonl"))
    shutil.copytree(tree / folders[0] / study, tree / "data" / "reproductions" / "again" / study)
    both = "[" + ", ".join([*folders, "data/reproductions/again"]) + "]"
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", f"reproduce={{committed: {{h200: {both}}}}}")
    fails(proc, f"config reproduce.committed.h200: {folders[0]}/{study}/ and data/reproductions/again/{study}/ both "
                f"hold a second run of {study}; name one of them")


def _second_run_folders(tree) -> list[str]:
    """The committed second runs' folders of the committed config (``reproduce.committed.h200``)."""
    folders = yaml.safe_load((tree / "config" / "config.yaml").read_text())["reproduce"]["committed"]["h200"]
    return [folders] if isinstance(folders, str) else folders


def _second_runs_of_their_code(tree) -> tuple[set[str], set[str]]:
    """The studies of the committed config, and those whose committed second run (config
    ``reproduce.committed.h200``) is of the code of their committed rows."""
    from kernels.paper import provenance

    config = provenance.load_config(tree)
    same = {s for s in config["studies"] for folder in _second_run_folders(tree)
            if provenance.same_code(provenance.code_identity(provenance.row_envs(tree / "data" / "raw" / "h200", s)),
                                    provenance.code_identity(provenance.row_envs(tree / folder, s)))}
    return set(config["studies"]), same


def _compared(proc) -> set[str]:
    """The studies whose second runs a dry run's rule ``reproduce`` reads."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x.strip() for x in (proc.stdout + proc.stderr).splitlines()
              if x.strip().startswith("input: data/reproductions/")]
    return {p.split("/")[3] for p in line.removeprefix("input: ").split(", ") if p.startswith("data/reproductions/")}


def test_a_measuring_run_compares_the_second_runs_of_the_studies_it_does_not_measure(tree):
    """A study the run measures gets new rows, which its committed second run is not of: the check
    leaves it out and still compares the other studies' committed second runs of their code."""
    _, same = _second_runs_of_their_code(tree)
    assert "tensorcore" in same and len(same) > 1
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=[tensorcore]", "gpu=h200",
                     "overwrite=[tensorcore]", "-R", "reproduce")
    assert _compared(proc) == same - {"tensorcore"}


def test_the_check_compares_only_studies_whose_second_run_is_of_their_code(tree):
    """A committed second run of other code than its study's rows (another fingerprint) is not
    compared with them: the check reads exactly the second runs of their studies' code. The first
    configured study's second run is made one of other code here (its rows' timing part changed)."""
    folders = _second_run_folders(tree)
    from kernels.paper import provenance

    configured = provenance.load_config(tree)["studies"]
    study, folder = next((s.name, f) for f in folders for s in sorted((tree / f).iterdir()) if s.name in configured)
    for path in (tree / folder / study).glob("*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            row["env"]["fingerprint_parts"]["timing"] = "0" * 16
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    studies, same = _second_runs_of_their_code(tree)
    assert study not in same
    proc = snakemake(tree, "-n", "--cores", "1", "--config", "measure=false", "-R", "reproduce")
    assert _compared(proc) == same and same < studies
