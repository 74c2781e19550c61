"""Codes shared by the DAG builder, the value table and the timeline.

Streams per rank (global stream id = rank·4 + local id): the compute stream, a comm stream for
overlapped TP/CP/EP collectives, a pp stream for non-blocking p2p sends, a dp stream for
gradient reduce-scatter / parameter all-gather buckets.

Value table (durations in seconds, see ``values.py``): index 0 is 0.0; then per rank
``[p2p, optimizer, grad buckets…, param buckets…]`` followed per chunk by the block
``[F, F-piece, R, B-full, B-input, B-full-piece, W, W-piece, fwd comm…, bwd comm…]``.
"""

from __future__ import annotations

STREAMS = ("compute", "comm", "pp", "dp")
S_COMPUTE, S_COMM, S_PP, S_DP = 0, 1, 2, 3
NSTREAM = 4

K_F, K_R, K_B, K_W, K_OPT, K_GATE, K_P2P, K_DPG, K_DPP, K_FC, K_BC = range(11)
KIND_NAMES = ("F", "R", "B", "W", "OPT", "gate", "p2p", "dp_grad", "dp_param", "fcomm", "bcomm")
COMPUTE_KINDS = frozenset((K_F, K_R, K_B, K_W, K_OPT))
COMM_KINDS = frozenset((K_P2P, K_DPG, K_DPP, K_FC, K_BC))

# offsets inside a chunk block
V_F, V_FP, V_R, V_BF, V_BI, V_BFP, V_W, V_WP = range(8)
CHUNK_FIXED = 8
# offsets inside a rank block
V_P2P, V_OPT, V_BUCKETS = 0, 1, 2


def layout(sig) -> tuple[list[int], list[list[int]], int]:
    """Offsets of every rank block and chunk block for a stage signature.

    ``sig[r] = (n_grad_buckets, n_param_buckets, ((n_fwd_comm, n_bwd_comm, has_recompute), …))``.
    """
    rank_base: list[int] = []
    chunk_base: list[list[int]] = []
    n = 1
    for ng, npb, chunks in sig:
        rank_base.append(n)
        n += V_BUCKETS + ng + npb
        bases = []
        for nfc, nbc, _ in chunks:
            bases.append(n)
            n += CHUNK_FIXED + nfc + nbc
        chunk_base.append(bases)
    return rank_base, chunk_base, n
