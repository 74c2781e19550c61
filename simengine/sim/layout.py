"""Codes shared by the DAG builder, the value table, the metrics and the timeline.

Streams per rank (global stream id = rank·4 + local id): the compute stream, a comm stream for
the hidden part of in-layer collectives (overlap.py), a pp stream for non-blocking p2p sends, a
dp stream for gradient reduce-scatter / parameter all-gather buckets.

Value table (durations in seconds, see ``values.py``): index 0 is 0.0; then per rank
``[p2p, optimizer, grad buckets…, param buckets…, grad pieces…, param pieces…, grad tail…,
param tail…]`` (a piece is the part of a chunk's final backward / first forward that produces /
waits for one DP bucket; a bucket launched by its piece and the same bucket in the step's tail
both exist in every structure, and the DP overlap flags only say which of the two holds its
seconds, so one structure serves every flag combination),
followed per chunk by ``[F, R, B-full, B-input, W]`` and, per collective kind of the forward, then
of the backward, then of the recompute, ``[hidden, exposed]``; then per kind of overlapped F&B pair on the rank
(``pair_types``: forward chunk, backward chunk, whether the B leaves a W) ``[F, B]`` and the
``[hidden, exposed]`` of the pair's forward kinds, then of its backward kinds (``pair_kinds``).
"""

from __future__ import annotations

STREAMS = ("compute", "comm", "pp", "dp")
S_COMPUTE, S_COMM, S_PP, S_DP = 0, 1, 2, 3
NSTREAM = 4

K_F, K_R, K_B, K_W, K_OPT, K_GATE, K_P2P, K_DPG, K_DPP, K_HID, K_EXP = range(11)
KIND_NAMES = ("F", "R", "B", "W", "OPT", "gate", "p2p", "dp_grad", "dp_param", "hidden", "exposed")
COMPUTE_KINDS = frozenset((K_F, K_R, K_B, K_W, K_OPT))
COMM_KINDS = frozenset((K_P2P, K_DPG, K_DPP, K_HID, K_EXP))

# breakdown names (Report.breakdown_s, Timeline): one vocabulary for every page
CATEGORY = {K_F: "forward_compute", K_R: "recompute", K_B: "backward_compute", K_W: "backward_compute",
            K_OPT: "optimizer", K_P2P: "pp_comm", K_DPG: "dp_comm", K_DPP: "dp_comm"}

# offsets inside a chunk block
V_F, V_R, V_BF, V_BI, V_W = range(5)
CHUNK_FIXED = 5
# offsets inside a rank block
V_P2P, V_OPT, V_BUCKETS = 0, 1, 2


PAIR_FIXED = 2
PAIRED_KIND = "ep_comm"  # what an F&B pair hides behind its partner: the expert dispatch/combine


def pair_kinds(kinds: tuple) -> tuple:
    """A pair member's kinds: its expert all-to-all always runs beside the partner's compute."""
    return tuple((k, beside or k == PAIRED_KIND) for k, beside in kinds)


def layout(sig, ptypes=None) -> tuple[list[int], list[list[int]], int, list[dict]]:
    """Offsets of every rank block, chunk block and pair block for a stage signature.

    ``sig[r] = (n_grad_buckets, n_param_buckets, ((fwd_kinds, bwd_kinds, has_recompute, rec_kinds), …))``
    with ``fwd_kinds``/``bwd_kinds``/``rec_kinds`` the chunk's ((collective kind, has a compute window), …);
    ``ptypes[r]`` the rank's pair types ``(forward chunk, backward chunk, B leaves a W)``.
    """
    rank_base: list[int] = []
    chunk_base: list[list[int]] = []
    pair_base: list[dict] = []
    n = 1
    for r, (ng, npb, chunks) in enumerate(sig):
        rank_base.append(n)
        n += V_BUCKETS + 3 * (ng + npb)
        bases = []
        for fk, bk, _, rk in chunks:
            bases.append(n)
            n += CHUNK_FIXED + 2 * (len(fk) + len(bk) + len(rk))
        chunk_base.append(bases)
        pb = {}
        for cf, cb, hw in (ptypes[r] if ptypes else ()):
            pb[(cf, cb, hw)] = n
            n += PAIR_FIXED + 2 * (len(chunks[cf][0]) + len(chunks[cb][1]))
        pair_base.append(pb)
    return rank_base, chunk_base, n, pair_base


def grad_piece_slot(rank_base: int, ng: int, npb: int, j: int) -> int:
    return rank_base + V_BUCKETS + ng + npb + j


def param_piece_slot(rank_base: int, ng: int, npb: int, j: int) -> int:
    return rank_base + V_BUCKETS + 2 * ng + npb + j


def grad_tail_slot(rank_base: int, ng: int, npb: int, j: int) -> int:
    """Bucket j's reduce after the rank's last backward (``finalize_model_grads``): its seconds
    without ``overlap_grad_reduce``, 0 with it (the launch slot holds them then)."""
    return rank_base + V_BUCKETS + 2 * (ng + npb) + j


def param_tail_slot(rank_base: int, ng: int, npb: int, j: int) -> int:
    """Bucket j's gather after the optimizer: its seconds without ``overlap_param_gather``."""
    return rank_base + V_BUCKETS + 3 * ng + 2 * npb + j
