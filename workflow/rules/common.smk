# Configuration checks, modes and paths shared by every rule file.

import hashlib
import importlib
import json
import os
import shutil
import subprocess

import yaml

from kernels.core.checks import committed_rows, leftover_jobs, schema_error
from kernels.core.env import gpu_slug
from kernels.core.files import write_atomic
from kernels.core.fingerprint import fingerprint
from kernels.core.gpulease import record_path
from kernels.paper import provenance, render

# A lock left by a run that was killed: Snakemake refuses the run (LockException, "--unlock"; a dry
# run or --nolock only warns) and does not say that the killed run's jobs may still be running;
# this names them first.
if (
    workflow.is_main_process
    and not {"--unlock", "-n", "--dry-run", "--dryrun", "--nolock"} & set(sys.argv)
    and any(Path(".snakemake", "locks").glob("*.lock"))
):
    _left = leftover_jobs(Path.cwd())
    print(
        (
            "Jobs of a Snakemake run of this folder are still running ("
            + "; ".join(f"PID {pid}: {cmd}" for pid, cmd in _left)
            + "): if that run was killed, let them end or stop them (kill "
            + " ".join(str(pid) for pid, _ in _left)
            + "), then run snakemake --unlock and this command again."
            if _left
            else "A Snakemake lock is in .snakemake/locks/ and no job of a run of this folder "
            "is running on this host (on a cluster, see its queue): if no other run of this "
            "folder is under way, the last one was killed; run snakemake --unlock, then this "
            "command again."
        ),
        file=sys.stderr,
    )

_KNOWN_STUDIES = {
    p.stem for p in Path(workflow.basedir, "config", "studies").glob("*.yaml")
}
_TOP_KEYS = (
    "measure",
    "gpu",
    "paper_gpu",
    "overwrite",
    "smoke",
    "quick",
    "studies",
    "timing",
    "compile_ahead",
    "reproduce",
)
_unknown = sorted(set(config) - set(_TOP_KEYS) - _KNOWN_STUDIES)
if _unknown:
    raise WorkflowError(
        f"unknown config key(s) {_unknown} (config/config.yaml or --config): expected "
        f"{', '.join(_TOP_KEYS)} or a study of config/studies/ ({sorted(_KNOWN_STUDIES)})"
    )


# --config timing='{min_reps: 300}' gives text: numbers as numbers (the schema rejects the rest)
for _key in ("timing", "reproduce"):
    for _name, _value in config.get(_key, {}).items():
        if _name != "candidate" and isinstance(_value, str):
            for _kind in (int, float):
                try:
                    config[_key][_name] = _kind(_value)
                    break
                except ValueError:
                    pass


def _command_line_config():
    """{top-level config key: where the command line sets it ("--config" or a --configfile's
    path)}, read from this process's arguments (values from a profile are not seen)."""
    found, flag = {}, None
    for arg in sys.argv[1:]:
        if arg.startswith("-"):
            name, _, value = arg.partition("=")
            flag = (
                name
                if name in ("--config", "-C", "--configfile", "--configfiles")
                else None
            )
            if not value or flag is None:
                continue
            arg = value
        if flag in ("--config", "-C"):
            found[arg.partition("=")[0]] = "--config"
        elif flag in ("--configfile", "--configfiles") and Path(arg).is_file():
            found.update(
                dict.fromkeys(yaml.safe_load(Path(arg).read_text()) or {}, arg)
            )
    return found


def config_source(file, keys):
    """Where config ``keys`` (top-level) came from, for an error: ``file``, and the --config or
    --configfile of the command line that sets any of them."""
    where = _command_line_config()
    given = sorted({where[k] for k in keys if k in where})
    return file + (f" (or {', '.join(given)})" if given else "")


def check_section(section, schema, file, root=""):
    """Raise WorkflowError '<file>: <key>: <what is wrong>' (one line, :func:`config_source` of
    ``file``) for the most relevant violation of workflow/schemas/<schema> by a config section;
    ``root`` is the section's key (none: the whole config, whose error starts with its key).
    """
    error = schema_error(
        section, Path(workflow.basedir, "workflow", "schemas", schema), root
    )
    if error:
        key = root or error.split(":")[0].split(".")[0].split("[")[0]
        raise WorkflowError(f"{config_source(file, [key])}: {error}")


check_section(config, "config.schema.yaml", "config/config.yaml")
if config["timing"]["min_reps"] > config["timing"]["max_reps"]:
    raise WorkflowError(
        f"{config_source('config/config.yaml', ['timing'])}: timing.min_reps ({config['timing']['min_reps']}) is "
        f"above timing.max_reps ({config['timing']['max_reps']})"
    )
