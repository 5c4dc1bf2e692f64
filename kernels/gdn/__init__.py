"""Gated DeltaNet (GDN): reference, fused recurrent and chunked Triton kernels, forward and backward.

``naive`` holds the plain-PyTorch references (token loop and chunked form,
and their autograd gradients), ``recurrent`` the fused recurrent Triton
kernel, ``chunk`` the chunked Triton forward, ``chunk_bwd`` its Triton
backward and autograd Function, ``flops`` the work and traffic counts, ``study``/``report`` the
measurement sweep and its figures. The recurrence is the gated delta rule of
Yang et al. ("Gated Delta Networks",
ICLR 2025; layout and argument order of flash-linear-attention).
"""
