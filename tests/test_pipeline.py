"""The whole DAG of this repository: lint and format, the GPU configuration's dry run,
the committed data rendered to the paper, and the smoke run end to end to a
PDF (what CI proves on every change)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


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
    proc = snakemake("-n", "--forceall", "--config", "measure=true", "gpu=h200")
    out = proc.stdout
    for study in ("swiglu", "flex", "gdn"):
        impls = set(_impls(yaml.safe_load((ROOT / "config" / "studies" / f"{study}.yaml").read_text())))
        assert impls and all(f"data/raw/h200/{study}/{impl}.jsonl" in out for impl in impls), study
    assert "rule paper:" in out or "localrule paper:" in out


def test_quick_profile_dry_run_on_the_gpu_configuration():
    """The quick profile plans each study's quick implementations into results/quick/, then the
    reproduction check against the committed rows; it measures nothing into data/ and builds no PDF."""
    proc = snakemake("-n", "--forceall", "--profile", "profiles/quick", "--config", "measure=true", "gpu=h200")
    out = proc.stdout
    for study in ("swiglu", "flex", "gdn"):
        quick = yaml.safe_load((ROOT / "config" / "studies" / f"{study}.yaml").read_text())[study]["quick"]
        for impl in quick["impls"]:
            assert f"output: results/quick/raw/h200/{study}/{impl}.jsonl" in out, (study, impl)
            assert f"data/raw/h200/{study}/{impl}.jsonl" in out, (study, impl)  # the reference, an input
    assert "output: data/raw" not in out and "paper/main.pdf" not in out
    assert "rule reproduce:" in out or "localrule reproduce:" in out
    assert "results/quick/reproduction.txt" in out


@pytest.mark.slow
def test_committed_data_renders_to_the_paper(tmp_path):
    """The README's main path on a machine without a GPU: figures, tables and the PDF from
    the committed data in data/raw/, in a copy of the tracked files (this tree is left alone)."""
    from kernels.render import paper_problems

    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    tree = tmp_path / "tree"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--config", "measure=false"],
                          cwd=tree, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert (tree / "paper" / "main.pdf").stat().st_size > 0
    numbers = (tree / "paper" / "generated" / "numbers.tex").read_text()
    assert "\\GdnChunkMsBFourTEightK}{n/a}" not in numbers and "\\SwigluCopyTBps}{n/a}" not in numbers
    assert paper_problems((tree / "paper" / "main.log").read_text(errors="replace")) == []
    text = subprocess.run(["pdftotext", str(tree / "paper" / "main.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "snakemake --cores all" in text and "--profile profiles/quick" in text  # copy-pasteable commands
    # the committed second run (config reproduce.committed) is compared and reported in the appendix
    second = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["reproduce"]["committed"]["h200"]
    summary = (tree / "results" / "reproduction.txt").read_text()
    assert summary.startswith(("reproduced: ", "NOT reproduced: "))
    numbers = (tree / "paper" / "generated" / "reproduction_numbers.tex").read_text()
    assert "\\newcommand{\\ReproCandidate}{" + second.replace("_", "\\_") + "}" in numbers


@pytest.mark.slow
def test_smoke_run_end_to_end():
    """Every measurement rule on the CPU at tiny sizes, then the full PDF."""
    smoke = ROOT / "results" / "smoke"
    shutil.rmtree(smoke, ignore_errors=True)
    snakemake("--profile", "profiles/smoke", "--cores", "2")
    raw = sorted((smoke / "raw" / "cpu").glob("*/*.jsonl"))
    assert {p.parent.name for p in raw} == {"swiglu", "flex", "gdn"}
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
    for study in ("swiglu", "flex", "gdn"):
        report = importlib.import_module(f"kernels.{study}.report")
        for name in [*report.FIGURES, *report.TABLES]:
            assert f"`{name}`" in readme, f"{name} missing from README.md"