for _study in config["studies"]:
    _file = f"config/studies/{_study}.yaml"
    if _study not in config:
        raise WorkflowError(
            f"config key 'studies' names '{_study}' but {_file} does not exist"
        )
    _schema = f"{_study}.schema.yaml"
    if not Path(workflow.basedir, "workflow", "schemas", _schema).exists():
        raise WorkflowError(
            f"study {_study} (config key 'studies') has no schema workflow/schemas/"
            f"{_schema} (docs/extending.md: Adding an experiment)"
        )
    check_section(config[_study], f"{_study}.schema.yaml", _file, _study)
    # what the schema cannot say (a value against another): the study's own check_config
    _check = getattr(
        importlib.import_module(f"kernels.{_study}.study"), "check_config", None
    )
    if _check is not None:
        try:
            _check(config[_study])
        except ValueError as _exc:
            raise WorkflowError(
                f"{config_source(_file, [_study])}: {_study}.{_exc}"
            ) from None
for _study, _impls in config["compile_ahead"]["impls"].items():
    _known = config.get(_study, {}).get("sweep", {}).get("impls", [])
    if _study in config["studies"] and set(_impls) - set(_known):
        raise WorkflowError(
            f"config/config.yaml: compile_ahead.impls.{_study}: {sorted(set(_impls) - set(_known))} "
            f"not among the implementations of config/studies/{_study}.yaml's sweep"
        )


def _flag(value):
    """A boolean config value, also when given as text on the command line (--config k=true)."""
    return value in (True, "true")


STUDIES = config["studies"]
SMOKE = _flag(config["smoke"])
QUICK = _flag(config["quick"])
# whether a measuring job checks that its folder names the GPU it runs on
# (kernels.core.checks.require_gpu): not in the smoke run (the CPU), nor in the quick run, whose
# config gpu may name a model without committed rows to try on any GPU (its rows say which GPU
# ran them); both the compile-ahead and the measurement jobs read it
REQUIRE_GPU = not SMOKE and not QUICK
if SMOKE and QUICK:
    raise WorkflowError(
        "config keys smoke and quick are both true: choose one (profiles/smoke or profiles/quick)"
    )


def _study_list(key):
    """The studies a list-valued config key names (measure, overwrite), checked against STUDIES."""
    unknown = [s for s in config[key] if s not in STUDIES]
    if unknown:
        raise WorkflowError(
            f"config {key}={config[key]}: {unknown} not among the studies of this run "
            f"(config key 'studies': {STUDIES})"
        )
    return list(config[key])


# measure: a list names the studies to measure (whatever their state); overwrite: a list names the
# studies whose committed rows a measuring run may replace (true: every study it measures)
MEASURE_NAMED = _study_list("measure") if isinstance(config["measure"], list) else None
OVERWRITE = (
    _study_list("overwrite")
    if isinstance(config["overwrite"], list)
    else (STUDIES if _flag(config["overwrite"]) else [])
)
SWEEP = "smoke" if SMOKE else "quick" if QUICK else "sweep"
for _study in STUDIES:
    if SWEEP not in config[_study]:
        raise WorkflowError(
            f"config/studies/{_study}.yaml has no '{SWEEP}' section, which the "
            f"{SWEEP} run measures"
        )


