# From raw rows to tidy tables, figures, LaTeX tables and the numbers quoted in the paper.


# Rendering is light: on a cluster (profiles/slurm) these run on the submit host.
localrules:
    collect,
    figure,
    table,
    table_csv,
    numbers,
    floats,
    coverage,
    provenance,
    states,
    models,


rule collect:
    input:
        lambda w: raw_files(w.study),
    output:
        f"{TIDY}/{{study}}.csv",
    log:
        f"{LOGS}/collect_{{study}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/collect_{{study}}.tsv"
    wildcard_constraints:
        study="|".join(STUDIES),
    conda:
        "../envs/render.yaml"
    params:
        gpu=GPU,
        # the config section the rows were measured with: the roles of rows without them
        section=lambda w: config[w.study][SWEEP],
        # rows of today's code and config (measured here, or current): each is a case of the section
        configured=lambda w: (
            w.study in MEASURED
            or (w.study in STATES and STATES[w.study].state == provenance.CURRENT)
        ),
        code=lambda w: [
            report_code(w.study),
            code_version(f"kernels/{w.study}/study.py"),
        ],
    script:
        "../scripts/collect.py"


rule figure:
    input:
        lambda w: f"{TIDY}/{figure_study(w)}.csv",
    output:
        report(f"{FIGURES_DIR}/{{name}}.pdf", category="Figures"),
    log:
        f"{LOGS}/figure_{{name}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/figure_{{name}}.tsv"
    wildcard_constraints:
        name="|".join(n for s in STUDIES for n in FIGURES[s]),
    conda:
        "../envs/render.yaml"
    params:
        study=figure_study,
        code=lambda w: report_code(figure_study(w)),
    script:
        "../scripts/figure.py"


rule table:
    input:
        lambda w: f"{TIDY}/{table_study(w)}.csv",
    output:
        f"{PAPER_DIR}/generated/{{name}}.tex",
    log:
        f"{LOGS}/table_{{name}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/table_{{name}}.tsv"
    wildcard_constraints:
        name="|".join(n for s in STUDIES for n in PAPER_TABLES[s]),
    conda:
        "../envs/render.yaml"
    params:
        study=table_study,
        code=lambda w: report_code(table_study(w)),
    script:
        "../scripts/table.py"


# Every table of the studies as CSV, those the paper sets and those it sends a reader to (by path).
rule table_csv:
    input:
        lambda w: f"{TIDY}/{table_study(w)}.csv",
    output:
        f"{RESULTS}/tables/{{name}}.csv",
    log:
        f"{LOGS}/table_csv_{{name}}.log",
    wildcard_constraints:
        name="|".join(n for s in STUDIES for n in TABLES[s]),
    conda:
        "../envs/render.yaml"
    params:
        study=table_study,
        code=lambda w: report_code(table_study(w)),
    script:
        "../scripts/table_csv.py"


# The timing settings the paper quotes: those its rows were timed with, where their fingerprints
# prove it, even under a --configfile of other settings; and the studies timed with other settings
# (kernels/paper/provenance.py: quoted_timing)
QUOTED_TIMING, OTHER_TIMING = provenance.quoted_timing(
    {
        s: (
            FINGERPRINTS[s]["parts"]["timing"]
            if s in MEASURED
            else STATES[s].timing_part
        )
        for s in STUDIES
        if s in MEASURED or s in STATES
    },
    [config["timing"], provenance.load_config(workflow.basedir)["timing"]],
)


rule numbers:
    input:
        expand(f"{TIDY}/{{study}}.csv", study=STUDIES),
        committed_benchmarks(),
    output:
        f"{PAPER_DIR}/generated/numbers.tex",
    log:
        f"{LOGS}/numbers.log",
    benchmark:
        f"{RESULTS}/benchmarks/numbers.tsv"
    conda:
        "../envs/render.yaml"
    params:
        studies=STUDIES,
        bench=lambda w: BENCH,
        timing=QUOTED_TIMING,
        other_timing=OTHER_TIMING,
        code=lambda w: [report_code(s) for s in STUDIES],
    script:
        "../scripts/numbers.py"


