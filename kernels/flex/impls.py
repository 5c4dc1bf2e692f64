"""The registry of the FlexAttention study's implementations (:class:`kernels.style.Impl`): what
each is called and drawn as; the study's names, the report's order and the figures' colours come
from here (the config and row schemas take the names from here too: kernels.checks.validator)."""

from kernels.style import Impl

#: The implementations, in the order of the paper's legends and tables.
IMPLS = {
    "flex": Impl("Flex", "#55A868"),
    "flex_autotune": Impl("Flex autotuned", "#8C8C8C"),
    "flex_flash": Impl("Flex FLASH", "#8172B3"),
    "sdpa_flash": Impl("FA2", "#DD8452"),
    "sdpa_cudnn": Impl("cuDNN", "#C44E52"),
    "sdpa_efficient": Impl("mem.-efficient", "#CCB974"),
    "sdpa_masked": Impl("SDPA + mask", "#64B5CD"),
    "naive": Impl("naive", "#4C72B0"),
}