def detected_gpus():
    """Names of the CUDA GPUs `nvidia-smi -L` lists on this host ([] if none)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


if SMOKE:
    # Tiny CPU sizes; Triton kernels run in the interpreter.
    MEASURE = (
        config["measure"] == "auto" or _flag(config["measure"]) or bool(MEASURE_NAMED)
    )
    GPU = "cpu" if config["gpu"] == "auto" else config["gpu"]
    N_GPUS = 1
    RAW = "results/smoke/raw"
    OUT = "results/smoke"
else:
    _gpus = detected_gpus()
    N_GPUS = max(len(_gpus), 1)
    MEASURE = (
        bool(_gpus)
        if config["measure"] == "auto"
        else bool(MEASURE_NAMED) or _flag(config["measure"])
    )
    RAW = "results/quick/raw" if QUICK else "data/raw"
    OUT = "results/quick" if QUICK else "."
    if QUICK and not MEASURE:
        raise WorkflowError(
            "the quick run measures on a GPU, and nvidia-smi found none (or config "
            "measure=false): for a dry run set --config measure=true gpu=h200"
        )
    if config["gpu"] != "auto":
        GPU = config["gpu"]
    elif MEASURE:
        if not _gpus:
            raise WorkflowError(
                "config measure=true but no GPU found by nvidia-smi: set config key 'gpu' "
                "(--config gpu=h200 for a dry run of the H200's jobs, gpu=cpu to measure on this "
                "host's CPU into results/cpu/)"
            )
        GPU = gpu_slug(_gpus[0])
    else:
        _committed = sorted(
            p.name for p in Path(RAW).glob("*") if any(p.glob("*/*.jsonl"))
        )
        if len(_committed) == 1:
            GPU = _committed[0]
        elif config.get("paper_gpu") in _committed:
            # several models' rows: the one the paper speaks of
            GPU = config["paper_gpu"]
        else:
            raise WorkflowError(
                f"config gpu=auto: {RAW}/ holds the rows of {_committed} and config key "
                f"'paper_gpu' ({config.get('paper_gpu')}) names none of them; set 'paper_gpu' "
                f"or 'gpu' to one"
            )
    if MEASURE and not QUICK and GPU == "cpu":
        # rows measured on the CPU are never committed data: they and what is made of them go
        # under results/cpu/ (as the smoke run's under results/smoke/), never into data/raw/
        RAW, OUT = "results/cpu/raw", "results/cpu"

RESULTS = "results" if OUT == "." else OUT
TIDY = f"{RESULTS}/tidy"
LOGS = f"{RESULTS}/logs"
FIGURES_DIR = str(Path(OUT, "figures"))
PAPER_DIR = str(Path(OUT, "paper"))
BENCH = f"{RAW}/{GPU}/benchmarks"


def study_impls(study):
    """Implementations measured for a study in the active sweep."""
    return config[study][SWEEP]["impls"]


# Each study's fingerprint (kernels/core/fingerprint.py) for the active section, which its measurement
# jobs record in their rows; and the state of its committed rows in data/raw/<gpu>/ against the
# code and the sweep section (kernels/paper/provenance.py: current, stale or not measured); a
# measuring run on the CPU compares with its own earlier rows under results/cpu/raw/cpu/.
FINGERPRINTS = {
    s: fingerprint(s, config[s][SWEEP], config["timing"], workflow.basedir)
    for s in STUDIES
}
COMMITTED = f"{RAW}/{GPU}" if RAW == "results/cpu/raw" else f"data/raw/{GPU}"
STATES = (
    {}
    if SMOKE
    else {
        s: provenance.study_state(
            s,
            COMMITTED,
            config[s]["sweep"],
            config["timing"],
            workflow.basedir,
            code=FINGERPRINTS[s] if SWEEP == "sweep" else None,
        )
        for s in STUDIES
    }
)
# What the paper's provenance says (each study's fingerprint and state, the tree), in a file named
# by its digest (written by the states rule), a target of every run; the rules that print a state
# read it, so a changed state is a new file to make and they run again, whatever the files' times
# and the params Snakemake recorded (snakemake --touch marks every output up to date and records
# the params of its jobs).
STATES_RECORD, _states_digest = provenance.states_record(
    {s: FINGERPRINTS[s]["digest"] for s in STUDIES},
    STATES,
    provenance.tree_name(workflow.basedir),
)
STATES_FILE = f"{RESULTS}/states/{_states_digest}.json"
# The studies this run measures: every study in the smoke and quick runs; else, on a measuring
# run, those config measure names, or those whose committed rows are not current.
if not MEASURE:
    MEASURED = []
elif SMOKE or QUICK:
    MEASURED = list(STUDIES)
elif MEASURE_NAMED is not None:
    MEASURED = MEASURE_NAMED
else:
    MEASURED = [s for s in STUDIES if STATES[s].state != provenance.CURRENT]
# A deleting command (--delete-all-output or --delete-temp-output, or a prefix argparse takes for
# one) runs no onstart, where check_measuring_run guards the committed rows, and deletes the outputs
# of every job of the DAG: a study's committed rows are outputs of none unless config overwrite
# names the study.
DELETING = any(
    len(arg) > len("--delete-") and flag.startswith(arg)
    for arg in sys.argv
    for flag in ("--delete-all-output", "--delete-temp-output")
)
if DELETING and not SMOKE and not QUICK:
    _kept = [
        s for s in MEASURED if s not in OVERWRITE and committed_rows(f"{COMMITTED}/{s}")
    ]
    MEASURED = [s for s in MEASURED if s not in _kept]
    if _kept and workflow.is_main_process:
        print(
            f"Keeping the committed rows of {', '.join(_kept)} in {COMMITTED}/: only a study "
            f"that config overwrite names (--config overwrite='[{_kept[0]}]') has its rows "
            f"deleted by --delete-all-output.",
            file=sys.stderr,
        )
if MEASURE and not SMOKE and workflow.is_main_process:
    print(provenance.summary(COMMITTED, [STATES[s] for s in STUDIES]), file=sys.stderr)
if MEASURE and not SMOKE and not QUICK and workflow.is_main_process:
    _which = (
        "named by config measure"
        if MEASURE_NAMED is not None
        else "the studies without current rows there"
    )
    print(
        f"Measuring into {RAW}/{GPU}/: "
        + (
            f"{', '.join(MEASURED)} ({_which})."
            if MEASURED
            else "nothing (every study is current)."
        ),
        file=sys.stderr,
    )

# Triton's autotuning picks kept on disk (TRITON_CACHE_AUTOTUNING) would hand the timed pass the
# untimed picks of the compile-ahead children (kernels/core/children.py), and Triton cannot write
# the GDN kernels' tuning key (it holds a Triton dtype) to disk: off for a measuring run's jobs
if (
    MEASURE
    and os.environ.pop("TRITON_CACHE_AUTOTUNING", "")
    and workflow.is_main_process
):
    print(
        "TRITON_CACHE_AUTOTUNING is unset for this run's jobs: each measurement autotunes its "
        "kernels itself, timed and alone on the GPU.",
        file=sys.stderr,
    )


def stale_file(study):
    """The record of why a measuring run into data/raw/<gpu>/ measures a study whose rows are there
    (stale, or named by config measure): written when the run starts, newer than those rows, it is
    an input of the study's measurement jobs, so Snakemake runs them (its triggers cannot see a change
    of a module that a job imports, nor use the metadata a fresh clone lacks)."""
    return f".tmp/stale/{RAW}/{GPU}/{study}.json"


if workflow.is_main_process:
    for _stale in Path(".tmp/stale", RAW, GPU).glob("*.json"):
        if _stale.stem not in MEASURED or SMOKE or QUICK:
            _stale.unlink()  # an earlier run's record: this one does not measure that study again
if MEASURE and not SMOKE and not QUICK and workflow.is_main_process:
    for _study in MEASURED:
        if any(Path(COMMITTED, _study).glob("*.jsonl")):
            write_atomic(
                stale_file(_study),
                json.dumps(
                    {
                        "study": _study,
                        "state": STATES[_study].state,
                        "why": STATES[_study].why or "named by config measure",
                        "fingerprint": FINGERPRINTS[_study]["digest"],
                    }
                )
                + "\n",
            )


# implementations whose cases their study's compile-ahead job prepares first (config key
# compile_ahead; kernels.core.jobs.compile_ahead_job); not in the smoke run, on the CPU
AHEAD = (
    []
    if SMOKE
    else [
        (study, impl)
        for study, impls in config["compile_ahead"]["impls"].items()
        if study in MEASURED
        for impl in impls
        if impl in study_impls(study)
    ]
)
AHEAD_STUDIES = sorted({study for study, _ in AHEAD})
# Snakemake resource gpu_slots, twice this per GPU (measure.smk): a measurement job takes this many,
# a compile-ahead job one, so the studies' compile-ahead jobs run together (their children mostly
# compile on the CPU), and a job starts while the one before it still runs on its GPU. The GPU's
# lease (kernels/core/gpulease.py) keeps them apart: a measurement holds it alone, the compile-ahead jobs
# hold it shared, and a job that Snakemake started early waits there.
GPU_SLOTS = max(len(AHEAD_STUDIES), 1)


def ahead_file(study):
    """The answers of a study's compile-ahead job, which its measurement jobs read (temporary)."""
    return f".tmp/compile_ahead/{RAW}/{GPU}/{study}.json"


