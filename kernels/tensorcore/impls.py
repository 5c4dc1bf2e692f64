"""The registry of the tensor-core study's implementations (:class:`kernels.core.registry.Impl`): what each
is called and drawn as; the study's names, the report's order and the figures' colours come from
here (the config and row schemas take the names from here too: kernels.core.checks.validator). Both are
forward-only GEMMs that kernels.tensorcore.study's ``prepare`` builds (they take different inputs:
FP8 needs quantised operands and their scales), so no entry names an op."""

from kernels.core.registry import Impl

#: The study's display name (tables and captions that name studies: kernels.paper.style.study_label).
STUDY_LABEL = "Tensor cores"

FWD = ("fwd",)

#: The implementations, in the order of the paper's legends and tables.
IMPLS = {
    "bf16": Impl("BF16 (cuBLAS)", "#4C72B0", FWD),
    "fp8": Impl("FP8 e4m3 (scaled mm)", "#DD8452", FWD),
}
