"""Test setup: Triton in the interpreter when there is no CUDA GPU, and the
`gpu` marker for tests that need one (skipped on CPU machines)."""

import os
from pathlib import Path

import pytest
import torch
import yaml

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before any test module imports triton


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (run on the H200 with `pytest -m gpu`)")
    config.addinivalue_line("markers", "slow: runs the Snakemake DAG (minutes)")
    config.addinivalue_line("markers", "slurm: submits jobs to a SLURM cluster (as root: .ci/slurm-up); "
                                       "skipped without one")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device():
    return torch.device("cuda" if HAS_CUDA else "cpu")


def configured_timing(**overrides) -> dict:
    """The ``timing`` block of config/config.yaml, with ``overrides`` (short warm-ups for tests)."""
    config = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "config.yaml").read_text())
    return {**config["timing"], **overrides}
