"""A study's fingerprint and state: a change of its measured code, its config or an anchor's pin
makes its committed rows stale; a comment, a docstring, a report or the paper layer does not; rows
of two runs are stale; the workflow names each study's state and a measuring run measures the
stale ones only."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.core.fingerprint import RECORD_ONLY, differences, fingerprint, measured_modules, source_digest
from kernels.paper import provenance

ROOT = Path(__file__).resolve().parent.parent
SECTION = {"impls": ["slow", "fast"], "sizes": [64, 128]}
TIMING = {"warmup_ms": 100, "rep_ms": 100, "min_reps": 5, "max_reps": 200}


@pytest.fixture
def root(tmp_path):
    """A copy of the package with the toy study (tests/toy_study) as kernels/toy, and pyproject.toml."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "kernels", tree / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests" / "toy_study", tree / "kernels" / "toy",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _rows(folder: Path, code: dict, commit: str = "a" * 40, gpu: str = "GPU-1", impl: str = "slow",
          n: int = 2) -> None:
    """Rows of the toy study measured by the code of fingerprint ``code``, at ``commit`` on ``gpu``."""
    env = {"git_commit": commit, "gpu_uuid": gpu, "date": "2026-12-03T10:00:00+00:00",
           "fingerprint": code["digest"], "fingerprint_parts": code["parts"]}
    path = folder / "toy" / f"{impl}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for _ in range(n):
            f.write(json.dumps({"study": "toy", "impl": impl, "env": env}) + "\n")


def _state(root, folder, section=SECTION):
    return provenance.study_state("toy", folder, section, TIMING, root)


def test_the_closure_holds_the_study_the_runner_and_what_they_import(root):
    modules = measured_modules("toy", root)
    assert {"kernels/toy/study.py", "kernels/toy/impls.py", "kernels/core/jobs.py", "kernels/core/harness.py",
            "kernels/core/timing.py", "kernels/__init__.py"} <= set(modules)
    assert not [m for m in modules if m.startswith("kernels/paper/") or m.endswith("report.py")], modules
    assert not set(RECORD_ONLY) & set(modules), "what only records is no part of a fingerprint"


def test_what_only_records_leaves_a_study_current_and_a_measurement_change_does_not(root, tmp_path):
    """The record-only modules may change, and the runner's ``recorded(f, *args)`` digests as
    ``f(*args)``; rows whose parts still name a record-only module (measured before it was declared
    one) compare without it. Anything else in the call is measured code."""
    folder = tmp_path / "raw"
    code = fingerprint("toy", SECTION, TIMING, root)
    _rows(folder, {"digest": "0" * 16, "parts": {**code["parts"], "kernels/core/env.py": "1" * 16}})
    assert _state(root, folder).state == provenance.CURRENT
    for module in RECORD_ONLY:
        (root / module).write_text((root / module).read_text() + "\nEXTRA = 1\n")
    jobs = root / "kernels/core/jobs.py"
    text = jobs.read_text()
    call = "recorded(measure_case, mod, impl, case, device, timing)"
    assert call in text and "from kernels.core.gpustate import recorded\n" in text
    jobs.write_text(text.replace(call, "measure_case(mod, impl, case, device, timing)")
                    .replace("recorded(measure_in_child, ", "measure_in_child(")
                    .replace("from kernels.core.gpustate import recorded\n", ""))
    assert _state(root, folder).state == provenance.CURRENT
    jobs.write_text(text.replace(call, "recorded(measure_case, mod, impl, case, device, {})"))
    state = _state(root, folder)
    assert state.state == provenance.STALE and state.differs == ["kernels/core/jobs.py"], state


def test_each_real_study_measures_with_the_core_and_no_paper_module():
    for study in ("tensorcore", "swiglu", "flex", "gdn", "longctx"):
        modules = measured_modules(study)
        assert f"kernels/{study}/study.py" in modules and "kernels/core/timing.py" in modules
        assert not [m for m in modules if m.startswith("kernels/paper/")], (study, modules)
    # the long-context study runs the GDN and FlexAttention studies' code: their changes are its changes
    assert {"kernels/gdn/chunk.py", "kernels/flex/ops.py"} <= set(measured_modules("longctx"))