rule floats:
    output:
        f"{PAPER_DIR}/generated/{{study}}_floats.tex",
    log:
        f"{LOGS}/floats_{{study}}.log",
    wildcard_constraints:
        study="|".join(STUDIES),
    conda:
        "../envs/render.yaml"
    params:
        code=lambda w: report_code(w.study),
    script:
        "../scripts/floats.py"


rule coverage:
    input:
        expand(f"{TIDY}/{{study}}.csv", study=STUDIES),
    output:
        f"{PAPER_DIR}/generated/coverage.tex",
    log:
        f"{LOGS}/coverage.log",
    conda:
        "../envs/render.yaml"
    params:
        configured={s: study_impls(s) for s in STUDIES},
        code=code_version(*RENDER_CODE),
    script:
        "../scripts/coverage.py"


rule states:
    output:
        STATES_FILE,
    log:
        f"{LOGS}/states.log",
    conda:
        "../envs/render.yaml"
    params:
        record=STATES_RECORD,
    script:
        "../scripts/states.py"


rule provenance:
    input:
        [f for s in STUDIES for f in raw_files(s)],
        committed_benchmarks(),
        # every other committed model's rows and minutes: the table gives each model's runs
        other_models_files(),
        other_models_benchmarks(),
        # each study's fingerprint and state and the tree (rule states): a change re-renders the table
        STATES_FILE,
    output:
        f"{PAPER_DIR}/generated/provenance.tex",
    log:
        f"{LOGS}/provenance.log",
    conda:
        "../envs/render.yaml"
    params:
        studies=STUDIES,
        # the paper's model first
        folders=lambda w: model_folders(),
        sections={s: config[s][SWEEP] for s in STUDIES},
        timing=config["timing"],
        code=code_version(
            "kernels/paper/provenance.py", "kernels/paper/rows.py", *RENDER_CODE
        ),
    script:
        "../scripts/provenance.py"


# Each claim on every committed GPU model, each implementation's device time on another model
# over this one's (kernels/paper/models.py, kernels/paper/bounds.py), and each quoted value across the GPUs of a model
# (kernels/paper/uncertainty.py).
rule models:
    input:
        [f for s in STUDIES for f in raw_files(s)],
        other_models_files(),
        reproduction_files(),
        # each study's state (rule states): the claims of a stale one say so
        STATES_FILE,
    output:
        tex=MODELS["tex"],
        claims=MODELS["claims"],
        ratios=MODELS["ratios"],
        figure=MODELS["figure"],
        runs=MODELS["runs"],
        runs_tex=MODELS["runs_tex"],
        uncertainty=MODELS["uncertainty"],
        uncertainty_tex=MODELS["uncertainty_tex"],
    log:
        f"{LOGS}/models.log",
    conda:
        "../envs/render.yaml"
    params:
        raw=lambda w: RAW,
        gpu=GPU,
        studies=STUDIES,
        sections={s: config[s][SWEEP] for s in STUDIES},
        timing=config["timing"],
        reproductions=lambda w: REPRODUCTIONS,
        tolerance=config["reproduce"]["tolerance"],
        # the run the reproduction check compares, of each model and study: a role of Table runs
        checked=config["reproduce"]["committed"],
        min_within=config["reproduce"]["min_within"],
        code=code_version(
            "kernels/paper/models.py",
            "kernels/paper/bounds.py",
            "kernels/paper/runs.py",
            "kernels/paper/reproduce_tables.py",
            "kernels/paper/gpu_factor.py",
            "kernels/paper/reproduce.py",
            "kernels/paper/uncertainty.py",
            "kernels/paper/claims.py",
            "kernels/paper/provenance.py",
            "kernels/paper/rows.py",
            *[f for s in STUDIES for f in report_files(s)],
            *RENDER_CODE,
        ),
    script:
        "../scripts/models.py"
