"""The Snakemake DAG: config validation, modes, and adding an experiment.

These tests copy the workflow into a temporary folder with only the toy study
of tests/toy_study/ (the way a researcher adds an experiment: a package with its
registry, study and report modules, a config file and its schema with its rows')
and run Snakemake there.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "toy_study"
#: The studies of the workflow, left out of the toy copy.
STUDIES = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"]


def snakemake(cwd, *args, check=True):
    """Run Snakemake in ``cwd``; its jobs import ``kernels`` from that copy."""
    # the copy first; a PYTHONPATH that brings Snakemake itself (a GPU host's staged packages) stays
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture
def toy_workflow(tmp_path):
    """A copy of the workflow whose only study is the toy one."""
    wf = tmp_path / "wf"
    wf.mkdir()
    for name in ("Snakefile", "workflow", "profiles", "paper", "pyproject.toml"):
        src = ROOT / name
        if src.is_dir():  # the sources only: outputs a render left here are not the copy's
            shutil.copytree(src, wf / name, ignore=shutil.ignore_patterns("generated", "*.pdf", "__pycache__"))
        else:
            shutil.copy(src, wf / name)
    shutil.copytree(ROOT / "kernels", wf / "kernels",
                    ignore=shutil.ignore_patterns("__pycache__", *STUDIES))
    (wf / "kernels" / "toy").mkdir()
    (wf / "kernels" / "toy" / "__init__.py").touch()
    for module in TOY.glob("*.py"):
        shutil.copy(module, wf / "kernels" / "toy" / module.name)
    (wf / "config" / "studies").mkdir(parents=True)
    for name in ("smoke.yaml", "quick.yaml"):
        shutil.copy(ROOT / "config" / name, wf / "config" / name)
    shutil.copy(TOY / "toy.yaml", wf / "config" / "studies" / "toy.yaml")
    shutil.copy(TOY / "toy.schema.yaml", wf / "workflow" / "schemas" / "toy.schema.yaml")
    cfg = (ROOT / "config" / "config.yaml").read_text()
    toy_cfg, n = re.subn(r"(?m)^studies: \[.*\]$", "studies: [toy]", cfg)
    assert n == 1, "config/config.yaml has no one-line 'studies: [...]'"
    (wf / "config" / "config.yaml").write_text(toy_cfg)
    (wf / "paper" / "main.tex").write_text(TOY_PAPER)
    return wf


def test_adding_a_study_touches_the_files_docs_extending_counts(toy_workflow):
    """The files the toy study adds to or changes in a copy of the workflow (its package counted once)
    are as many as docs/extending.md says a new study touches."""
    touched = set()
    for path in toy_workflow.rglob("*"):
        rel = path.relative_to(toy_workflow)
        if not path.is_file() or "__pycache__" in rel.parts or rel.parts[0] in ("profiles",):
            continue
        original = ROOT / rel
        if not original.exists() or original.read_bytes() != path.read_bytes():
            touched.add("kernels/toy/" if rel.parts[:2] == ("kernels", "toy") else str(rel))
    text = (ROOT / "docs" / "extending.md").read_text()
    stated = re.search(r"A new study touches \*\*(\d+) files\*\*", text)
    assert stated and int(stated.group(1)) == len(touched), sorted(touched)


#: The paper of the toy workflow: the real one quotes the real studies' numbers.
TOY_PAPER = r"""\documentclass{article}
\usepackage[margin=2cm]{geometry}
\usepackage{graphicx}
\usepackage{booktabs}
\usepackage{siunitx}
\graphicspath{{../figures/}}
\newcommand{\fitgraphics}[1]{\includegraphics[width=\linewidth]{#1}}
\newcommand{\placefloat}[1]{\csname float@#1\endcsname}
\input{generated/numbers.tex}
\input{generated/toy_floats.tex}
\begin{document}
Rows: \ToyRows{} on \EnvGpuName{} (Fig.~\ref{fig:toy_time}, Table~\ref{tab:toy_table}).
\placefloat{fig:toy_time}
\placefloat{tab:toy_table}
{\small\input{generated/coverage.tex}}
\end{document}
"""


def test_misspelt_top_level_key_fails_naming_it(toy_workflow):
    proc = snakemake(toy_workflow, "-n", "--config", "mesure=true", check=False)
    assert proc.returncode != 0
    assert "mesure" in proc.stdout + proc.stderr


def test_compile_ahead_of_an_unknown_implementation_fails_naming_it(toy_workflow):
    path = toy_workflow / "config" / "config.yaml"
    text = path.read_text()
    assert "    gdn: [chunk, fla_chunk, flash_qla]\n" in text
    path.write_text(text.replace("    gdn: [chunk, fla_chunk, flash_qla]\n", "    toy: [scale, scael]\n"))
    proc = snakemake(toy_workflow, "-n", check=False)
    assert proc.returncode != 0
    assert "compile_ahead.impls.toy: ['scael']" in proc.stdout + proc.stderr


def test_misspelt_study_key_fails_naming_it(toy_workflow):
    path = toy_workflow / "config" / "studies" / "toy.yaml"
    path.write_text(path.read_text().replace("numel: [1024", "numell: [1024"))
    proc = snakemake(toy_workflow, "-n", "--profile", "profiles/smoke", check=False)
    assert proc.returncode != 0
    assert "numell" in proc.stdout + proc.stderr


def test_wrong_type_fails_naming_the_key(toy_workflow):
    proc = snakemake(toy_workflow, "-n", "--config", "smoke=yes", check=False)
    assert proc.returncode != 0
    assert "smoke" in proc.stdout + proc.stderr


def test_measurement_needs_a_gpu_limit(toy_workflow):
    proc = snakemake(toy_workflow, "-n", "--workflow-profile", "none", "--cores", "1",
                     "--configfile", "config/smoke.yaml", check=False)
    assert proc.returncode != 0
    assert "GPU limit" in proc.stdout + proc.stderr


#: A committed row of the toy study.
TOY_ROW = {"study": "toy", "impl": "scale", "pass": "fwd", "dtype": "float32", "numel": 4,
           "times_ms": [1.0, 2.0], "median_ms": 1.5, "device_times_ms": [0.5, 0.7], "device_ms": 0.6,
           "timing": {"method": "cuda-events+spin"}, "bytes": 32, "flops": 4, "status": "ok",
           "error": None, "env": {"gpu_name": "Test GPU", "torch": "x", "triton": "y",
                                  "python": "3", "git_commit": "abc"}}


def test_render_mode_never_measures(toy_workflow):
    raw = toy_workflow / "data" / "raw" / "testgpu" / "toy"
    raw.mkdir(parents=True)
    (raw / "scale.jsonl").write_text(json.dumps(TOY_ROW) + "\n")
    # the code is newer than the data: a render must still not measure
    (toy_workflow / "kernels" / "toy" / "study.py").touch()
    proc = snakemake(toy_workflow, "-n", "--config", "measure=false")
    assert "rendering from the committed data in data/raw/testgpu/" in proc.stderr
    assert "measure " not in proc.stdout and "rule measure" not in proc.stdout
    snakemake(toy_workflow, "--config", "measure=false", "--", "figures/toy_time.pdf",
              "paper/generated/numbers.tex", "paper/generated/reproduction.tex")
    assert (toy_workflow / "figures" / "toy_time.pdf").stat().st_size > 0
    assert r"\newcommand{\EnvGpuName}{Test GPU}" in (toy_workflow / "paper" / "generated" / "numbers.tex").read_text()
    assert "No second run" in (toy_workflow / "paper" / "generated" / "reproduction.tex").read_text()


def test_the_provenance_table_follows_the_fingerprints_whatever_the_files_times(toy_workflow):
    """Rows current against the toy's code; the table says so. A change to its measured code, then
    ``snakemake --touch`` (every output marked up to date): the next run still renders the table
    again, and it says stale, as ``python -m kernels.paper.provenance`` would."""
    from kernels.core.fingerprint import fingerprint

    cfg = yaml.safe_load((toy_workflow / "config" / "config.yaml").read_text())
    section = yaml.safe_load((toy_workflow / "config" / "studies" / "toy.yaml").read_text())["toy"]["sweep"]
    code = fingerprint("toy", section, cfg["timing"], toy_workflow)
    row = dict(TOY_ROW, env={**TOY_ROW["env"], "fingerprint": code["digest"], "fingerprint_parts": code["parts"],
                             "gpu_uuid": "GPU-1", "date": "2026-12-06T10:00:00+00:00"})
    raw = toy_workflow / "data" / "raw" / "testgpu" / "toy"
    raw.mkdir(parents=True)
    (raw / "scale.jsonl").write_text(json.dumps(row) + "\n")
    table = toy_workflow / "paper" / "generated" / "provenance.tex"
    target = ("--config", "measure=false", "--", "states", "provenance")  # rule all makes both
    snakemake(toy_workflow, *target)
    assert r"\newcommand{\ProvenanceCurrent}{1}" in table.read_text()

    study = toy_workflow / "kernels" / "toy" / "study.py"
    study.write_text(study.read_text() + "\nSTEP = 2  # measured code: the rows are stale now\n")
    snakemake(toy_workflow, "--touch", *target)
    again = snakemake(toy_workflow, "-n", *target)
    assert "rule provenance:" in again.stdout, again.stdout + again.stderr
    snakemake(toy_workflow, *target)
    assert r"\newcommand{\ProvenanceCurrent}{0}" in table.read_text()
    assert len(list((toy_workflow / "results" / "states").glob("*.json"))) == 1  # the earlier states' file is gone
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(snakemake(toy_workflow, "-n", *target))


@pytest.mark.parametrize("args,message", [
    (["--profile", "profiles/quick", "--config", "smoke=true", "measure=true", "gpu=cpu"],
     "smoke and quick are both true"),
    (["--config", "measure=false", "gpu=cpu", "reproduce={candidate: data/nowhere}"],
     "config reproduce.candidate: no rows in data/nowhere/"),
    (["--config", "measure=false", "gpu=cpu", "reproduce={tolerance: 2}"], "tolerance"),
])
def test_reproduction_config_errors_name_the_problem(toy_workflow, args, message):
    raw = toy_workflow / "data" / "raw" / "cpu" / "toy"  # committed rows to render from and compare with
    raw.mkdir(parents=True)
    (raw / "scale.jsonl").write_text(json.dumps(TOY_ROW) + "\n")
    proc = snakemake(toy_workflow, "-n", *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr


def test_quick_run_needs_a_quick_section(toy_workflow):
    path = toy_workflow / "config" / "studies" / "toy.yaml"
    path.write_text("\n".join(line for line in path.read_text().splitlines() if "quick" not in line) + "\n")
    proc = snakemake(toy_workflow, "-n", "--profile", "profiles/quick", "--config", "measure=true", "gpu=cpu",
                     check=False)
    assert proc.returncode != 0
    assert "config/studies/toy.yaml has no 'quick' section" in proc.stdout + proc.stderr


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.slow
def test_the_compile_ahead_job_runs_before_the_measurement_that_reads_it(toy_workflow):
    """A real run of the toy study on this host with its implementation in config key compile_ahead:
    the study's compile-ahead job runs first (on the CPU it compiles nothing and writes no answer), the measurement
    job reads its file, which is removed once read; its absence then asks for no rerun."""
    path = toy_workflow / "config" / "config.yaml"
    path.write_text(path.read_text().replace("    gdn: [chunk, fla_chunk, flash_qla]\n", "    toy: [scale]\n"))
    raw = "results/cpu/raw/cpu/toy/scale.jsonl"
    proc = snakemake(toy_workflow, "--config", "measure=true", "gpu=cpu", "--", raw)
    log = proc.stdout + proc.stderr
    assert 0 < log.index("rule compile_ahead:") < log.index("rule measure:")
    assert "input: .tmp/compile_ahead/results/cpu/raw/cpu/toy.json" in log[log.index("rule measure:"):]
    rows = _rows(toy_workflow / raw)
    assert [r["status"] for r in rows] == ["ok"] and "compile_ahead" not in rows[0]
    assert not (toy_workflow / ".tmp" / "compile_ahead" / "results" / "cpu" / "raw" / "cpu" / "toy.json").exists()
    assert (toy_workflow / "results" / "cpu" / "raw" / "cpu" / "benchmarks" / "compile_ahead_toy.tsv").exists()
    # its rows are now current: a measuring run measures nothing
    again = snakemake(toy_workflow, "-n", "--config", "measure=true", "gpu=cpu")
    assert "Measuring into results/cpu/raw/cpu/: nothing (every study is current)" in again.stderr
    assert "rule measure:" not in again.stdout + again.stderr


def _add_toy_study(wf, name):
    """A second toy study, ``name``, in the toy workflow: the toy's files with its name replaced."""
    pkg = wf / "kernels" / name
    shutil.copytree(wf / "kernels" / "toy", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (pkg / "study.py", pkg / "report.py"):
        path.write_text(path.read_text().replace('"toy"', f'"{name}"').replace("toy_", f"{name}_")
                        .replace("kernels.toy.", f"kernels.{name}.")
                        .replace('"ToyRows"', f'"{name.capitalize()}Rows"'))
    for src, dst in ((wf / "config" / "studies" / "toy.yaml", wf / "config" / "studies" / f"{name}.yaml"),
                     (wf / "workflow" / "schemas" / "toy.schema.yaml", wf / "workflow" / "schemas" / f"{name}.schema.yaml")):
        dst.write_text(src.read_text().replace("toy", name))
    cfg = wf / "config" / "config.yaml"
    assert "studies: [toy" in cfg.read_text()
    cfg.write_text(cfg.read_text().replace("studies: [toy", f"studies: [toy, {name}"))


@pytest.mark.slow
def test_the_compile_ahead_jobs_run_side_by_side_before_any_measurement(toy_workflow):
    """Two studies with an implementation in config key compile_ahead, on a host of one GPU (the
    default profile's gpu=1): both compile-ahead jobs start before either ends, and the
    measurements (the ahead ones' and a third study's, which reads no answers) get the GPU's lease
    after both (Snakemake may start one of them beside the compile-ahead jobs: it waits there)."""
    _add_toy_study(toy_workflow, "toyb")
    _add_toy_study(toy_workflow, "toyc")
    path = toy_workflow / "config" / "config.yaml"
    path.write_text(path.read_text().replace("    gdn: [chunk, fla_chunk, flash_qla]\n",
                                             "    toy: [scale]\n    toyb: [scale]\n"))
    targets = [f"results/cpu/raw/cpu/{study}/scale.jsonl" for study in ("toy", "toyb", "toyc")]
    # the priority is what puts them first: without it the scheduler's pick among jobs ready at once is a tie-break
    dry = snakemake(toy_workflow, "-n", "--config", "measure=true", "gpu=cpu", "--", *targets).stdout
    blocks = [b.split("\n\n")[0] for b in dry.split("rule ")[1:]]
    assert [("priority: 1" in b) for b in blocks if b.startswith("compile_ahead:")] == [True, True], dry
    assert not any("priority: 1" in b for b in blocks if b.startswith("measure:")), dry
    proc = snakemake(toy_workflow, "--cores", "4", "--config", "measure=true", "gpu=cpu", "--", *targets)
    log = proc.stdout + proc.stderr
    starts = [i for i in range(len(log)) if log.startswith("rule compile_ahead:", i)]
    ends = [log.index(f"Finished jobid: {jobid} (Rule: compile_ahead)")
            for jobid in (log[s:].split("jobid: ", 1)[1].split()[0] for s in starts)]
    assert len(starts) == 2 and max(starts) < min(ends), log
    assert log.count("rule measure:") == 3, log
    # a compile-ahead job writes its lease's wait when it lets go of the lease; a measurement
    # job logs when it gets its own
    released = max((toy_workflow / f"results/cpu/raw/cpu/benchmarks/compile_ahead_{s}.lease.json").stat().st_mtime
                   for s in ("toy", "toyb"))
    for study in ("toy", "toyb", "toyc"):
        text = (toy_workflow / f"results/cpu/logs/measure_{study}_scale.log").read_text()
        [stamp] = [line[:23] for line in text.splitlines() if "leased GPU" in line]
        leased = time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:]) / 1e3
        assert leased >= released - 0.01, (study, leased, released, text)
    for study in ("toy", "toyb", "toyc"):
        assert [r["status"] for r in _rows(toy_workflow / f"results/cpu/raw/cpu/{study}/scale.jsonl")] == ["ok"]


@pytest.mark.slow
def test_quick_run_checks_against_the_committed_rows(toy_workflow):
    """Two real runs of the toy study on this host: the sweep (into results/cpu/, copied to
    data/raw/cpu/ as the committed reference), then the quick profile into results/quick/. With
    one reference row made 100x faster, one made a failure and one quick row removed, the check
    catches all three."""
    (toy_workflow / "config" / "studies" / "toy.yaml").write_text(
        "toy:\n  sweep: {impls: [scale], numel: [4096, 8192, 16384, 32768, 65536]}\n"
        "  quick: {impls: [scale], numel: [4096, 8192, 16384, 32768]}\n  smoke: {impls: [scale], numel: [1024]}\n")
    measured = "results/cpu/raw/cpu/toy/scale.jsonl"  # a measuring run on the CPU writes there, never to data/raw/
    snakemake(toy_workflow, "--config", "measure=true", "gpu=cpu", "--", measured)
    shutil.copytree(toy_workflow / "results" / "cpu" / "raw" / "cpu", toy_workflow / "data" / "raw" / "cpu")
    reference = toy_workflow / "data" / "raw" / "cpu" / "toy" / "scale.jsonl"
    rows = {r["numel"]: r for r in _rows(reference)}
    assert [r["status"] for r in rows.values()] == ["ok"] * 5
    for times, median in (("times_ms", "median_ms"), ("device_times_ms", "device_ms")):
        rows[8192][times] = [t / 100 for t in rows[8192][times]]
        rows[8192][median] /= 100
    rows[16384].update(status="unsupported", times_ms=[], median_ms=None, device_times_ms=[], device_ms=None,
                       error="Unsupported: not here")
    del rows[16384]["timing"]
    _write_rows(reference, rows.values())

    quick = toy_workflow / "results" / "quick" / "raw" / "cpu" / "toy" / "scale.jsonl"
    snakemake(toy_workflow, "--profile", "profiles/quick", "--config", "measure=true", "gpu=cpu", "--",
              str(quick.relative_to(toy_workflow)))
    _write_rows(quick, [r for r in _rows(quick) if r["numel"] != 4096])
    proc = snakemake(toy_workflow, "--profile", "profiles/quick", "--config", "measure=true", "gpu=cpu")
    assert "rule measure" not in proc.stdout  # the quick rows are kept, only the check runs
    line = (toy_workflow / "results" / "quick" / "reproduction.txt").read_text().strip()
    assert line in proc.stdout  # printed at the end of the run
    assert line.startswith("NOT reproduced: ") and "missing: 1 (toy 1); status changed: 1 (toy 1)" in line
    assert line.startswith("NOT reproduced: claims: none to re-derive; ")
    table = pd.read_csv(toy_workflow / "results" / "quick" / "reproduction.csv").set_index("case")["verdict"]
    assert table["fwd float32 numel=4096"] == "missing"
    assert table["fwd float32 numel=8192"] == "slower"
    assert table["fwd float32 numel=16384"] == "status changed"
    assert "fwd float32 numel=65536" not in table  # not a quick case: out of scope
    assert not (toy_workflow / "results" / "quick" / "paper" / "main.pdf").exists()

    # the same rows as a second run of the whole sweep: the paper's paragraph states the result
    # (missing now: 4096, removed, and 65536, which the quick run does not measure)
    snakemake(toy_workflow, "--config", "measure=false", "gpu=cpu", "reproduce={candidate: results/quick/raw/cpu}",
              "--", "paper/generated/reproduction.tex")
    numbers = (toy_workflow / "paper" / "generated" / "reproduction_numbers.tex").read_text()
    assert r"\newcommand{\ReproOutcome}{not reproduced}" in numbers
    assert r"\newcommand{\ReproRowsMissing}{2}" in numbers

    # a model without committed rows (config gpu names one, as on a host whose GPU the data lacks):
    # the quick run measures and checks its claims alone, writes nothing under data/ and exits 0
    # its compile-ahead job too, which checked the folder's GPU and so stopped such a run on an H100
    path = toy_workflow / "config" / "config.yaml"
    path.write_text(path.read_text().replace("    gdn: [chunk, fla_chunk, flash_qla]\n", "    toy: [scale]\n"))
    committed = sorted(p.relative_to(toy_workflow) for p in (toy_workflow / "data").rglob("*") if p.is_file())
    proc = snakemake(toy_workflow, "--profile", "profiles/quick", "--config", "measure=true", "gpu=a100-sxm4-80gb")
    assert "rule compile_ahead:" in proc.stdout + proc.stderr
    assert "No committed rows of this model (data/raw/a100-sxm4-80gb/ does not exist" in proc.stderr
    assert "rule reproduce" not in proc.stdout
    claims = (toy_workflow / "results" / "quick" / "claims.txt").read_text()
    assert claims.startswith("Claims on this GPU (cpu; rows in results/quick/raw/a100-sxm4-80gb/)")
    assert claims.splitlines()[-1] in proc.stdout  # printed at the end of the run
    assert _rows(toy_workflow / "results" / "quick" / "raw" / "a100-sxm4-80gb" / "toy" / "scale.jsonl")
    assert sorted(p.relative_to(toy_workflow) for p in (toy_workflow / "data").rglob("*") if p.is_file()) == committed


@pytest.mark.slow
def test_added_experiment_reaches_the_paper(toy_workflow):
    """Smoke run of the toy study end to end: measured, collected, drawn, in the PDF."""
    snakemake(toy_workflow, "--profile", "profiles/smoke")
    out = toy_workflow / "results" / "smoke"
    rows = [json.loads(line) for line in (out / "raw" / "cpu" / "toy" / "scale.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert (out / "figures" / "toy_time.pdf").stat().st_size > 0
    assert "toy_time.pdf" in (out / "paper" / "generated" / "toy_floats.tex").read_text()
    if shutil.which("latexmk"):
        assert (out / "paper" / "main.pdf").stat().st_size > 0
    again = snakemake(toy_workflow, "--profile", "profiles/smoke", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    (out / "tidy" / "toy.csv").unlink()  # a deleted tidy table is made again
    again = snakemake(toy_workflow, "--profile", "profiles/smoke", "-n")
    assert "rule collect:" in again.stdout and "output: results/smoke/tidy/toy.csv" in again.stdout
