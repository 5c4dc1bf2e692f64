# Measurement: one job per (study, implementation), one GPU each.

# GPUs the leases pick from (kernels/core/gpulease.py): those of the host, at most resource gpu of them
LEASE_GPUS = (
    min(N_GPUS, workflow.global_resources["gpu"].value)
    if "gpu" in workflow.global_resources
    else N_GPUS
)

# the studies' compile-ahead jobs share the host's CPUs side by side, here (kernels.core.ahead: one
# process per core in all); on a cluster each job is its own allocation
AHEAD_WORKERS = max(
    1,
    config["compile_ahead"]["workers"]
    // (
        max(len(AHEAD_STUDIES), 1)
        if workflow.local_exec and not workflow.remote_exec
        else 1
    ),
)

if MEASURE:
    if workflow.is_main_process and "gpu" not in workflow.global_resources:
        raise WorkflowError(
            "measurement jobs need a GPU limit so that two never share a GPU: run with the "
            "default profile (profiles/default sets resources gpu=1) or pass --resources gpu=N"
        )
    # twice GPU_SLOTS per GPU that the leases pick from (common.smk) unless given: a measurement
    # job takes GPU_SLOTS, so the next one starts (its imports) while one measures, and waits for
    # the GPU's lease (gpu=8 on a 2-GPU host starts the jobs of 2 GPUs, not of 8)
    if workflow.is_main_process and "gpu_slots" not in workflow.global_resources:
        workflow.register_resource("gpu_slots", 2 * GPU_SLOTS * LEASE_GPUS)

    if not SMOKE:

        onstart:
            check_measuring_run()

    if AHEAD:

        # one job per study, so that a rerun of one study's jobs leaves the others' rows alone; all
        # of them first, side by side (gpu_slots, common.smk), then the measurements
        rule compile_ahead:
            output:
                temp(ahead_file("{study}")),
            log:
                f"{LOGS}/compile_ahead_{{study}}.log",
            benchmark:
                f"{BENCH}/compile_ahead_{{study}}.tsv"
            wildcard_constraints:
                study="|".join(AHEAD_STUDIES),
            priority: 1
            conda:
                "../envs/measure.yaml"
            resources:
                gpu_slots=1,
            params:
                jobs=lambda w: [
                    {
                        "study": study,
                        "impl": impl,
                        "sweep": config[study][SWEEP],
                        "output": f"{RAW}/{GPU}/{study}/{impl}.jsonl",
                        "checkpoint": checkpoint_file(study, impl),
                    }
                    for study, impl in AHEAD
                    if study == w.study
                ],
                timing=config["timing"],
                workers=AHEAD_WORKERS,
                raw=f"{RAW}/{GPU}",
                # the folder names the GPU that measures (common.smk)
                require_gpu=REQUIRE_GPU,
                # the study is measured again although its rows are there (stale_file): prepare
                # every implementation's cases, not only those without rows
                remeasure=lambda w: w.study in MEASURED and not SMOKE and not QUICK,
                gpus=LEASE_GPUS,
                lease_record=lambda w: record_path(
                    f"{BENCH}/compile_ahead_{w.study}.tsv"
                ),
            script:
                "../scripts/compile_ahead.py"

    rule measure:
        input:
            ahead=lambda w: [ahead_file(w.study)] if (w.study, w.impl) in AHEAD else [],
            stale=lambda w: (
                [stale_file(w.study)] if Path(stale_file(w.study)).exists() else []
            ),
        output:
            f"{RAW}/{GPU}/{{study}}/{{impl}}.jsonl",
        log:
            f"{LOGS}/measure_{{study}}_{{impl}}.log",
        benchmark:
            f"{BENCH}/measure_{{study}}_{{impl}}.tsv"
        wildcard_constraints:
            # the studies this run measures: the others' rows are inputs, never outputs
            study="|".join(MEASURED) or "^$",
            impl="[a-z0-9_]+",
        conda:
            "../envs/measure.yaml"
        resources:
            gpu_slots=GPU_SLOTS,
        params:
            sweep=lambda w: config[w.study][SWEEP],
            timing=config["timing"],
            # the study's code and config: a change reruns the job (Snakemake's params trigger);
            # the job records it in every row (kernels.core.jobs.run_job)
            fingerprint=lambda w: FINGERPRINTS[w.study]["digest"],
            checkpoint=lambda w: checkpoint_file(w.study, w.impl),
            ahead_workers=lambda w: (
                config["compile_ahead"]["workers"] if (w.study, w.impl) in AHEAD else 0
            ),
            interpret=SMOKE,
            # the folder names the GPU that measures (common.smk)
            require_gpu=REQUIRE_GPU,
            gpus=LEASE_GPUS,
            lease_record=lambda w: record_path(
                f"{BENCH}/measure_{w.study}_{w.impl}.tsv"
            ),
        script:
            "../scripts/measure.py"
