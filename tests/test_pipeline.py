"""The whole DAG of this repository: lint and format, the GPU configuration's dry run
and the smoke run end to end to a PDF (what CI proves on every change; the committed
data rendered to the paper is tests/test_paper.py)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
STUDIES = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"]


def snakemake(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=ROOT,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    return proc


def test_lint_is_clean():
    proc = snakemake("--lint", "--config", "measure=true", "gpu=h200", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflow_is_formatted_by_snakefmt():
    """The Snakefile and workflow/rules/*.smk as snakefmt writes them (fix: `snakefmt Snakefile workflow`)."""
    proc = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "--diff", "Snakefile", "workflow"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]


def _impls(node):
    """Every implementation named under an ``impls`` key of a study's config."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from value if key == "impls" else _impls(value)
    elif isinstance(node, list):
        for item in node:
            yield from _impls(item)


def test_gpu_configuration_dry_run():
    """On a CPU host, the H200 configuration plans every measurement then every output
    (forced: with every raw file committed, nothing would be out of date)."""
    proc = snakemake("-n", "--forceall", "--config", f"measure=[{','.join(STUDIES)}]", "gpu=h200")
    out = proc.stdout
    for study in STUDIES:
        impls = set(_impls(yaml.safe_load((ROOT / "config" / "studies" / f"{study}.yaml").read_text())))
        assert impls and all(f"data/raw/h200/{study}/{impl}.jsonl" in out for impl in impls), study
    assert "rule paper:" in out or "localrule paper:" in out
    # one compile-ahead job per study, whose answers its jobs of config key compile_ahead read
    ahead = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["compile_ahead"]["impls"]
    assert out.count("rule compile_ahead:") == len(ahead) == 3
    jobs = out.split("\n\n")
    for study, impls in ahead.items():
        assert f"output: .tmp/compile_ahead/data/raw/h200/{study}.json" in out, study
        for impl in impls:
            [job] = [j for j in jobs if f"output: data/raw/h200/{study}/{impl}.jsonl" in j]
            assert f"input: .tmp/compile_ahead/data/raw/h200/{study}.json" in job, (study, impl)
    [job] = [j for j in jobs if "output: data/raw/h200/swiglu/eager.jsonl" in j]
    assert "compile_ahead" not in job


def test_quick_profile_dry_run_on_the_gpu_configuration():
    """The quick profile plans each study's quick implementations into results/quick/, then the
    reproduction check against the committed rows of the current studies only (a stale study's rows
    are of other code); it measures nothing into data/ and builds no PDF."""
    from kernels.paper import provenance

    current = {s.study for s in provenance.states(ROOT / "data" / "raw" / "h200", provenance.load_config())
               if s.state == provenance.CURRENT}
    assert current
    proc = snakemake("-n", "--forceall", "--profile", "profiles/quick", "--config", "measure=true", "gpu=h200")
    out = proc.stdout
    for study in STUDIES:
        quick = yaml.safe_load((ROOT / "config" / "studies" / f"{study}.yaml").read_text())[study]["quick"]
        for impl in quick["impls"]:
            assert f"output: results/quick/raw/h200/{study}/{impl}.jsonl" in out, (study, impl)
            # the reference, an input, where the committed rows are of today's code
            assert (f"data/raw/h200/{study}/{impl}.jsonl" in out) == (study in current), (study, impl)
    assert "output: data/raw" not in out and "paper/main.pdf" not in out
    assert "rule reproduce:" in out or "localrule reproduce:" in out
    assert "results/quick/reproduction.txt" in out
    assert "output: .tmp/compile_ahead/results/quick/raw/h200/gdn.json" in out


@pytest.mark.slow
def test_smoke_run_end_to_end():
    """Every measurement rule on the CPU at tiny sizes, then the full PDF."""
    smoke = ROOT / "results" / "smoke"
    shutil.rmtree(smoke, ignore_errors=True)
    snakemake("--profile", "profiles/smoke", "--cores", "2")
    raw = sorted((smoke / "raw" / "cpu").glob("*/*.jsonl"))
    assert {p.parent.name for p in raw} == set(STUDIES)
    rows = [json.loads(line) for p in raw for line in p.read_text().splitlines()]
    assert not [r for r in rows if r["status"] == "error"]
    # the source kernel as published stores fp16 whatever the input: its fp32 rows are wrong
    wrong = {(r["impl"], r["dtype"]) for r in rows if r["status"] == "wrong"}
    assert wrong <= {("seed", "float32")}, wrong
    assert sum(r["status"] == "ok" for r in rows) > 0
    figures = sorted((smoke / "figures").glob("*.pdf"))
    assert len(figures) >= 6
    pdf = smoke / "paper" / "main.pdf"
    assert pdf.stat().st_size > 0
    if shutil.which("pdffonts"):
        fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True).stdout
        rows = fonts.splitlines()[2:]
        assert rows and all(line.split()[-5] == "yes" for line in rows), fonts  # every font embedded
    again = snakemake("--profile", "profiles/smoke", "--cores", "2", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_readme_maps_every_figure_and_table():
    """The README's table names every figure and table a study registers."""
    import importlib

    readme = (ROOT / "README.md").read_text()
    for study in STUDIES:
        report = importlib.import_module(f"kernels.{study}.report")
        for name in [*report.FIGURES, *report.TABLES]:
            assert f"`{name}`" in readme, f"{name} missing from README.md"
