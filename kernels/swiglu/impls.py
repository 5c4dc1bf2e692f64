"""The registry of the SwiGLU study's implementations (:class:`kernels.core.registry.Impl`): what each is
called and drawn as, and its passes; the study's names, the report's order and the figures'
colours come from here (the config and row schemas take the names from here too: kernels.core.checks.validator)."""

from kernels.core.registry import Impl

#: The study's display name (tables and captions that name studies: kernels.paper.style.study_label).
STUDY_LABEL = "SwiGLU"

FWD = ("fwd",)
#: The tags of an entry: the rows the study also (or only) runs it on.
TAGS = {"graph": "also replayed from a CUDA graph (launch: graph)",
        "gemm": "also on the gemm rows (x @ W, then SwiGLU)",
        "gemm_only": "on the gemm rows only"}

#: The implementations, in the order of the paper's legends and tables. The ``op`` of an
#: elementwise implementation is its forward, ``op(gate, up) -> out`` on [tokens, hidden] tensors
#: (its backward, where it has one, autograd's); None where kernels.swiglu.study's ``prepare``
#: builds the call (the compiled tiers, the gemm rows, the copy). An op outside ``kernels`` is an
#: anchor: not installed, its rows are ``unsupported``.
IMPLS = {
    "eager": Impl("eager", "#4C72B0", op="kernels.swiglu.reference:swiglu_eager", tags=frozenset({"graph", "gemm"})),
    "compile": Impl("compile", "#DD8452"),
    "compile_no_cudagraphs": Impl("compile (no graphs)", "#C44E52"),
    "triton": Impl("Triton (ours)", "#55A868", op="kernels.swiglu.elementwise:swiglu_forward"),
    "decode": Impl("Triton fixed (ours)", "#8C8C8C", FWD, op="kernels.swiglu.elementwise:swiglu_decode",
                   tags=frozenset({"graph"})),
    "seed": Impl("source kernel", "#937860", FWD, op="kernels.swiglu.seed:seed_swiglu"),
    "liger": Impl("Liger", "#DA8BC3", op="liger_kernel.ops.swiglu:LigerSiLUMulFunction.apply"),
    "matmul": Impl("cuBLAS + act.", "#CCB974", FWD, tags=frozenset({"gemm_only"})),
    "gemm_fused": Impl("fused epilogue", "#8172B3", FWD, tags=frozenset({"gemm_only"})),
    "copy": Impl("copy", "#000000"),
}