def test_a_digest_ignores_comments_docstrings_and_layout(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text('"""Module."""\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n')
    b.write_text('"""Another text."""\ndef f(x):\n    # a comment\n    return (x +\n            1)\n')
    c.write_text('def f(x):\n    return x + 2\n')
    assert source_digest(a) == source_digest(b) != source_digest(c)


@pytest.mark.parametrize("change, part", [
    (lambda r: (r / "kernels/toy/study.py").write_text((r / "kernels/toy/study.py").read_text() + "\nEXTRA = 1\n"),
     "kernels/toy/study.py"),
    (lambda r: (r / "kernels/core/timing.py").write_text((r / "kernels/core/timing.py").read_text()
                                                         + "\nEXTRA = 1\n"), "kernels/core/timing.py"),
    (lambda r: (r / "pyproject.toml").write_text((r / "pyproject.toml").read_text()
                                                 .replace("liger-kernel==0.8.5", "liger-kernel==0.9.0")), "anchors"),
])
def test_measured_code_and_anchor_pins_make_a_study_stale(root, tmp_path, change, part):
    folder = tmp_path / "raw"
    _rows(folder, fingerprint("toy", SECTION, TIMING, root))
    assert _state(root, folder).state == provenance.CURRENT
    change(root)
    state = _state(root, folder)
    assert state.state == provenance.STALE and state.differs == [part], state
    assert "by other code or config" in state.why


def test_the_config_section_and_the_timing_make_a_study_stale(root, tmp_path):
    folder = tmp_path / "raw"
    _rows(folder, fingerprint("toy", SECTION, TIMING, root))
    assert _state(root, folder, {**SECTION, "sizes": [64]}).differs == ["config"]
    assert provenance.study_state("toy", folder, SECTION, {**TIMING, "min_reps": 7}, root).differs == ["timing"]


def test_a_study_knows_the_timing_settings_its_rows_were_timed_with(root, tmp_path):
    """The rows' timing part is the digest of the settings they were timed with, whatever the
    settings the state is taken against."""
    folder = tmp_path / "raw"
    _rows(folder, fingerprint("toy", SECTION, TIMING, root))
    other = provenance.study_state("toy", folder, SECTION, {**TIMING, "min_reps": 7}, root)
    assert other.timing_part == fingerprint("toy", SECTION, TIMING, root)["parts"]["timing"]


def test_the_quoted_timing_is_the_one_most_rows_were_timed_with(root):
    """Quoted: the candidate whose digest the most studies' rows carry, the first of a tie; named:
    the studies of another known digest (not those whose digest is unknown)."""
    config, rows = {**TIMING, "min_reps": 7}, TIMING
    part = {name: fingerprint("toy", SECTION, t, root)["parts"]["timing"] for name, t in
            (("config", config), ("rows", rows), ("third", {**TIMING, "max_reps": 9}))}
    timed_with = {"a": part["rows"], "b": part["rows"], "c": part["config"], "d": None}
    assert provenance.quoted_timing(timed_with, [config, rows]) == (rows, ["c"])
    assert provenance.quoted_timing({"a": part["rows"], "c": part["config"]}, [config, rows]) == (config, ["a"])
    assert provenance.quoted_timing({"a": part["third"], "d": None}, [config, rows]) == (config, ["a"])
    assert provenance.quoted_timing({}, [config]) == (config, [])
    with pytest.raises(ValueError, match="no candidate"):
        provenance.quoted_timing(timed_with, [])


def test_the_paper_names_the_tree_it_is_built_from(tmp_path):
    """Its commit, with uncommitted changes where a tracked file differs from it (an untracked one
    does not count), or no commit outside a repository of its own."""
    assert provenance.tree_name(tmp_path) == provenance.NO_COMMIT
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    (tmp_path / "a.py").write_text("A = 1\n")
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "a"]):
        subprocess.run(git + cmd, cwd=tmp_path, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert provenance.tree_name(tmp_path) == f"commit {head[:7]}"
    (tmp_path / "new.py").write_text("")
    assert provenance.tree_name(tmp_path) == f"commit {head[:7]}"
    (tmp_path / "a.py").write_text("A = 2\n")
    assert provenance.tree_name(tmp_path) == f"commit {head[:7]} and uncommitted changes"
    (tmp_path / "inner").mkdir()  # a tree unpacked inside another repository is not of its commits
    assert provenance.tree_name(tmp_path / "inner") == provenance.NO_COMMIT


def test_docstrings_comments_reports_and_the_paper_layer_leave_a_study_current(root, tmp_path):
    folder = tmp_path / "raw"
    _rows(folder, fingerprint("toy", SECTION, TIMING, root))
    study = root / "kernels/toy/study.py"
    text = study.read_text()
    head, _, rest = text.partition('"""')
    study.write_text(head + '"""A reworded docstring. ' + rest.replace("\n", "  # a comment\n", 3))
    for other in ("kernels/toy/report.py", "kernels/paper/render.py", "kernels/paper/style.py"):
        (root / other).write_text((root / other).read_text() + "\nEXTRA = 1\n")
    assert _state(root, folder).state == provenance.CURRENT


def test_rows_of_two_runs_or_without_fingerprint_are_stale_and_no_rows_are_not_measured(root, tmp_path):
    code = fingerprint("toy", SECTION, TIMING, root)
    _rows(tmp_path / "two", code, gpu="GPU-1", impl="slow")
    _rows(tmp_path / "two", code, gpu="GPU-2", impl="fast")
    state = _state(root, tmp_path / "two")
    assert state.state == provenance.STALE and "rows of 2 runs" in state.why
    old = tmp_path / "old" / "toy" / "slow.jsonl"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"study": "toy", "impl": "slow", "env": {"git_commit": "b" * 40}}) + "\n")
    state = _state(root, tmp_path / "old")
    assert state.state == provenance.STALE and "carry no fingerprint" in state.why and state.commit == "b" * 7
    assert _state(root, tmp_path / "none").state == provenance.NOT_MEASURED


