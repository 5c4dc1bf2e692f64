"""Tensor-core study: two rules of thumb about GEMM throughput, tested on one GPU.

``study`` holds the sweep (bf16 GEMMs at aligned and unaligned sizes, FP8 against BF16) and the
checked call of each implementation (:mod:`kernels.tensorcore.impls`); ``report`` its figure,
table and quoted numbers.
"""
