"""The Snakemake DAG: config validation, modes, and adding an experiment.

These tests copy the workflow into a temporary folder with only the toy study
of tests/toy_study/ (the way a researcher adds an experiment: a study module,
a report module, a config file and its schema, a row schema) and run Snakemake there.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "toy_study"


def snakemake(cwd, *args, check=True):
    """Run Snakemake in ``cwd``; its jobs import ``kernels`` from that copy."""
    env = dict(os.environ, PYTHONPATH=str(cwd))
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
    for name in ("Snakefile", "workflow", "profiles", "paper"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, wf / name)
    shutil.copytree(ROOT / "kernels", wf / "kernels",
                    ignore=shutil.ignore_patterns("__pycache__", "swiglu", "flex", "gdn"))
    (wf / "kernels" / "toy").mkdir()
    (wf / "kernels" / "toy" / "__init__.py").touch()
    shutil.copy(TOY / "study.py", wf / "kernels" / "toy" / "study.py")
    shutil.copy(TOY / "report.py", wf / "kernels" / "toy" / "report.py")
    (wf / "config" / "studies").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "smoke.yaml", wf / "config" / "smoke.yaml")
    shutil.copy(TOY / "toy.yaml", wf / "config" / "studies" / "toy.yaml")
    shutil.copy(TOY / "toy.schema.yaml", wf / "workflow" / "schemas" / "toy.schema.yaml")
    shutil.copy(TOY / "toy.row.yaml", wf / "workflow" / "schemas" / "rows" / "toy.yaml")
    cfg = (ROOT / "config" / "config.yaml").read_text()
    (wf / "config" / "config.yaml").write_text(cfg.replace("studies: [swiglu, flex, gdn]", "studies: [toy]"))
    (wf / "paper" / "main.tex").write_text(TOY_PAPER)
    return wf


#: The paper of the toy workflow: the real one quotes the real studies' numbers.
TOY_PAPER = r"""\documentclass{article}
\usepackage{graphicx}
\usepackage{booktabs}
\usepackage{siunitx}
\graphicspath{{../figures/}}
\newcommand{\fitgraphics}[1]{\includegraphics[width=\linewidth]{#1}}
\newcommand{\fitwidth}[1]{#1}
\input{generated/numbers.tex}
\begin{document}
Rows: \ToyRows{} on \EnvGpuName.
\input{generated/toy_floats.tex}
\input{generated/coverage.tex}
\end{document}
"""


def test_misspelt_top_level_key_fails_naming_it(toy_workflow):
    proc = snakemake(toy_workflow, "-n", "--config", "mesure=true", check=False)
    assert proc.returncode != 0
    assert "mesure" in proc.stdout + proc.stderr


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


def test_render_mode_never_measures(toy_workflow):
    raw = toy_workflow / "data" / "raw" / "testgpu" / "toy"
    raw.mkdir(parents=True)
    row = {"study": "toy", "impl": "scale", "pass": "fwd", "dtype": "float32", "numel": 4,
           "times_ms": [1.0, 2.0], "median_ms": 1.5, "bytes": 32, "flops": 4, "status": "ok",
           "error": None, "env": {"gpu_name": "Test GPU", "torch": "x", "triton": "y",
                                  "python": "3", "git_commit": "abc"}}
    (raw / "scale.jsonl").write_text(json.dumps(row) + "\n")
    # the code is newer than the data: a render must still not measure
    (toy_workflow / "kernels" / "toy" / "study.py").touch()
    proc = snakemake(toy_workflow, "-n", "--config", "measure=false")
    assert "rendering from the committed data in data/raw/testgpu/" in proc.stderr
    assert "measure " not in proc.stdout and "rule measure" not in proc.stdout
    snakemake(toy_workflow, "--config", "measure=false", "--", "figures/toy_time.pdf",
              "paper/generated/numbers.tex")
    assert (toy_workflow / "figures" / "toy_time.pdf").stat().st_size > 0
    assert r"\newcommand{\EnvGpuName}{Test GPU}" in (toy_workflow / "paper" / "generated" / "numbers.tex").read_text()


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
