# Measurement: one job per (study, implementation), one GPU each.

if MEASURE:
    if workflow.is_main_process and "gpu" not in workflow.global_resources:
        raise WorkflowError(
            "measurement jobs need a GPU limit so that two never share a GPU: run with the "
            "default profile (profiles/default sets resources gpu=1) or pass --resources gpu=N"
        )

    if not SMOKE:

        onstart:
            check_measuring_run()

    rule measure:
        output:
            f"{RAW}/{GPU}/{{study}}/{{impl}}.jsonl",
        log:
            f"{LOGS}/measure_{{study}}_{{impl}}.log",
        benchmark:
            f"{BENCH}/measure_{{study}}_{{impl}}.tsv"
        wildcard_constraints:
            study="|".join(STUDIES),
            impl="[a-z0-9_]+",
        conda:
            "../envs/measure.yaml"
        resources:
            gpu=1,
        params:
            sweep=lambda w: config[w.study][SWEEP],
            timing=config["timing"],
            ahead_workers=lambda w: (
                config["compile_ahead"]["workers"]
                if w.impl in config["compile_ahead"]["impls"].get(w.study, [])
                else 0
            ),
            interpret=SMOKE,
            gpus=N_GPUS,
        script:
            "../scripts/measure.py"