def checkpoint_file(study, impl):
    """A measurement job's checkpoint (kernels.core.jobs.run_job), outside data/."""
    return f".tmp/checkpoints/{RAW}/{GPU}/{study}/{impl}.jsonl"


def raw_files(study):
    """JSONL files of one study: those this run measures, or those committed."""
    if study in MEASURED:
        return [f"{RAW}/{GPU}/{study}/{impl}.jsonl" for impl in study_impls(study)]
    return sorted(str(p) for p in Path(COMMITTED, study).glob("*.jsonl"))


def other_models_files():
    """The rows of every study on the GPU models other than this run's (each folder of RAW)."""
    return sorted(
        str(p)
        for p in Path(RAW).glob("*/*/*.jsonl")
        if p.parts[-3] != GPU and p.parent.name in STUDIES
    )


def model_folders():
    """This run's model folder, then every other model's folder of RAW that holds a study's rows."""
    others = sorted({Path(f).parents[1] for f in other_models_files()})
    return [f"{RAW}/{GPU}", *(str(p) for p in others)]


def other_models_benchmarks():
    """The benchmark and lease files of the GPU models other than this run's (their minutes)."""
    return sorted(
        str(p) for p in Path(RAW).glob("*/benchmarks/*") if p.parts[-3] != GPU
    )


