"""The paper artifact's DAG: measure five GPU kernel studies, collect the
rows into tidy tables, draw figures, write LaTeX tables and numbers, build
the PDF. See README.md for the modes (measure, render, smoke, quick)."""

import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

sys.path.insert(0, workflow.basedir)


configfile: "config/config.yaml"


# One file per study: config/studies/<study>.yaml holds its sweeps.
for _study_config in sorted(Path(workflow.basedir, "config", "studies").glob("*.yaml")):

    configfile: _study_config


include: "workflow/rules/common.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/reproduce.smk"
include: "workflow/rules/paper.smk"


localrules:
    all,


rule all:
    input:
        ALL_OUTPUTS,
