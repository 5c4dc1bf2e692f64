"""flash-linear-attention's own Gated DeltaNet tests, run against this project's chunked kernels.

A pytest plugin. With FLA installed (the ``anchors`` extra pins it), its tests taken from FLA's
repository at the pinned release's tag (the wheels ship no tests) and this project importable
(run from its root, or installed)::

    python -m kernels.gdn.fla_suite <FLA>/tests/ops/test_gdn.py [pytest's arguments]

runs ``python -m pytest -p kernels.gdn.fla_suite <FLA>/tests/ops/test_gdn.py -k SELECTION``
(:func:`main`; a ``-k`` among the arguments replaces ``SELECTION``). Before pytest imports the tests, the plugin replaces FLA's op
(``chunk_gated_delta_rule`` and its alias ``chunk_gdn``, in ``fla.ops.gated_delta_rule`` and in
``fla.ops``, where tests import it from) with :func:`fla_chunk_gated_delta_rule`, which calls
:func:`kernels.gdn.chunk.chunk_gated_delta_rule`; a collected test module that still holds FLA's
op under any name stops the run (a usage error). The run's header line names both ops and FLA's
version. A call asking for what the project's op lacks (a keyword such as ``chunk_size`` other
than 64, ``state_v_first``, ``use_gate_in_kernel``, ``use_beta_sigmoid_in_kernel``, or a head
dimension outside :data:`kernels.gdn.validate.SUPPORTED_HEAD_DIMS`) skips its test with the
reason; every other outcome is FLA's test's.

``SELECTION`` keeps the tests that compare the op with FLA's own reference (its naive
recurrence in PyTorch): FLA's other chunk tests take the op itself as their
reference (beta and gate computed in the kernel, the transposed state layout), FlashQLA's tests
check FLA's backend dispatch, and the Blackwell guard checks FLA's kernel. FLA's backend
dispatch is off (``FLA_DISABLE_BACKEND_DISPATCH=1``), so that FLA runs its grouped-value cases;
``TRITON_F32_DEFAULT``, which FLA's varlen tests set to ``ieee`` and leave set, is restored after
every test, so that no test's float32 products depend on the tests before it.

Without a CUDA GPU, Triton runs in the interpreter (``TRITON_INTERPRET=1``) and FLA's tests
allocate on the CPU (``fla.utils.device``): slow, a check of small cases. ``TRITON_INTERPRET`` is set
when pytest imports this plugin, before anything imports Triton; ``FLA_DISABLE_BACKEND_DISPATCH`` when
the plugin starts (:func:`pytest_load_initial_conftests`), before it imports FLA, and not by importing
this module: the project's own tests import it, and FLA's dispatch stays on in their processes (with it
off, FLA's gated backward on Hopper with Triton 3.6 raises instead of running TileLang's).
"""

from __future__ import annotations

import os

import pytest
import torch

#: The ``-k`` expression of FLA's tests that check the op against FLA's own references.
SELECTION = ("test_chunk and not flash_qla and not blackwell and not sigmoid_in_kernel and not gate_in_kernel"
             " and not state_v_first")
#: FLA's modules that export its op, and the names they export it under.
FLA_MODULES = ("fla.ops.gated_delta_rule", "fla.ops")
OP_NAMES = ("chunk_gated_delta_rule", "chunk_gdn")
#: FLA's keywords that the project's op takes with the same meaning.
_SHARED = ("scale", "initial_state", "output_final_state", "cu_seqlens", "use_qk_l2norm_in_kernel")

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def fla_chunk_gated_delta_rule(q, k, v, g, beta, **kwargs):
    """FLA's ``chunk_gated_delta_rule(q, k, v, g, beta, **kwargs)`` computed by
    :func:`kernels.gdn.chunk.chunk_gated_delta_rule`.

    Args: FLA's (``q``, ``k`` ``[B, T, H, K]``; ``v`` ``[B, T, HV, V]``; ``g``, ``beta``
        ``[B, T, HV]``; keywords of ``_SHARED``). ``initial_state`` ``[N, HV, K, V]`` of any
        float dtype enters as float32 (the project's op keeps its state in float32, as FLA's
        does; the cast is differentiable, so its gradient reaches the caller's dtype).
    Returns:
        ``(o [B, T, HV, V] in v's dtype, final_state [N, HV, K, V] float32 or None)``.
    Raises:
        pytest's skip exception for a keyword outside ``_SHARED`` whose value is not None or
        False (or ``chunk_size`` other than 64), or for K or V outside the supported head
        dimensions; any error of the project's op (:func:`kernels.gdn.validate.check_inputs`).
    """
    from kernels.gdn.chunk import chunk_gated_delta_rule
    from kernels.gdn.constants import CHUNK_SIZE
    from kernels.gdn.validate import SUPPORTED_HEAD_DIMS

    other = {n: x for n, x in kwargs.items() if n not in _SHARED}
    if other.get("chunk_size") == CHUNK_SIZE:
        del other["chunk_size"]
    asked = sorted(n for n, x in other.items() if x is not None and x is not False)
    if asked:
        pytest.skip(f"kernels.gdn.chunk_gated_delta_rule has no {', '.join(asked)}")
    dims = (q.shape[-1], v.shape[-1])
    if any(d not in SUPPORTED_HEAD_DIMS for d in dims):
        pytest.skip(f"head dims (K, V) = {dims}: kernels.gdn supports {SUPPORTED_HEAD_DIMS}")
    shared = {n: kwargs[n] for n in _SHARED if n in kwargs}
    h0 = shared.get("initial_state")
    if h0 is not None:
        shared["initial_state"] = h0.float()
    return chunk_gated_delta_rule(q, k, v, g, beta, **shared)


