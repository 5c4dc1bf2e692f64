"""The registry of the GDN study's implementations (:class:`kernels.style.Impl`): what each is
called and drawn as, and its passes; the study's names, the report's order and the figures'
colours come from here (the config and row schemas take the names from here too: kernels.checks.validator)."""

from kernels.style import Impl

FWD = ("fwd",)

#: The implementations, in the order of the paper's legends and tables.
IMPLS = {
    "naive": Impl("token loop", "#4C72B0"),
    "recurrent": Impl("recurrent (ours)", "#8C8C8C", FWD),
    "chunk": Impl("chunked (ours)", "#55A868"),
    "fla_chunk": Impl("FLA", "#DA8BC3"),
    "fla_recurrent": Impl("FLA recurrent", "#937860", FWD),
    "flash_qla": Impl("FlashQLA", "#8172B3"),
}
