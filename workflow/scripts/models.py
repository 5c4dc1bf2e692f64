"""Snakemake script of rule `models`: each claim on every committed GPU model, device time across models,
every measuring run with its role, outcome and GPU factor against its model's committed rows, and each
quoted value across the GPUs of a model."""

from kernels.core.logs import setup_logging
from kernels.paper.models import render_models

setup_logging(snakemake.log[0])  # noqa: F821
params, out = snakemake.params, snakemake.output  # noqa: F821
render_models(params.raw, params.gpu, list(params.studies), {s: dict(v) for s, v in params.sections.items()},
              dict(params.timing), out.tex, out.claims, out.ratios, out.figure, reproductions=params.reproductions,
              tolerance=float(params.tolerance), runs_out=(out.runs, out.runs_tex),
              checked=dict(params.checked), min_within=float(params.min_within),
              uncertainty_out=(out.uncertainty, out.uncertainty_tex))