def pytest_load_initial_conftests(early_config, parser, args):
    """Replace FLA's op before any conftest or test module imports it; without CUDA, point FLA's
    tests at the CPU (FLA picks CUDA whenever it is not on an accelerator it knows). FLA's backend
    dispatch is turned off first (FLA reads ``FLA_DISABLE_BACKEND_DISPATCH`` when it is imported)."""
    import importlib
    import sys

    if "fla" in sys.modules and os.environ.get("FLA_DISABLE_BACKEND_DISPATCH") != "1":
        raise pytest.UsageError("kernels.gdn.fla_suite: FLA was imported before the plugin, with its backend "
                                "dispatch on; run python -m kernels.gdn.fla_suite <FLA>/tests/ops/test_gdn.py")
    os.environ["FLA_DISABLE_BACKEND_DISPATCH"] = "1"

    originals = set()
    for name in FLA_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise pytest.UsageError(f"kernels.gdn.fla_suite needs FLA ({name}): {exc}") from exc
        for op in OP_NAMES:
            if hasattr(module, op):
                originals.add(getattr(module, op))
                setattr(module, op, fla_chunk_gated_delta_rule)
    early_config._fla_originals = originals - {fla_chunk_gated_delta_rule}
    if not torch.cuda.is_available():
        import fla.utils
        fla.utils.device, fla.utils.device_torch_lib = "cpu", torch.cpu


def pytest_report_header(config):
    import fla

    where = ", ".join(sorted(f"{op.__module__}.{op.__name__}" for op in getattr(config, "_fla_originals", ())))
    return (f"kernels.gdn.fla_suite: {FLA_MODULES[0]}.{OP_NAMES[0]} ({where or '?'}, FLA {fla.__version__}) -> "
            f"kernels.gdn.chunk.chunk_gated_delta_rule")


def pytest_collection_modifyitems(config, items):
    """Stop (usage error) if a collected test module holds FLA's op under any name."""
    originals = getattr(config, "_fla_originals", set())
    for module in {getattr(item, "module", None) for item in items} - {None}:
        held = sorted(name for name, x in vars(module).items() if any(x is op for op in originals))
        if held:
            raise pytest.UsageError(f"{module.__file__}: {', '.join(held)} is FLA's op, not kernels.gdn.fla_suite's "
                                    "replacement (imported before the plugin ran?)")


@pytest.fixture(autouse=True)
def _triton_f32_default():
    """``TRITON_F32_DEFAULT`` as it was before each test, after it."""
    saved = os.environ.get("TRITON_F32_DEFAULT")
    yield
    if saved is None:
        os.environ.pop("TRITON_F32_DEFAULT", None)
    else:
        os.environ["TRITON_F32_DEFAULT"] = saved


def main(argv: list[str] | None = None) -> int:
    """``python -m kernels.gdn.fla_suite TEST_FILE [pytest's arguments]``: pytest's exit code for
    FLA's TEST_FILE with this plugin and ``-k SELECTION`` (a later ``-k`` replaces it)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        raise SystemExit("usage: python -m kernels.gdn.fla_suite <FLA>/tests/ops/test_gdn.py [pytest's arguments]")
    return int(pytest.main(["-p", "kernels.gdn.fla_suite", "-rs", args[0], "-k", SELECTION, *args[1:]]))


if __name__ == "__main__":
    raise SystemExit(main())