def reproduction_files():
    """The rows of every second and third run of a study in REPRODUCTIONS (<name>/<study>/<impl>.jsonl)."""
    return sorted(
        str(p)
        for p in Path(REPRODUCTIONS).glob("*/*/*.jsonl")
        if p.parent.name in STUDIES
    )


def committed_benchmarks():
    """The benchmark and lease files of the studies this run reads the committed rows of, whose
    minutes the paper gives (kernels.paper.render.job_minutes): inputs of the rules that read them,
    so that a changed or restored file renders again (those of a study measured here come with its
    rows)."""
    return sorted(
        str(p)
        for s in STUDIES
        if s not in MEASURED
        for pattern in (f"measure_{s}_*", f"compile_ahead_{s}.*")
        for p in Path(BENCH).glob(pattern)
    )


def run_measured(folder, study):
    """Whether the run in ``folder`` (data/raw/<gpu>) measured ``study``: rows of it are there, or
    the benchmark files of its measurement jobs (benchmarks/measure_<study>_<impl>.tsv).
    """
    return any(Path(folder, study).glob("*.jsonl")) or any(
        Path(folder, "benchmarks").glob(f"measure_{study}_*.tsv")
    )


if not MEASURE:
    # Rendering reads every configured study's rows from one folder: check it before any job.
    if not Path(RAW, GPU).is_dir():
        _there = sorted(p.name for p in Path(RAW).glob("*") if any(p.glob("*/*.jsonl")))
        raise WorkflowError(
            f"config gpu={GPU}: no folder {RAW}/{GPU}/ to render from (folders "
            f"there: {', '.join(_there) or 'none'}); set --config gpu=<folder>"
        )
    # a study the run measured must have its rows; one it did not (added since) renders as not measured
    _missing = [s for s in STUDIES if not raw_files(s)]
    _lost = [s for s in _missing if run_measured(Path(RAW, GPU), s)]
    if _lost:
        raise WorkflowError(
            f"{RAW}/{GPU}/ holds no rows of the configured study {_lost[0]} "
            f"(no {RAW}/{GPU}/{_lost[0]}/*.jsonl; config key 'studies')"
        )
    print(
        f"No measurement on this host (measure={config['measure']}): rendering from the "
        f"committed data in {RAW}/{GPU}/.",
        file=sys.stderr,
    )
    if workflow.is_main_process:
        print(
            provenance.summary(COMMITTED, [STATES[s] for s in STUDIES]), file=sys.stderr
        )


# In a run that reads a study's committed rows (every run but the smoke and quick runs, for the studies
# it does not measure), an implementation must have its rows where its measurement job ran (its
# benchmark file is there) or its study is current (the config its rows' fingerprint holds names it).
_lost = [
    (s, impl)
    for s in ([] if SMOKE or QUICK else STUDIES)
    if s not in MEASURED
    for impl in study_impls(s)
    if (
        Path(BENCH, f"measure_{s}_{impl}.tsv").exists()
        or (s in STATES and STATES[s].state == provenance.CURRENT)
    )
    and not Path(RAW, GPU, s, f"{impl}.jsonl").exists()
]
if _lost:
    _study, _impl = _lost[0]
    _bench = Path(BENCH, f"measure_{_study}_{_impl}.tsv")
    raise WorkflowError(
        f"{RAW}/{GPU}/{_study}/{_impl}.jsonl is missing, but the run of {RAW}/{GPU}/ measured "
        + (
            f"{_impl} of {_study} ({_bench})"
            if _bench.exists()
            else f"{_study} with {_impl} among its implementations (its rows are current)"
        )
        + f": restore it (git checkout -- {RAW}/{GPU}/{_study}/) or re-measure {_study} on its GPU"
    )


def check_measuring_run():
    """Stop a real run that measures into data/raw/<gpu>/ before its first job (onstart of
    measure.smk): when its jobs run on this host and this host lacks that GPU, and when a
    study it measures holds committed rows there (kernels.core.checks.committed_rows) that config
    overwrite does not name. A dry run is not stopped; nor is the smoke run, whose rows are
    never committed, nor the quick run for want of the GPU its config names.
    """
    if not workflow.is_main_process or not any(
        j.rule.name == "measure" for j in workflow.dag.needrun_jobs()
    ):
        return
    folder = f"{RAW}/{GPU}"
    # a host without a GPU measures on its CPU (folder cpu, under results/cpu/raw/), as the harness does
    here = {gpu_slug(name) for name in _gpus} or {"cpu"}
    # the quick run writes under results/quick/ alone: there config gpu may name another model than the
    # host's (a model without committed rows, tried on any GPU); its rows record the GPU that ran them
    if workflow.local_exec and GPU not in here and not QUICK:
        raise WorkflowError(
            f"measuring into {folder}/ needs its GPU ({GPU}) on this host, and nvidia-smi "
            f"lists {', '.join(_gpus) or 'no GPU'}: measure on a host with that GPU, "
            f"or render the committed rows with --config measure=false"
        )
    measured = sorted(
        {
            j.wildcards.study
            for j in workflow.dag.needrun_jobs()
            if j.rule.name == "measure"
        }
    )
    for study in measured:
        committed = committed_rows(f"{folder}/{study}")
        if committed and study not in OVERWRITE:
            state = STATES[study]
            why = f": {state.why}" if state.why else ""
            raise WorkflowError(
                f"measuring {study} into {folder}/{study}/ would replace its committed rows "
                f"({len(committed)} files, e.g. {committed[0]}; {state.state}"
                f"{why}): add --config overwrite='[{study}]' "
                f"to re-measure it (overwrite=true: every study this run measures)"
            )


