"""The registry of the long-context study's implementations (:class:`kernels.core.registry.Impl`): what
each is called and drawn as, its passes, and its tags; the study's names, the report's order and
the figures' colours come from here (the config and row schemas take the names from here too:
kernels.core.checks.validator).

Every implementation is one of another study's, under the same name: the attention ones are the
FlexAttention study's (:mod:`kernels.flex.impls`; called through :mod:`kernels.longctx.attention`),
the Gated DeltaNet ones the GDN study's (:mod:`kernels.gdn.impls`, their ``op`` with FLA's
arguments). Their correctness checks are those studies' own.
"""

from kernels.core.registry import Impl

#: The study's display name (tables and captions that name studies: kernels.paper.style.study_label).
STUDY_LABEL = "Long context"

#: The tags of an entry: the family it belongs to and the phases it runs.
TAGS = {"attention": "causal softmax attention, kernels.longctx.attention (the FlexAttention study's implementation)",
        "gdn": "Gated DeltaNet, the GDN study's op (kernels.gdn.impls) with FLA's arguments",
        "prefill": "runs the prompt: every token of a sequence at once (phase prefill)",
        "decode": "runs one new token after a context of T tokens (phase decode)"}

_FWD = ("fwd",)
_BOTH = ("fwd", "fwdbwd")

#: The implementations, in the order of the paper's legends and tables: attention first, then GDN.
IMPLS = {
    "sdpa_cudnn": Impl("cuDNN attention", "#C44E52", _BOTH, tags=frozenset({"attention", "prefill", "decode"})),
    "sdpa_flash": Impl("FA2 attention", "#DD8452", _BOTH, tags=frozenset({"attention", "prefill", "decode"})),
    "flex": Impl("Flex attention", "#CCB974", _BOTH, tags=frozenset({"attention", "prefill", "decode"})),
    "flex_flash": Impl("Flex FLASH attention", "#937860", _BOTH, tags=frozenset({"attention", "prefill", "decode"})),
    "chunk": Impl("GDN chunked (ours)", "#55A868", _BOTH, tags=frozenset({"gdn", "prefill"})),
    "fla_chunk": Impl("GDN FLA", "#DA8BC3", _BOTH, tags=frozenset({"gdn", "prefill"})),
    "flash_qla": Impl("GDN FlashQLA", "#8172B3", _BOTH, tags=frozenset({"gdn", "prefill"})),
    "flashinfer": Impl("GDN FlashInfer", "#64B5CD", _FWD, tags=frozenset({"gdn", "prefill"})),
    "recurrent": Impl("GDN recurrent (ours)", "#4C72B0", _FWD, tags=frozenset({"gdn", "decode"})),
}


def family(impl: str) -> str:
    """``"attention"`` or ``"gdn"``: the family tag of ``impl`` (KeyError for an unknown name)."""
    return "attention" if "attention" in IMPLS[impl].tags else "gdn"
