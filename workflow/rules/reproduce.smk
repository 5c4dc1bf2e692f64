# The reproduction check: a second run compared with the reference run case by case
# (kernels/paper/reproduce.py). Its rule is in the DAG when there is a second run: the quick
# run (profiles/quick) or config reproduce.candidate; otherwise the paper says there is none.
# The quick run also derives each claim from its own rows, beside every committed model's verdict
# on the same cases (rule quick_claims, kernels/paper/quick.py), on any GPU.


if CANDIDATE is not None:

    localrules:
        reproduce,

    rule reproduce:
        input:
            candidate=repro_candidate_files(),
            reference=repro_reference_files(),
            # each study's fingerprint and state (rule states): a change of a compared study's
            # code makes its committed rows stale, which the check's line says
            # (kernels.paper.reproduce.stale_studies)
            states=STATES_FILE,
        output:
            csv=REPRO["csv"],
            summary=REPRO["summary"],
            figure=report(REPRO["figure"], category="Figures"),
            table=REPRO["table"],
            snippet=REPRO["snippet"],
            numbers=REPRO["numbers"],
        log:
            f"{LOGS}/reproduce.log",
        benchmark:
            f"{RESULTS}/benchmarks/reproduce.tsv"
        conda:
            "../envs/render.yaml"
        params:
            gpu=GPU,
            # the second runs' folders, as the paper names them (common.smk)
            candidate=CANDIDATE,
            tolerance=config["reproduce"]["tolerance"],
            min_within=config["reproduce"]["min_within"],
            # the cases the second run measured: the active section of each study's config
            sections={s: config[s][SWEEP] for s in REPRO_STUDIES},
            # the studies without a second run of their code (common.smk)
            without=NO_REPRO,
            # the quick run measures a part of each study: a claim it cannot derive is left out
            partial=QUICK,
            code=code_version(
                "kernels/paper/reproduce.py",
                "kernels/paper/reproduce_report.py",
                "kernels/paper/reproduce_tables.py",
                "kernels/paper/gpu_factor.py",
                "kernels/paper/claims.py",
                "kernels/paper/provenance.py",
                "kernels/paper/rows.py",
                *[f for s in STUDIES for f in report_files(s)],
                *[f"workflow/schemas/{s}.schema.yaml" for s in STUDIES],
                *RENDER_CODE,
            ),
        script:
            "../scripts/reproduce.py"

else:

    localrules:
        reproduction_none,

    rule reproduction_none:
        output:
            snippet=REPRO["snippet"],
            numbers=REPRO["numbers"],
        log:
            f"{LOGS}/reproduction_none.log",
        conda:
            "../envs/render.yaml"
        params:
            # a second run configured for this folder, of other code than its rows' (common.smk)
            other_code=OTHER_CODE_CANDIDATE,
            # every study's verdicts read "no second run" in the claims table
            studies=STUDIES,
            # the criterion a second run would be judged by (Method states it)
            tolerance=config["reproduce"]["tolerance"],
            min_within=config["reproduce"]["min_within"],
            code=code_version(
                "kernels/paper/reproduce.py",
                "kernels/paper/reproduce_report.py",
                *[f for s in STUDIES for f in report_files(s)],
            ),
        script:
            "../scripts/reproduction_none.py"


if QUICK:

    localrules:
        quick_claims,

    rule quick_claims:
        input:
            candidate=[f for s in STUDIES for f in raw_files(s)],
            # every committed model's rows: each claim beside its verdict on the same cases
            committed=[
                str(p)
                for s in STUDIES
                for p in sorted(Path("data/raw").glob(f"*/{s}/*.jsonl"))
            ],
        output:
            csv=QUICK_CLAIMS["csv"],
            text=QUICK_CLAIMS["text"],
        log:
            f"{LOGS}/quick_claims.log",
        conda:
            "../envs/render.yaml"
        params:
            gpu=GPU,
            folder=lambda w: f"{RAW}/{GPU}",
            sections={s: config[s][SWEEP] for s in STUDIES},
            # the committed rows are current or stale against the sweep's fingerprint
            sweeps={s: config[s]["sweep"] for s in STUDIES},
            timing=config["timing"],
            code=code_version(
                "kernels/paper/quick.py",
                "kernels/paper/models.py",
                "kernels/paper/bounds.py",
                "kernels/paper/reproduce.py",
                "kernels/paper/claims.py",
                "kernels/paper/provenance.py",
                "kernels/paper/rows.py",
                *[f for s in STUDIES for f in report_files(s)],
                *RENDER_CODE,
            ),
        script:
            "../scripts/quick_claims.py"


onsuccess:
    # the lines a reviewer reads, at the end of Snakemake's output: the quick run's claims, then the
    # reproduction check's line
    for _path in (
        QUICK_CLAIMS["text"] if QUICK else None,
        REPRO["summary"] if CANDIDATE else None,
    ):
        if _path and Path(_path).exists():
            print(Path(_path).read_text().strip())
