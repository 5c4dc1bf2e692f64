# The paper PDF, built with latexmk from paper/main.tex, the generated tables,
# numbers and the figures.

PAPER_SOURCES = ["paper/main.tex", "paper/references.bib"]


if PAPER_DIR != "paper":

    localrules:
        paper_sources,

    rule paper_sources:
        input:
            PAPER_SOURCES,
        output:
            [f"{PAPER_DIR}/{Path(p).name}" for p in PAPER_SOURCES],
        conda:
            "../envs/render.yaml"
        shell:
            "cp {input} {PAPER_DIR}/"


# the paper needs every study: a run of a subset makes none (common.smk, SUBSET_LEFT_OUT)
if not SUBSET_LEFT_OUT:

    # On a cluster (profiles/slurm) the PDF is built on the submit host.
    localrules:
        paper,

    rule paper:
        input:
            [f"{PAPER_DIR}/{Path(p).name}" for p in PAPER_SOURCES],
            ALL_FIGURES,
            ALL_TABLES,
            ALL_FLOATS,
            f"{PAPER_DIR}/generated/numbers.tex",
            f"{PAPER_DIR}/generated/coverage.tex",
            f"{PAPER_DIR}/generated/provenance.tex",
            MODELS["tex"],
            MODELS["figure"],
            MODELS["runs_tex"],
            MODELS["uncertainty_tex"],
            # the appendix on a second run: its figure when there is one
            [
                REPRO["snippet"],
                REPRO["numbers"],
                *([REPRO["figure"]] if CANDIDATE else []),
            ],
        output:
            f"{PAPER_DIR}/main.pdf",
        log:
            f"{LOGS}/paper.log",
        benchmark:
            f"{RESULTS}/benchmarks/paper.tsv"
        conda:
            "../envs/render.yaml"
        script:
            "../scripts/paper.py"
