"""SwiGLU activation study: ``SwiGLU(gate, up) = SiLU(gate) * up``.

The FFN of Llama, Mistral, Qwen and DeepSeek computes
``SiLU(x W_gate) * (x W_up)`` (Shazeer 2020, "GLU Variants Improve
Transformer", arXiv:2002.05202). Modules, reference first:

``reference``
    The plain-PyTorch formula (the eager tier) and its fp32 reference,
    forward and backward.
``elementwise``
    Our Triton forward (autotuned, any dtype, strided rows, int64
    offsets), Triton backward, the autograd Function and the fixed-config
    decode launch.
``seed``
    The source material's kernel as published (stores fp16 whatever the
    input dtype): the baseline whose claims the study tests.
``gemm``
    SwiGLU fused into the epilogue of the ``x @ [W_gate | W_up]`` matmul.
``study``
    The sweep measured on the GPU.
``tidy`` / ``numbers`` / ``report``
    The sweep's tidy table and derived metrics; its quoted numbers and the
    claims' verdicts; its figures and tables, and what the workflow reads
    of the other two.

Importing this package imports torch but not triton; the kernel modules
import triton.
"""

from kernels.swiglu.reference import swiglu_backward_reference, swiglu_eager, swiglu_reference

__all__ = ["swiglu_eager", "swiglu_reference", "swiglu_backward_reference"]
