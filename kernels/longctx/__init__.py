"""Linear against softmax attention at long context: causal attention (SDPA's cuDNN and
FlashAttention-2 backends, FlexAttention) against Gated DeltaNet (our chunked kernels, FLA,
FlashQLA) in prefill and decode, from 1K to 512K tokens (:mod:`kernels.longctx.study`)."""
