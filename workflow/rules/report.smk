# From raw rows to tidy tables, figures, LaTeX tables and the numbers quoted in the paper.


rule collect:
    input:
        lambda w: raw_files(w.study),
    output:
        f"{TIDY}/{{study}}.csv",
    wildcard_constraints:
        study="|".join(STUDIES),
    params:
        gpu=GPU,
    conda:
        "../envs/render.yaml"
    log:
        f"{LOGS}/collect_{{study}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/collect_{{study}}.tsv"
    script:
        "../scripts/collect.py"


rule figure:
    input:
        lambda w: f"{TIDY}/{figure_study(w)}.csv",
    output:
        report(f"{FIGURES_DIR}/{{name}}.pdf", category="Figures"),
    wildcard_constraints:
        name="|".join(n for s in STUDIES for n in FIGURES[s]),
    params:
        study=figure_study,
    conda:
        "../envs/render.yaml"
    log:
        f"{LOGS}/figure_{{name}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/figure_{{name}}.tsv"
    script:
        "../scripts/figure.py"


rule table:
    input:
        lambda w: f"{TIDY}/{table_study(w)}.csv",
    output:
        f"{PAPER_DIR}/generated/{{name}}.tex",
    wildcard_constraints:
        name="|".join(n for s in STUDIES for n in TABLES[s]),
    params:
        study=table_study,
    conda:
        "../envs/render.yaml"
    log:
        f"{LOGS}/table_{{name}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/table_{{name}}.tsv"
    script:
        "../scripts/table.py"


rule numbers:
    input:
        expand(f"{TIDY}/{{study}}.csv", study=STUDIES),
    output:
        f"{PAPER_DIR}/generated/numbers.tex",
    params:
        studies=STUDIES,
    conda:
        "../envs/render.yaml"
    log:
        f"{LOGS}/numbers.log",
    benchmark:
        f"{RESULTS}/benchmarks/numbers.tsv"
    script:
        "../scripts/numbers.py"


rule floats:
    output:
        f"{PAPER_DIR}/generated/{{study}}_floats.tex",
    wildcard_constraints:
        study="|".join(STUDIES),
    conda:
        "../envs/render.yaml"
    log:
        f"{LOGS}/floats_{{study}}.log",
    script:
        "../scripts/floats.py"
