"""GDN study cases: passes per impl, the naive loop's limit, per-impl backward shapes."""

from pathlib import Path

import pytest
import yaml

from kernels.gdn.study import cases

SWEEP = {
    "impls": ["naive", "recurrent", "chunk", "flash_qla"],
    "passes": ["fwd", "bwd", "fwdbwd"],
    "dtype": "bfloat16", "head_dim": 64, "naive_max_seqlen": 100,
    "main_shapes": [{"batch": 2, "seqlen": 64, "heads": 2}],
    "seqlen_sweep": {"batch": 1, "heads": 2, "seqlens": [100, 200]},
    "varlen": [{"num_seqs": 3, "seqlen": 90, "heads": 2}],
    "backward": {
        "naive_max_seqlen": 64,
        "main_shapes": [{"batch": 2, "seqlen": 64, "heads": 2}, {"batch": 1, "seqlen": 128, "heads": 2}],
        "seqlen_sweep": {"batch": 1, "heads": 2, "seqlens": [32]},
        "impl_shapes": {"flash_qla": [{"batch": 1, "seqlen": 128, "heads": 2}]},
    },
}


def shapes(rows, pas):
    return [(c["batch"], c["seqlen"], c["heads"], c["varlen"]) for c in rows if c["pass"] == pas]


def test_passes_and_shapes_per_impl():
    chunk = cases(SWEEP, "chunk")
    assert shapes(chunk, "fwd") == [(2, 64, 2, False), (1, 100, 2, False), (1, 200, 2, False), (1, 90, 2, True)]
    assert shapes(chunk, "bwd") == shapes(chunk, "fwdbwd") == [(2, 64, 2, False), (1, 128, 2, False),
                                                               (1, 32, 2, False)]
    assert {c["pass"] for c in cases(SWEEP, "recurrent")} == {"fwd"}
    qla = cases(SWEEP, "flash_qla")
    assert shapes(qla, "bwd") == shapes(qla, "fwdbwd") == [(1, 128, 2, False)]
    assert len(shapes(qla, "fwd")) == 4
    only_fwd = {**SWEEP, "impl_shapes": {"flash_qla": [{"batch": 2, "seqlen": 64, "heads": 2}]}}
    assert shapes(cases(only_fwd, "flash_qla"), "fwd") == [(2, 64, 2, False)]
    assert shapes(cases(only_fwd, "flash_qla"), "bwd") == [(1, 128, 2, False)]
    assert shapes(cases(only_fwd, "chunk"), "fwd") == shapes(chunk, "fwd")


def test_naive_beyond_its_limit_is_unsupported_not_extrapolated():
    naive = cases(SWEEP, "naive")
    too_long = [c for c in naive if "unsupported_reason" in c]
    assert {(c["pass"], c["seqlen"]) for c in too_long} == {
        ("fwd", 200), ("bwd", 128), ("fwdbwd", 128)}
    assert all("naive_max_seqlen" in c["unsupported_reason"] for c in too_long)


def test_unknown_impl():
    with pytest.raises(ValueError, match="unknown gdn impl"):
        cases(SWEEP, "flash")


def test_committed_sweep_restricts_flash_qla_backward():
    with open(Path(__file__).parents[1] / "config/studies/gdn.yaml") as f:
        sweep = yaml.safe_load(f)["gdn"]["sweep"]
    qla = cases(sweep, "flash_qla")
    assert shapes(qla, "bwd") == [(4, 8192, 16, False)]
    assert len(shapes(cases(sweep, "fla_chunk"), "bwd")) == 4