def code_version(*paths):
    """SHA-1 of the files whose code renders an output: as a rule's param, a
    change of that code reruns the rule (Snakemake's params rerun trigger)."""
    digest = hashlib.sha1()
    for path in paths:
        digest.update(Path(workflow.basedir, path).read_bytes())
    return digest.hexdigest()[:12]


RENDER_CODE = [
    "kernels/paper/collect.py",
    "kernels/core/checks.py",
    "kernels/core/files.py",
    "kernels/paper/render.py",
    "kernels/paper/report_kit.py",
    "kernels/paper/style.py",
    "kernels/core/timing.py",
    "workflow/schemas/row.schema.yaml",
]


def report_code(study):
    """Code version of a study's rendering: its report module, its implementation registry (names,
    labels, colours, and the row schema's names), its schema (its rows' in $defs.row) and the shared
    renderers.
    """
    registry = (
        [f"kernels/{study}/impls.py"]
        if Path(workflow.basedir, f"kernels/{study}/impls.py").exists()
        else []
    )
    return code_version(
        *report_files(study),
        *registry,
        f"workflow/schemas/{study}.schema.yaml",
        *RENDER_CODE,
    )


def report_files(study):
    """The paths of a study's report: ``kernels/<study>/report.py`` and the modules of its package whose
    functions it takes in (kernels/flex/: tidy.py and numbers.py), so that a change of any renders again.
    """
    rep = report_module(study)
    own = sorted(
        {
            f.__module__
            for f in vars(rep).values()
            if callable(f)
            and getattr(f, "__module__", "").startswith(f"kernels.{study}.")
        }
        - {rep.__name__}
    )
    return [
        f"kernels/{study}/report.py",
        *(str(Path(*name.split("."))) + ".py" for name in own),
    ]


def report_module(study):
    return importlib.import_module(f"kernels.{study}.report")


FIGURES = {s: sorted(report_module(s).FIGURES) for s in STUDIES}
TABLES = {s: sorted(report_module(s).TABLES) for s in STUDIES}
# the tables set in the paper (a report's PAPER_TABLES); every table is also a CSV file under
# results/tables/, where the paper sends a reader for those it does not set
PAPER_TABLES = {s: sorted(render.paper_tables(report_module(s))) for s in STUDIES}

ALL_FIGURES = [f"{FIGURES_DIR}/{name}.pdf" for s in STUDIES for name in FIGURES[s]]
ALL_TABLES = [
    f"{PAPER_DIR}/generated/{name}.tex" for s in STUDIES for name in PAPER_TABLES[s]
]
ALL_CSV_TABLES = [f"{RESULTS}/tables/{name}.csv" for s in STUDIES for name in TABLES[s]]
ALL_FLOATS = [f"{PAPER_DIR}/generated/{s}_floats.tex" for s in STUDIES]
# each claim on every committed GPU model, and device time on one model over another's (rule models)
MODELS = {
    "tex": f"{PAPER_DIR}/generated/models.tex",
    "claims": f"{RESULTS}/models_claims.csv",
    "ratios": f"{RESULTS}/models_device_time.csv",
    "figure": f"{FIGURES_DIR}/models_device_time.pdf",
    # every measuring run of data/, its role and outcome (kernels/paper/runs.py)
    "runs": f"{RESULTS}/runs.csv",
    "runs_tex": f"{PAPER_DIR}/generated/runs.tex",
    # each quoted value across the GPUs of a model beside its within-run interval (kernels/paper/uncertainty.py)
    "uncertainty": f"{RESULTS}/uncertainty.csv",
    "uncertainty_tex": f"{PAPER_DIR}/generated/uncertainty.tex",
}
# every second and third run of a study in the data, each against its model's committed rows: the
# same-model spread (rule models, kernels.paper.runs)
REPRODUCTIONS = "data/reproductions"
PAPER_WIDE = [
    *MODELS.values(),
    f"{PAPER_DIR}/generated/numbers.tex",
    f"{PAPER_DIR}/generated/coverage.tex",
    f"{PAPER_DIR}/generated/provenance.tex",
    f"{PAPER_DIR}/main.pdf",
]
# the tidy tables a reader opens (docs/data.md), the figures and tables, the paper
ALL_OUTPUTS = [
    *[f"{TIDY}/{s}.csv" for s in STUDIES],
    *ALL_FIGURES,
    *ALL_TABLES,
    *ALL_CSV_TABLES,
    *ALL_FLOATS,
    *PAPER_WIDE,
]
# A run of some of the studies (config studies names a subset of config/studies/) makes their tidy
# tables, figures and tables, but no paper: the paper, its numbers, provenance, coverage and second
# run need every study (paper/main.pdf is left as it was).
SUBSET_LEFT_OUT = sorted(_KNOWN_STUDIES - set(STUDIES))
if QUICK:  # the quick run measures and checks; it renders no paper
    ALL_OUTPUTS = []
