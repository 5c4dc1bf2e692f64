"""Snakemake script of rule `quick_claims`: the quick run's claims on this GPU, beside every committed model's."""

from kernels.core.logs import setup_logging
from kernels.paper.quick import check

setup_logging(snakemake.log[0])  # noqa: F821
params, out = snakemake.params, snakemake.output  # noqa: F821
check(list(snakemake.input.candidate), raw="data/raw", gpu=params.gpu, folder=params.folder,  # noqa: F821
      sections={s: dict(v) for s, v in params.sections.items()}, sweeps={s: dict(v) for s, v in params.sweeps.items()},
      timing=dict(params.timing), out_csv=out.csv, out_text=out.text)
