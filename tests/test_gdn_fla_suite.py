"""kernels.gdn.fla_suite: the adapter that FLA's own tests call, and the plugin's wiring (run on a
stand-in ``fla`` package in a pytest subprocess; FLA itself is a GPU-host anchor, not installed here)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from test_gdn_kernels import DEV, inputs  # noqa: E402

from kernels.gdn.chunk import chunk_gated_delta_rule  # noqa: E402
from kernels.gdn.fla_suite import fla_chunk_gated_delta_rule  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("extra, named", [(dict(chunk_size=32), "chunk_size"),
                                          (dict(state_v_first=True), "state_v_first"),
                                          (dict(use_gate_in_kernel=True, A_log=torch.zeros(1)), "A_log, use_gate_in_kernel")])
def test_unsupported_keyword_skips_naming_it(extra, named):
    q, k, v, g, beta, _ = inputs(1, 64, 1, 64, dtype=torch.float32)
    with pytest.raises(pytest.skip.Exception, match=f"has no {named}$"):
        fla_chunk_gated_delta_rule(q, k, v, g, beta, **extra)


def test_unsupported_head_dim_skips():
    q, k, v, g, beta = (x[..., :60] if x.dim() == 4 else x for x in inputs(1, 64, 1, 64, dtype=torch.float32)[:5])
    with pytest.raises(pytest.skip.Exception, match=r"head dims \(K, V\) = \(60, 60\)"):
        fla_chunk_gated_delta_rule(q, k, v, g, beta)


def test_same_as_the_op_with_defaults_and_a_16_bit_initial_state():
    """Keywords at their default (chunk_size 64, flags False, None) pass; a float16 initial
    state enters as float32 and its gradient comes back in float16."""
    q, k, v, g, beta, _ = inputs(1, 100, 2, 64, dtype=torch.float16, seed=1)
    h0 = torch.randn(1, 2, 64, 64, device=DEV).half().requires_grad_()
    o, ht = fla_chunk_gated_delta_rule(q, k, v, g, beta, scale=0.5, initial_state=h0, output_final_state=True,
                                       chunk_size=64, state_v_first=False, use_gate_in_kernel=False, A_log=None)
    want_o, want_ht = chunk_gated_delta_rule(q, k, v, g, beta, scale=0.5, initial_state=h0.detach().float(),
                                             output_final_state=True)
    assert torch.equal(o, want_o) and torch.equal(ht, want_ht)
    (grad,) = torch.autograd.grad(ht.sum(), h0)
    assert grad.dtype == torch.float16 and torch.isfinite(grad).all()


_FAKE_FLA = {
    "fla/__init__.py": "__version__ = '0.0-stand-in'\n",
    "fla/utils.py": "import torch\ndevice = 'cuda'\ndevice_torch_lib = torch.cuda\n",
    "fla/ops/__init__.py": "from .gated_delta_rule import chunk_gated_delta_rule, chunk_gdn\n",
    "fla/ops/gated_delta_rule/__init__.py": "from .chunk import chunk_gated_delta_rule, chunk_gdn\n",
    "fla/ops/gated_delta_rule/chunk.py": ("def chunk_gated_delta_rule(*args, **kwargs):\n"
                                          "    raise RuntimeError(\"FLA's own op ran\")\n\n\n"
                                          "chunk_gdn = chunk_gated_delta_rule\n"),
    # FLA's conftest imports fla first: the op must be replaced and the settings made by then
    "tests/conftest.py": textwrap.dedent("""\
        import os
        import torch
        import fla.ops
        import fla.ops.gated_delta_rule as gdr
        from fla.utils import device

        assert all(getattr(m, n).__module__ == "kernels.gdn.fla_suite"
                   for m in (fla.ops, gdr) for n in ("chunk_gated_delta_rule", "chunk_gdn"))
        assert os.environ.get("FLA_DISABLE_BACKEND_DISPATCH") == "1"
        assert torch.cuda.is_available() or (os.environ.get("TRITON_INTERPRET") == "1" and device == "cpu")
        """),
    "tests/test_uses_op.py": textwrap.dedent("""\
        import os
        import torch
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        from fla.utils import device

        def test_chunk_runs_the_project_op():
            q = torch.nn.functional.normalize(torch.randn(1, 64, 1, 16), dim=-1).to(device)
            g = -torch.rand(1, 64, 1).to(device)
            o, ht = chunk_gated_delta_rule(q=q, k=q, v=torch.randn(1, 64, 1, 16).to(device), g=g,
                                           beta=torch.rand(1, 64, 1).to(device), output_final_state=True)
            assert o.shape == (1, 64, 1, 16) and ht.shape == (1, 1, 16, 16)
            os.environ["TRITON_F32_DEFAULT"] = "ieee"   # as FLA's varlen tests do, and leave it set

        def test_chunk_unsupported_skips():
            assert "TRITON_F32_DEFAULT" not in os.environ
            chunk_gated_delta_rule(q=None, k=None, v=None, g=None, beta=None, chunk_size=16)

        def test_chunk_gate_in_kernel():   # compares FLA's op with itself in FLA: left out by SELECTION
            raise AssertionError("selected")
        """),
}


def _run_plugin(tmp_path, files):
    """``python -m kernels.gdn.fla_suite tests/test_uses_op.py`` on ``files`` (a stand-in FLA and its
    tests) in ``tmp_path``, with none of the plugin's settings inherited from this process."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {n: x for n, x in os.environ.items()
           if n not in ("TRITON_INTERPRET", "FLA_DISABLE_BACKEND_DISPATCH", "TRITON_F32_DEFAULT")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    return subprocess.run([sys.executable, "-m", "kernels.gdn.fla_suite", "tests/test_uses_op.py", "-p",
                           "no:cacheprovider"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_importing_the_plugin_leaves_flas_dispatch_on():
    """The project's tests import the plugin (this file does, in every pytest-xdist lane): importing it
    must not turn FLA's backend dispatch off for the other tests of the process (FLA's gated backward
    on Hopper with Triton 3.6 raises without it); the plugin turns it off when pytest starts it."""
    env = {k: v for k, v in os.environ.items() if k != "FLA_DISABLE_BACKEND_DISPATCH"}
    proc = subprocess.run([sys.executable, "-c", "import os, kernels.gdn.fla_suite; "
                           "print(os.environ.get('FLA_DISABLE_BACKEND_DISPATCH'))"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"


def test_plugin_replaces_the_op_before_fla_and_its_tests_are_imported(tmp_path):
    run = _run_plugin(tmp_path, _FAKE_FLA)
    assert run.returncode == 0, run.stdout + run.stderr
    assert ("kernels.gdn.fla_suite: fla.ops.gated_delta_rule.chunk_gated_delta_rule "
            "(fla.ops.gated_delta_rule.chunk.chunk_gated_delta_rule, FLA 0.0-stand-in) -> "
            "kernels.gdn.chunk.chunk_gated_delta_rule") in run.stdout
    assert "1 passed, 1 skipped, 1 deselected" in run.stdout and "has no chunk_size" in run.stdout


@pytest.mark.parametrize("line, held", [
    ("from fla.ops.gated_delta_rule.chunk import chunk_gated_delta_rule", "chunk_gated_delta_rule"),
    ("from fla.ops.gated_delta_rule.chunk import chunk_gdn as gdn", "gdn")])
def test_plugin_stops_where_a_test_module_holds_flas_op(tmp_path, line, held):
    files = dict(_FAKE_FLA)
    files["tests/test_uses_op.py"] = f"{line}\n\n\ndef test_chunk_any():\n    pass\n"
    run = _run_plugin(tmp_path, files)
    assert run.returncode != 0
    assert f"{held} is FLA's op, not kernels.gdn.fla_suite's replacement" in run.stdout + run.stderr


def test_main_needs_the_test_file():
    from kernels.gdn.fla_suite import main

    with pytest.raises(SystemExit, match="usage: python -m kernels.gdn.fla_suite"):
        main([])
