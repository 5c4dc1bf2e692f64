"""FlashQLA's published H200 times (its own, FLA's and FlashInfer's) at the configurations the GDN
sweep measures again.

Source: QwenLM/FlashQLA, ``benchmark/benchmark_results_H200.txt`` at commit 6e5d2ea
(torch 2.9.1+cu128, fla 0.5.1, flashinfer 0.6.13, tilelang 0.1.9), written by their
``benchmark/bench_gated_delta_rule.py``: K = V = 128, bfloat16, each call replayed from a
CUDA graph, 10 warm-up and 100 timed calls, packed sequences (``4 x 8192``: four sequences
of 8192 tokens in one batch) with an initial state. The sweep's configurations are those
of config key ``gdn.sweep.published`` (and its backward's), at B sequences of T tokens and
without an initial state. No import of torch.
"""

from __future__ import annotations

#: (pass, heads, value_heads, batch, seqlen) -> {implementation: ms per call}, FlashQLA's and FLA's,
#: and FlashInfer's (its column ``FI``) forward.
TIMES = {
    ("fwd", 16, 16, 4, 8192): {"flash_qla": 0.392, "fla_chunk": 0.969, "flashinfer": 0.394},
    ("fwd", 16, 32, 1, 32768): {"flash_qla": 0.877, "fla_chunk": 1.890, "flashinfer": 1.550},
    ("fwd", 32, 32, 1, 32768): {"flash_qla": 0.887, "fla_chunk": 1.939, "flashinfer": 1.556},
    ("fwd", 16, 64, 4, 8192): {"flash_qla": 1.214, "fla_chunk": 3.362, "flashinfer": 0.827},
    ("fwd", 2, 8, 1, 32768): {"flash_qla": 0.320, "fla_chunk": 0.902, "flashinfer": 1.655},
    ("bwd", 16, 32, 1, 8192): {"flash_qla": 0.789, "fla_chunk": 1.444},
    ("bwd", 16, 32, 1, 32768): {"flash_qla": 2.515, "fla_chunk": 5.697},
    ("bwd", 8, 16, 1, 32768): {"flash_qla": 1.377, "fla_chunk": 3.701},
    ("bwd", 2, 4, 1, 32768): {"flash_qla": 0.548, "fla_chunk": 2.311},
}
#: The speedup over FLA that FlashQLA claims for each pass, as a range (low, high).
CLAIMED = {"fwd": (2.0, 3.0), "bwd": (2.0, float("inf"))}
