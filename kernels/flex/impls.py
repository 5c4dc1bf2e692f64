"""The registry of the FlexAttention study's implementations (:class:`kernels.core.registry.Impl`): what
each is called and drawn as; the study's names, the report's order and the figures' colours come
from here (the config and row schemas take the names from here too: kernels.core.checks.validator)."""

from kernels.core.registry import Impl

#: The study's display name (tables and captions that name studies: kernels.paper.style.study_label).
STUDY_LABEL = "FlexAttention"

#: The tags of an entry: how the study calls an implementation that names no op.
TAGS = {"block_mask": "FlexAttention called with the case's block mask (kernels.flex.ops: MODES, BACKENDS)",
        "materialised": "a baseline on the mask materialised as a dense boolean tensor"}
_BLOCK, _MATERIALISED = frozenset({"block_mask"}), frozenset({"materialised"})

#: The implementations, in the order of the paper's legends and tables. An entry with an ``op`` is a
#: dense causal baseline, ``op(q, k, v) -> o`` (kernels.flex.dense), run once per shape with the
#: causal mask; one tagged ``block_mask`` is FlexAttention with its mode and backend in
#: kernels.flex.ops (``MODES``, ``BACKENDS``); kernels.flex.study's ``prepare`` builds the call of the
#: ``materialised`` ones.
IMPLS = {
    "flex": Impl("Flex", "#55A868", tags=_BLOCK),
    "flex_autotune": Impl("Flex autotuned", "#8C8C8C", tags=_BLOCK),
    "flex_flash": Impl("Flex FLASH", "#8172B3", tags=_BLOCK),
    "sdpa_flash": Impl("FA2", "#DD8452", op="kernels.flex.dense:sdpa_flash"),
    "sdpa_cudnn": Impl("cuDNN", "#C44E52", op="kernels.flex.dense:sdpa_cudnn"),
    "sdpa_efficient": Impl("mem.-efficient", "#CCB974", op="kernels.flex.dense:sdpa_efficient"),
    "sdpa_masked": Impl("SDPA + mask", "#64B5CD", tags=_MATERIALISED),
    "naive": Impl("naive", "#4C72B0", tags=_MATERIALISED),
}