elif SUBSET_LEFT_OUT:
    ALL_OUTPUTS = [f for f in ALL_OUTPUTS if f not in PAPER_WIDE]
    if workflow.is_main_process:
        print(
            f"config studies leaves out {', '.join(SUBSET_LEFT_OUT)}: this run makes the tidy "
            f"tables, figures and tables of {', '.join(STUDIES)}, and no paper (it needs every study).",
            file=sys.stderr,
        )
ALL_OUTPUTS += [f for s in MEASURED for f in raw_files(s)]
# a target, so that a missing one is made (an input alone that is missing is not: Snakemake takes it for
# a deleted intermediate file) and the rules that read it run again
ALL_OUTPUTS.append(STATES_FILE)

# The reproduction check (workflow/rules/reproduce.smk) compares a second run with this run's rows,
# study by study: CANDIDATE_DIRS maps each study to the folder of its second run
# (<folder>/<study>/<impl>.jsonl): the quick run's rows against the committed ones of the same cases
# (REFERENCE), or the second run config reproduce.candidate names against data/raw/<gpu>/, or the
# committed second runs of that folder (config reproduce.committed: one folder or a list, each
# study's second run in one of them) of the studies this run does not measure. CANDIDATE
# lists the folders of the studies the check compares (REPRO_STUDIES), as the paper names them.
REFERENCE = f"data/raw/{GPU}"
if QUICK and config["reproduce"]["candidate"]:
    raise WorkflowError(
        "config reproduce.candidate is set, but the quick run compares its own rows "
        "with the committed ones: leave reproduce.candidate out"
    )


def second_run_dirs(folders, key, required=True):
    """{study: folder} of the studies whose rows one of ``folders`` holds (config ``key``); a
    study in two of them is an error naming both, and so, where ``required`` (a second run the
    command line names), is none."""
    dirs = {}
    for folder in folders:
        for s in STUDIES:
            if not list(Path(folder, s).glob("*.jsonl")):
                continue
            if s in dirs:
                raise WorkflowError(
                    f"config {key}: {dirs[s]}/{s}/ and {folder}/{s}/ both hold a second run "
                    f"of {s}; name one of them"
                )
            dirs[s] = folder
    if required and not dirs:
        raise WorkflowError(
            f"config {key}: no rows in {', '.join(f'{f}/' for f in folders)} (expected "
            f"<folder>/<study>/<impl>.jsonl for a study of {STUDIES}, e.g. "
            f"data/reproductions/<name>/gdn/chunk.jsonl)"
        )
    return dirs


_committed_second = config["reproduce"]["committed"].get(GPU)
# a quick run on a model without committed rows (data/raw/<gpu>/) checks its claims alone (rule
# quick_claims): against every committed model's verdicts on the same cases
QUICK_NEW_MODEL = QUICK and not Path(REFERENCE).is_dir()
if QUICK:
    CANDIDATE_DIRS = {} if QUICK_NEW_MODEL else {s: f"{RAW}/{GPU}" for s in STUDIES}
elif config["reproduce"]["candidate"]:
    CANDIDATE_DIRS = second_run_dirs(
        [config["reproduce"]["candidate"]], "reproduce.candidate"
    )
elif _committed_second and not SMOKE and not SUBSET_LEFT_OUT and RAW == "data/raw":
    # a study this run measures has new rows: its committed second run is of other rows
    CANDIDATE_DIRS = {
        s: folder
        for s, folder in second_run_dirs(
            provenance.committed_second_runs(config["reproduce"]["committed"], GPU),
            f"reproduce.committed.{GPU}",
            required=False,
        ).items()
        if s not in MEASURED
    }