def test_differences_name_changed_added_and_removed_parts():
    assert differences({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9", "d": "4"}) == ["b", "-c", "+d"]
    assert differences({"a": "1", RECORD_ONLY[0]: "2"}, {"a": "1"}) == []


def test_two_runs_are_of_the_same_code_only_when_each_is_of_one_code():
    assert provenance.same_code({"x"}, {"x"})
    assert not provenance.same_code({"x"}, {"y"}) and not provenance.same_code({"x", "y"}, {"x", "y"})
    assert not provenance.same_code(set(), set())
    parts = {"kernels/core/timing.py": "1", "config": "2", "timing": "3", "anchors": "4"}
    same = provenance.code_digest(parts)
    assert provenance.code_identity([{"fingerprint_parts": parts}, {"git_commit": "c"}]) == {same, "commit:c"}
    assert provenance.code_digest({**parts, "config": "9"}) == same  # another config section: the same code
    assert provenance.code_digest({**parts, "timing": "9"}) != same


def test_every_committed_study_is_one_run():
    """Rows of one study come from one run: one commit, one GPU, one fingerprint (and one day)."""
    for folder in sorted((ROOT / "data" / "raw").iterdir()):
        for study in sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name != "benchmarks"):
            envs = provenance.row_envs(folder, study)
            runs = provenance.runs_of(envs)
            assert len(runs) == 1, f"{folder.name}/{study}: rows of {len(runs)} runs: {sorted(map(str, runs))}"
            assert len({e["date"][:10] for e in envs if e.get("date")}) <= 1, f"{folder.name}/{study}"


def test_the_readme_table_is_the_committed_data_state():
    """README's data table gives each study's state, commit, GPU, minutes and rows as the rows say."""
    readme = (ROOT / "README.md").read_text()
    for folder in sorted((ROOT / "data" / "raw").iterdir()):
        for s in provenance.states(folder, provenance.load_config()):
            if s.state == provenance.NOT_MEASURED:
                assert f"| {folder.name} | {s.study} | not measured |" in readme, (folder.name, s.study)
                continue
            row = (f"| {folder.name} | {s.study} | {s.state} | `{s.commit}` | {s.gpu} | {s.date} | "
                   f"{s.minutes:.1f} | {s.rows} |")
            assert row in readme, f"README's data table lacks: {row}"


def test_a_bad_row_makes_a_study_stale_naming_its_first_file_and_line(root):
    """A line that is not a JSON object (a torn last line, a list) or a row of another study makes
    the study stale, naming the first (path from the tree's root where it is inside it), in its
    state and in the summary of the run's start; its other rows still give the run. A file of
    nothing but a torn line is a bad row, not a study without rows."""
    folder = root / "data" / "raw" / "h200"
    _rows(folder, fingerprint("toy", SECTION, TIMING, root))
    assert _state(root, folder).state == provenance.CURRENT
    slow = folder / "toy" / "slow.jsonl"
    good = slow.read_text()
    for line, what in (('{"study": "toy", "impl": "sl', "not JSON"), ("[1, 2]", "not a JSON object"),
                       ('{"study": "flex", "impl": "slow"}', "row of study 'flex' in 'toy' data")):
        slow.write_text(good + line + "\n" + line + "\n")
        state = _state(root, folder)
        bad = f"data/raw/h200/toy/slow.jsonl:3: {what}"
        assert (state.state, state.why, state.bad_row, state.rows) == (provenance.STALE, f"bad row at {bad}", bad, 2)
        assert state.commit == "a" * 7
        assert provenance.summary("data/raw/h200", [state]) == (
            f"Studies of data/raw/h200/: stale: toy (bad row at {bad}) (python -m kernels.paper.provenance says "
            "what differs).")
    slow.write_text('{"study": "toy"\n')
    state = _state(root, folder)
    assert state.state == provenance.STALE
    assert state.why == "bad row at data/raw/h200/toy/slow.jsonl:1: not JSON; no rows"


def test_the_command_names_a_studys_bad_row(tmp_path):
    """python -m kernels.paper.provenance on a copy of the committed rows whose GDN file ends in a torn
    line: GDN is stale, naming that line; the other studies keep their state."""
    folder = tmp_path / "h200"
    shutil.copytree(ROOT / "data" / "raw" / "h200", folder)
    chunk = folder / "gdn" / "chunk.jsonl"
    lines = chunk.read_text().splitlines()
    chunk.write_text("".join(line + "\n" for line in lines[:-1]) + lines[-1][:60] + "\n")
    proc = subprocess.run([sys.executable, "-m", "kernels.paper.provenance", "--raw", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    bad = f"bad row at {chunk}:{len(lines)}: not JSON"
    assert f"gdn ({bad})" in proc.stdout.splitlines()[0] and f"\ngdn: stale ({bad})\n" in proc.stdout
    committed = provenance.states(ROOT / "data" / "raw" / "h200", provenance.load_config())
    for s in committed:
        if s.study != "gdn":
            assert f"\n{s.study}: {s.state}" in proc.stdout


def test_second_run_folders_are_those_configured_that_hold_the_study(tmp_path):
    """config reproduce.committed names one folder or a list per model; a folder without rows of the
    study is not its second run, and a model the config does not name has none."""
    for name, study in (("a", "gdn"), ("b", "flex")):
        (tmp_path / name / study).mkdir(parents=True)
        (tmp_path / name / study / "chunk.jsonl").write_text("{}\n")
    config = {"reproduce": {"committed": {"h200": ["a", "b"], "h100": "b"}}}
    assert provenance.second_run_folders("h200", "gdn", config, tmp_path) == [tmp_path / "a"]
    assert provenance.second_run_folders("h200", "flex", config, tmp_path) == [tmp_path / "b"]
    assert provenance.second_run_folders("h100", "flex", config, tmp_path) == [tmp_path / "b"]
    assert provenance.second_run_folders("h100", "gdn", config, tmp_path) == []
    assert provenance.second_run_folders("a100", "gdn", config, tmp_path) == []


def test_the_command_lists_every_model_with_each_studys_second_run():
    """Without --gpu it prints every committed model's studies, each with the second run the config
    names for it, its state and whether it ran on another GPU than the committed rows."""
    proc = subprocess.run([sys.executable, "-m", "kernels.paper.provenance"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    config = provenance.load_config()
    models = sorted(p.name for p in (ROOT / "data" / "raw").iterdir() if p.is_dir())
    blocks = proc.stdout.split("Studies of data/raw/")[1:]
    assert [b.split("/")[0] for b in blocks] == models
    for model, block in zip(models, blocks):
        found = provenance.states(ROOT / "data" / "raw" / model, config)
        assert "Studies of data/raw/" + block.splitlines()[0] == provenance.summary(f"data/raw/{model}", found)
        for s in found:
            assert f"\n{s.study}: {s.state}" in block
        for study in config["studies"]:
            part = block.split(f"\n{study}: ")[1].split("\n\n")[0]
            seconds = provenance.second_run_folders(model, study, config)
            lines = [line for line in part.splitlines() if line.startswith("  second run: ")]
            if not seconds:
                assert lines == [f"  second run: none (config reproduce.committed.{model})"]
                continue
            assert len(lines) == len(seconds)
            for folder, line in zip(seconds, lines):
                assert line.startswith(f"  second run: {folder.relative_to(ROOT)}/: ")
                assert line.endswith(("(another GPU)", "(its committed rows' GPU, not a second one)"))


def test_the_provenance_table_gives_every_models_runs(tmp_path):
    """The paper's provenance table has a row per GPU model and study, the paper's model first; its
    counts are over every model's studies, its stale-study sentences of the paper's model alone."""
    config = provenance.load_config()
    studies = list(config["studies"])
    folders = [ROOT / "data" / "raw" / "h200", ROOT / "data" / "raw" / "h100-80gb-hbm3"]
    out = tmp_path / "provenance.tex"
    paper = provenance.render_provenance(studies, folders, {s: config[s]["sweep"] for s in studies},
                                         config["timing"], out)
    assert [s.study for s in paper] == studies
    text = out.read_text()
    every = [s for f in folders for s in provenance.states(f, config)]
    assert rf"\newcommand{{\ProvenanceStudies}}{{{len(every)}}}" in text
    assert rf"\newcommand{{\ProvenanceCurrent}}{{{sum(s.state == provenance.CURRENT for s in every)}}}" in text
    assert r"\newcommand{\ProvenanceModels}{2}" in text
    body = text[text.index(r"\midrule"):]
    lines = [line for line in body.splitlines() if line.startswith(("H200 &", "H100 &"))]
    assert [line.split(" & ")[0] for line in lines] == ["H200"] * len(studies) + ["H100"] * len(studies)
    for s, line in zip(every, lines):  # its state and minutes; its run's commit and GPU: the table of every run
        assert line.split(" & ")[2:] == [s.state, f"{s.minutes:.1f} \\\\"], (s.study, line)
