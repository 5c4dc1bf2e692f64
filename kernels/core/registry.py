"""Each study's implementation registry (``kernels/<study>/impls.py``, ``IMPLS``): what the study
measures under each name (:class:`Impl`), read by the studies, the schemas (:mod:`kernels.core.checks`)
and the reports (:mod:`kernels.paper.style`). Part of the measurement core: importing it imports no torch
and no plotting library.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple


class Impl(NamedTuple):
    """One implementation of a study, in its registry (``kernels/<study>/impls.py``, ``IMPLS``, in the
    order of the paper's legends and tables): its display name in every legend, table and caption,
    its colour in every figure, the passes it has, and, where the study calls every implementation
    the same way (gdn: FLA's ``chunk_gated_delta_rule`` signature), the ``"module:function"`` it
    calls (None where the study's ``prepare`` builds the call), and its ``tags``: the other ways the
    study runs it, from the study's registry's ``TAGS`` (``kernels/<study>/impls.py``)."""

    label: str
    color: str
    passes: tuple[str, ...] = ("fwd", "bwd", "fwdbwd")
    op: str | None = None
    tags: frozenset[str] = frozenset()

    def load(self):
        """The callable that ``op`` names: its module imported, then each dotted attribute after the
        colon (``"liger_kernel.ops.swiglu:LigerSiLUMulFunction.apply"``).

        Raises ValueError where the entry names no op; ImportError (ModuleNotFoundError) where its
        module is not installed; AttributeError where the module has no such attribute.
        """
        if self.op is None:
            raise ValueError(f"{self.label!r} names no op")
        module, _, path = self.op.partition(":")
        target = importlib.import_module(module)
        for name in path.split("."):
            target = getattr(target, name)
        return target


def registry_module(study: str):
    """``kernels.<study>.impls``, or None for a study without one."""
    try:
        return importlib.import_module(f"kernels.{study}.impls")
    except ModuleNotFoundError:
        return None


def registry(study: str) -> dict[str, Impl]:
    """The implementations of ``study`` (``kernels.<study>.impls.IMPLS``; empty for a study without one)."""
    module = registry_module(study)
    return module.IMPLS if module else {}
