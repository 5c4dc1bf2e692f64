"""Gated DeltaNet (GDN): reference, fused recurrent and chunked Triton kernels, forward and backward.

``naive`` holds the plain-PyTorch references (token loop and chunked form,
and their autograd gradients), ``recurrent`` the fused recurrent Triton
kernel, ``chunk`` the chunked op (public function, autograd Function, the
forward and backward that run the kernels of ``chunk_fwd`` and ``chunk_bwd``),
``_triton`` their device functions, ``constants`` the chunk size, ``validate``
the input checks, ``flops`` the work and traffic counts, ``study``/``report``
the measurement sweep and its figures. The recurrence is the gated delta rule of
Yang et al. ("Gated Delta Networks",
ICLR 2025; layout and argument order of flash-linear-attention).
"""
