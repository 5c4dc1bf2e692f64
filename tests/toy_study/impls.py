"""The toy study's implementation registry (:class:`kernels.core.registry.Impl`): the study's display name and each
implementation's name, display name, colour and passes, in the order of legends and tables; the schema's names
(``x-registry: toy``), the study's and the report's come from here."""

from kernels.core.registry import Impl

#: The study's display name.
STUDY_LABEL = "Toy"

IMPLS = {"scale": Impl("scale (torch.mul)", "#4C72B0", ("fwd",))}
