"""Work and traffic of the gated delta rule forward and backward (the numbers rows carry).

FLOPs, per token and head, of the chunked algorithm with chunk C, counting
every C x C tile product as dense, as the tensor-core kernels compute it
(the convention behind FlashQLA's published TFLOP/s):
    K K^T, Q K^T, W = T K:        3 x 2 C K        = 6 C K
    U = T V, Aqk V_new:           2 x 2 C V        = 4 C V
    W S, Q S, K^T V_new:          3 x 2 K V        = 6 K V
    triangular inverse:           C^2 / 3
For K = V = d: 10 C d + 6 d^2 + C^2/3 (about 1.8e5 at d = 128, C = 64).
The same count is used for every implementation (the token recurrence does
fewer, about 8 K V per token, but the rate is quoted for the same work).

Minimum bytes: q, k, v read and o written once in their dtype, g and beta
read once in theirs, the initial state read and the final state written once
in float32 when present.

Grouped value attention (``qk_heads`` key heads, ``heads`` value heads): every
product runs per value head, so the FLOPs count ``heads`` (the value heads);
q and k (and dq, dk) move once per key head, everything else per value head.
"""

from __future__ import annotations

from kernels.gdn.constants import CHUNK_SIZE


def gdn_fwd_flops(tokens: int, heads: int, head_dim_k: int, head_dim_v: int, chunk: int = CHUNK_SIZE) -> int:
    """FLOPs of the chunked forward: tokens * heads * (6 C K + 4 C V + 6 K V + C^2/3)."""
    per = 6 * chunk * head_dim_k + 4 * chunk * head_dim_v + 6 * head_dim_k * head_dim_v + chunk * chunk / 3
    return int(tokens * heads * per)


def gdn_fwd_bytes(tokens: int, heads: int, head_dim_k: int, head_dim_v: int, num_seqs: int,
                  elem_bytes: int = 2, gate_bytes: int = 4, initial_state: bool = False,
                  final_state: bool = False, qk_heads: int | None = None) -> int:
    """Minimum bytes: tokens*(qk_heads*2K*elem + heads*(2V*elem + 2*gate)) + states*4*K*V*num_seqs*heads,
    ``heads`` the value heads and ``qk_heads`` those of q and k (default ``heads``)."""
    qk = heads if qk_heads is None else qk_heads
    per_token = qk * 2 * head_dim_k * elem_bytes + heads * (2 * head_dim_v * elem_bytes + 2 * gate_bytes)
    states = (int(initial_state) + int(final_state)) * 4 * head_dim_k * head_dim_v * num_seqs * heads
    return int(tokens * per_token + states)


def gdn_bwd_flops(tokens: int, heads: int, head_dim_k: int, head_dim_v: int, chunk: int = CHUNK_SIZE) -> int:
    """FLOPs of the chunked backward (:mod:`kernels.gdn.chunk_bwd`), per token and head
    16 C K + 8 C V + 12 K V + C^2/3, counting each product as dense:

        reverse state pass:  Aqk^T dO; Kd dS', Qg^T dO, W^T dV_new       2 C V + 6 K V
        per chunk:           dO S^T, dV_new S^T, V_new dS'^T               6 K V
                             dO V_new^T, T^T dU, (T^T dU) U^T              6 C V
                             T^T dW, (T^T dW) W^T, K K^T, Q K^T,
                             B K, B^T K, Ms K, Ms^T Q                     16 C K
        triangular inverse (recomputed):                                 C^2 / 3
    About 3.9e5 at d = 128, C = 64: 2.2x the forward count. The same count is
    used for every implementation."""
    per = 16 * chunk * head_dim_k + 8 * chunk * head_dim_v + 12 * head_dim_k * head_dim_v + chunk * chunk / 3
    return int(tokens * heads * per)


def gdn_bwd_bytes(tokens: int, heads: int, head_dim_k: int, head_dim_v: int, num_seqs: int,
                  elem_bytes: int = 2, gate_bytes: int = 4, with_forward: bool = False,
                  final_state_grad: bool = True, qk_heads: int | None = None) -> int:
    """Minimum bytes of the backward: read q, k, v, do and write dq, dk, dv in the input
    dtype, read g, beta and write dg, dbeta in the gate dtype, read the final state's
    gradient (float32) when given: tokens*(qk_heads*4K*elem + heads*(3V*elem + 4*gate))
    + 4 K V num_seqs heads (``heads`` the value heads, ``qk_heads`` those of q and k,
    default ``heads``). ``with_forward`` (the fwd+bwd pass) adds writing o
    (tokens*heads*V*elem); the saved intermediates are not minimum traffic."""
    qk = heads if qk_heads is None else qk_heads
    per_value_head = (3 * head_dim_v + (head_dim_v if with_forward else 0)) * elem_bytes + 4 * gate_bytes
    per_token = qk * 4 * head_dim_k * elem_bytes + heads * per_value_head
    states = int(final_state_grad) * 4 * head_dim_k * head_dim_v * num_seqs * heads
    return int(tokens * per_token + states)