else:
    CANDIDATE_DIRS = {}
CANDIDATE = sorted(set(CANDIDATE_DIRS.values())) or None
if QUICK_NEW_MODEL and workflow.is_main_process:
    _committed = sorted(p.name for p in Path("data/raw").glob("*") if p.is_dir())
    print(
        f"No committed rows of this model ({REFERENCE}/ does not exist; committed: "
        f"{', '.join(_committed) or 'none'}): the quick run derives each claim from its own rows "
        f"and sets it beside the committed models' verdicts on the same cases.",
        file=sys.stderr,
    )
# The studies the check compares: those whose second run is of the code that measured the reference
# rows (kernels.paper.provenance.same_code); in the quick run, those whose committed rows are current.
if QUICK:
    REPRO_STUDIES = [s for s in CANDIDATE_DIRS if STATES[s].state == provenance.CURRENT]
else:
    REPRO_STUDIES = [
        s
        for s, folder in CANDIDATE_DIRS.items()
        if provenance.same_code(
            (
                {provenance.code_digest(FINGERPRINTS[s]["parts"])}
                if s in MEASURED
                else provenance.code_identity(provenance.row_envs(COMMITTED, s))
            ),
            provenance.code_identity(provenance.row_envs(folder, s)),
        )
    ]
# studies without a second run of their code: the paper says so
NO_REPRO = [s for s in STUDIES if s not in REPRO_STUDIES]
OTHER_CODE_CANDIDATE = None  # a second run configured, of none of the studies' code
if QUICK and CANDIDATE is not None and not REPRO_STUDIES:
    # rows of other code only: the claims alone are checked (rule quick_claims)
    if workflow.is_main_process:
        print(
            f"No study of {COMMITTED}/ is current (python -m kernels.paper.provenance): the quick run "
            "compares no rows with them, and checks its claims alone.",
            file=sys.stderr,
        )
    CANDIDATE = None
elif CANDIDATE is not None and not REPRO_STUDIES:
    print(
        f"No study of {', '.join(CANDIDATE)} is a second run of the code that measured {COMMITTED}/: "
        "nothing to compare.",
        file=sys.stderr,
    )
    OTHER_CODE_CANDIDATE, CANDIDATE = ", ".join(CANDIDATE), None
elif CANDIDATE is not None:
    # the folders the check reads: those of a study it compares (the paper names them)
    CANDIDATE = sorted({CANDIDATE_DIRS[s] for s in REPRO_STUDIES})
REPRO = {
    "csv": f"{RESULTS}/reproduction.csv",
    "summary": f"{RESULTS}/reproduction.txt",
    "figure": f"{FIGURES_DIR}/reproduction.pdf",
    # the rows outside the tolerance, a table the paper names by its file (\tablecsv)
    "table": f"{RESULTS}/tables/reproduction_outside.csv",
    "snippet": f"{PAPER_DIR}/generated/reproduction.tex",
    "numbers": f"{PAPER_DIR}/generated/reproduction_numbers.tex",
}
if CANDIDATE is not None and (QUICK or not SUBSET_LEFT_OUT):
    ALL_OUTPUTS += list(REPRO.values())
# the quick run's claims on this GPU, beside every committed model's (kernels/paper/quick.py)
QUICK_CLAIMS = {
    "csv": f"{RESULTS}/claims.csv",
    "text": f"{RESULTS}/claims.txt",
}
if QUICK:
    ALL_OUTPUTS += list(QUICK_CLAIMS.values())


def repro_candidate_files():
    """The second run's JSONL files of REPRO_STUDIES: those the quick run measures, or those in
    each study's second-run folder (CANDIDATE_DIRS)."""
    if QUICK:
        return [f for s in REPRO_STUDIES for f in raw_files(s)]
    return sorted(
        str(p)
        for s in REPRO_STUDIES
        for p in Path(CANDIDATE_DIRS[s], s).glob("*.jsonl")
    )


def repro_reference_files():
    """The reference run's JSONL files of REPRO_STUDIES: the committed rows of the quick run's
    implementations, or this run's rows (measured here or committed)."""
    if QUICK:
        return [
            f"{REFERENCE}/{s}/{impl}.jsonl"
            for s in REPRO_STUDIES
            for impl in study_impls(s)
        ]
    return [f for s in REPRO_STUDIES for f in raw_files(s)]


def figure_study(wildcards):
    """The study whose report module draws figure ``wildcards.name``."""
    return next(s for s in STUDIES if wildcards.name in FIGURES[s])


def table_study(wildcards):
    """The study whose report module makes table ``wildcards.name``."""
    return next(s for s in STUDIES if wildcards.name in TABLES[s])
