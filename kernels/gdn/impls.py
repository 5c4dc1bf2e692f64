"""The registry of the GDN study's implementations (:class:`kernels.core.registry.Impl`): what each is
called and drawn as, and its passes; the study's names, the report's order and the figures'
colours come from here (the config and row schemas take the names from here too: kernels.core.checks.validator)."""

from kernels.core.registry import Impl

#: The study's display name (tables and captions that name studies: kernels.paper.style.study_label).
STUDY_LABEL = "Gated DeltaNet"

FWD = ("fwd",)

#: The implementations, in the order of the paper's legends and tables; each ``op`` takes FLA's
#: arguments (``q, k, v, g, beta, scale=, initial_state=, output_final_state=, cu_seqlens=``) and
#: returns ``(o, final_state)``. An op outside ``kernels``, or a ``kernels`` module that adapts one
#: and pins its version (:mod:`kernels.gdn.flashinfer`), is an anchor, run on CUDA only.
IMPLS = {
    "naive": Impl("token loop", "#4C72B0", op="kernels.gdn.naive:timed_naive_recurrent_gated_delta_rule"),
    "recurrent": Impl("recurrent (ours)", "#8C8C8C", FWD, op="kernels.gdn.recurrent:fused_recurrent_gated_delta_rule"),
    "chunk": Impl("chunked (ours)", "#55A868", op="kernels.gdn.chunk:chunk_gated_delta_rule"),
    "fla_chunk": Impl("FLA", "#DA8BC3", op="fla.ops.gated_delta_rule:chunk_gated_delta_rule"),
    "fla_recurrent": Impl("FLA recurrent", "#937860", FWD, op="fla.ops.gated_delta_rule:fused_recurrent_gated_delta_rule"),
    "flash_qla": Impl("FlashQLA", "#8172B3", op="flash_qla:chunk_gated_delta_rule"),
    "flashinfer": Impl("FlashInfer", "#64B5CD", FWD, op="kernels.gdn.flashinfer:chunk_gated_delta_rule"),
}
