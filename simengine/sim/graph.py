"""Per-rank orders → a DAG of tasks with one FIFO order per stream (no timing here).

Rules (each task starts when its stream is free and its dependencies are done):

* F of stage s needs the activation of stage s-1 (same micro-batch); B of stage s needs the
  gradient of stage s+1, or on the last stage its own F (the loss); W needs its B.
* A hop to another rank is a p2p send task: with ``p2p_blocking`` (Megatron's default
  ``p2p_communication`` with blocking ``send_forward``/``send_backward``) it sits on the
  sender's compute stream right after the producer, otherwise on the sender's pp stream. The
  receiver's compute waits for it either way. A hop inside a rank (DualPipeV's turn) is free.
* TP/CP/EP collectives of a chunk run on the compute stream after its compute, or, with
  ``tp_comm_overlap``, on the comm stream starting with the compute (a zero-length gate task
  marks the start). Every later compute task of the rank waits for them (a layer cannot
  continue before its collective; TransformerEngine userbuffer overlap is inside the GEMM).
* DP (Megatron DDP / distributed optimizer, ``_ParamAndGradBuffer`` buckets): with
  ``overlap_grad_reduce`` each chunk's buckets (last layers first) launch as the chunk's final
  backward produces them — that task is split into one piece per bucket; otherwise all buckets
  run after the rank's last backward (``finalize_model_grads``). The optimizer follows the last
  bucket. With ``overlap_param_gather`` the param all-gathers open the step and the first F of
  each chunk is split into one piece per bucket, piece j waiting for bucket j; otherwise they
  run after the optimizer (Megatron distributed optimizer gathers updated params at step end).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from ..schedule import Action, get_schedule
from .layout import (
    K_B, K_BC, K_DPG, K_DPP, K_F, K_FC, K_GATE, K_OPT, K_P2P, K_R, K_W, NSTREAM, S_COMM,
    S_COMPUTE, S_DP, S_PP, V_BF, V_BFP, V_BI, V_BUCKETS, V_F, V_FP, V_OPT, V_P2P, V_R, V_W,
    V_WP, CHUNK_FIXED, layout,
)


class TaskGraph:
    """Flat task arrays (original numbering = creation order) and per-stream FIFO lists."""

    __slots__ = ("rows", "stream", "kind", "mb", "chunk", "aux", "val", "d1", "d2", "streams", "p",
                 "m", "nch", "stage_of", "grad_pieces", "param_pieces", "rank_base",
                 "chunk_base", "n_vals")

    def __init__(self, p: int):
        self.rows: list[tuple[int, ...]] = []  # (stream, kind, mb, chunk, aux, val, d1, d2)
        self.streams: list[list[int]] = [[] for _ in range(p * NSTREAM)]

    def add(self, stream: int, kind: int, mb: int, chunk: int, aux: int, val: int,
            d1: int = -1, d2: int = -1) -> int:
        i = len(self.rows)
        self.rows.append((stream, kind, mb, chunk, aux, val, d1, d2))
        self.streams[stream].append(i)
        return i

    def finish(self) -> None:
        """Rows → one list per field (``d1`` stays patchable)."""
        cols = [list(c) for c in zip(*self.rows)] if self.rows else [[] for _ in range(8)]
        self.stream, self.kind, self.mb, self.chunk, self.aux, self.val, self.d1, self.d2 = cols
        self.rows = []


def validate_orders(orders: Sequence[Sequence[Action]], p: int, m: int, nch: int) -> None:
    """Each rank runs F and B exactly once and W at most once per (micro-batch, chunk)."""
    if len(orders) != p:
        raise ValueError(f"orders has {len(orders)} ranks, expected pp={p}")
    want = {(mb, c) for mb in range(m) for c in range(nch)}
    for r, order in enumerate(orders):
        cnt = Counter((a[0], a[1], a[2]) for a in order)
        bad = [k for k in cnt if k[0] not in ("F", "B", "W") or (k[1], k[2]) not in want]
        if bad:
            raise ValueError(f"rank {r}: invalid actions {bad[:5]} (m={m}, chunks={nch})")
        for kind in ("F", "B"):
            wrong = sorted(k for k in want if cnt.get((kind, *k), 0) != 1)
            if wrong:
                raise ValueError(f"rank {r}: {kind} must run exactly once for (mb, chunk) {wrong[:5]}")
        dup = sorted(k for k in cnt if k[0] == "W" and cnt[k] > 1)
        if dup:
            raise ValueError(f"rank {r}: W runs more than once for {dup[:5]}")


def _split(buckets: int, chunks_in_order: list[int]) -> dict[int, list[int]]:
    """Contiguous, near-equal groups of bucket indices, first group to the first chunk."""
    k = len(chunks_in_order)
    q, rem = divmod(buckets, k)
    out, start = {}, 0
    for i, c in enumerate(chunks_in_order):
        size = q + (1 if i < rem else 0)
        out[c] = list(range(start, start + size))
        start += size
    return out


def build_graph(key: tuple, orders: Sequence[Sequence[Action]] | None = None) -> TaskGraph:
    """``key = (schedule, p, m, vpp, overlap_grad_reduce, overlap_param_gather,
    tp_comm_overlap, p2p_blocking, sig)`` with ``sig`` as in ``layout.layout``."""
    name, p, m, vpp, ogr, opg, tco, blocking, sig = key
    sched = get_schedule(name)
    sched.check(p, m, vpp)
    nch = sched.chunks_per_rank(vpp)
    for r, s in enumerate(sig):
        if len(s[2]) != nch:
            raise ValueError(f"stages[{r}] has {len(s[2])} chunks; schedule '{name}' with vpp={vpp} needs {nch}")
    if orders is None:
        orders = sched.orders(p, m, vpp)
    validate_orders(orders, p, m, nch)

    nstage = p * nch
    stage_of = [[sched.stage_of(r, c, p, vpp) for c in range(nch)] for r in range(p)]
    stage_rank = [-1] * nstage
    for r in range(p):
        for c in range(nch):
            stage_rank[stage_of[r][c]] = r
    if -1 in stage_rank:
        raise ValueError(f"schedule '{name}': stage_of is not a bijection onto {nstage} stages")

    g = TaskGraph(p)
    g.p, g.m, g.nch, g.stage_of = p, m, nch, stage_of
    g.rank_base, g.chunk_base, g.n_vals = layout(sig)
    g.grad_pieces = [[0] * nch for _ in range(p)]
    g.param_pieces = [[0] * nch for _ in range(p)]
    add = g.add
    f_out = [-1] * (nstage * m)  # last compute-stream task of F(stage, mb)
    b_out = [-1] * (nstage * m)
    deliver_f = [-1] * (nstage * m)  # what F(stage+1, mb) waits for
    deliver_b = [-1] * (nstage * m)  # what B(stage-1, mb) waits for
    need: list[tuple[int, list[int], int]] = []  # (task, array, index) → task.d1

    for r in range(p):
        order = orders[r]
        ng, npb, csig = sig[r]
        rb = g.rank_base[r]
        cbase = g.chunk_base[r]
        C, CM, PP, DP = r * NSTREAM + S_COMPUTE, r * NSTREAM + S_COMM, r * NSTREAM + S_PP, r * NSTREAM + S_DP
        wset = {(a[1], a[2]) for a in order if a[0] == "W"}
        first_f: dict[int, int] = {}
        last_g: dict[int, int] = {}
        for pos, (kind, mb, c) in enumerate(order):
            if kind == "F":
                first_f.setdefault(c, pos)
            elif kind == "W" or (mb, c) not in wset:
                last_g[c] = pos
        pgroups = _split(npb, sorted(range(nch), key=first_f.__getitem__)) if opg and npb else {}
        ggroups = _split(ng, sorted(range(nch), key=last_g.__getitem__)) if ogr and ng else {}
        param_task: dict[int, int] = {}
        for c in sorted(pgroups, key=first_f.__getitem__):
            g.param_pieces[r][c] = len(pgroups[c])
            for j in pgroups[c]:
                param_task[j] = add(DP, K_DPP, -1, c, j, rb + V_BUCKETS + ng + j)
        for c, grp in ggroups.items():
            g.grad_pieces[r][c] = len(grp)

        prev_comm = -1  # latest overlapped collective of this rank
        last_dp = -1
        for pos, (kind, mb, c) in enumerate(order):
            s = stage_of[r][c]
            cb = cbase[c]
            nfc, nbc, has_r = csig[c]
            idx = s * m + mb
            if kind == "F":
                pieces = pgroups.get(c) if pos == first_f[c] else None
                ov = tco and nfc > 0
                gate = -1
                if pieces or ov:
                    entry = gate = add(C, K_GATE, mb, c, 0, 0, -1, prev_comm)
                    if pieces:
                        for j, bj in enumerate(pieces):
                            last = add(C, K_F, mb, c, j, cb + V_FP, param_task[bj])
                    else:
                        last = add(C, K_F, mb, c, 0, cb + V_F)
                else:
                    entry = last = add(C, K_F, mb, c, 0, cb + V_F, -1, prev_comm)
                if s > 0:
                    need.append((entry, deliver_f, idx - m))
                comm_last = -1
                for i in range(nfc):
                    if ov:
                        comm_last = add(CM, K_FC, mb, c, i, cb + CHUNK_FIXED + i, gate if i == 0 else -1)
                    else:
                        last = add(C, K_FC, mb, c, i, cb + CHUNK_FIXED + i)
                if ov:
                    prev_comm = comm_last
                f_out[idx] = last
                if s < nstage - 1:
                    if stage_rank[s + 1] != r:
                        if blocking:
                            deliver_f[idx] = add(C, K_P2P, mb, c, 0, rb + V_P2P, comm_last)
                        else:
                            deliver_f[idx] = add(PP, K_P2P, mb, c, 0, rb + V_P2P, last, comm_last)
                    else:
                        deliver_f[idx] = last
            elif kind == "B":
                hw = (mb, c) in wset
                pieces = ggroups.get(c) if (not hw and pos == last_g[c]) else None
                ov = tco and nbc > 0
                entry = gate = -1
                if has_r:
                    entry = add(C, K_R, mb, c, 0, cb + V_R, -1, prev_comm)
                if ov:
                    gate = add(C, K_GATE, mb, c, 1, 0, -1, prev_comm if entry < 0 else -1)
                    if entry < 0:
                        entry = gate
                if pieces:
                    for j, bj in enumerate(pieces):
                        last = add(C, K_B, mb, c, j, cb + V_BFP, -1, prev_comm if entry < 0 else -1)
                        if entry < 0:
                            entry = last
                        last_dp = add(DP, K_DPG, mb, c, bj, rb + V_BUCKETS + bj, last)
                else:
                    last = add(C, K_B, mb, c, 0, cb + (V_BI if hw else V_BF), -1,
                               prev_comm if entry < 0 else -1)
                    if entry < 0:
                        entry = last
                need.append((entry, deliver_b if s < nstage - 1 else f_out, idx + m if s < nstage - 1 else idx))
                b_out[idx] = last
                comm_last = -1
                for i in range(nbc):
                    v = cb + CHUNK_FIXED + nfc + i
                    if ov:
                        comm_last = add(CM, K_BC, mb, c, i, v, gate if i == 0 else -1)
                    else:
                        last = add(C, K_BC, mb, c, i, v)
                if ov:
                    prev_comm = comm_last
                if s > 0:
                    if stage_rank[s - 1] != r:
                        if blocking:
                            deliver_b[idx] = add(C, K_P2P, mb, c, 1, rb + V_P2P, comm_last)
                        else:
                            deliver_b[idx] = add(PP, K_P2P, mb, c, 1, rb + V_P2P, last, comm_last)
                    else:
                        deliver_b[idx] = last
            else:  # W
                pieces = ggroups.get(c) if pos == last_g[c] else None
                if pieces:
                    for j, bj in enumerate(pieces):
                        t = add(C, K_W, mb, c, j, cb + V_WP, -1, prev_comm if j == 0 else -1)
                        if j == 0:
                            need.append((t, b_out, idx))
                        last_dp = add(DP, K_DPG, mb, c, bj, rb + V_BUCKETS + bj, t)
                else:
                    t = add(C, K_W, mb, c, 0, cb + V_W, -1, prev_comm)
                    need.append((t, b_out, idx))

        last_compute = g.streams[C][-1]
        if ng and not ogr:  # finalize_model_grads after the schedule
            for j in range(ng):
                last_dp = add(DP, K_DPG, -1, -1, j, rb + V_BUCKETS + j,
                              last_compute if j == 0 else -1, prev_comm if j == 0 else -1)
        opt = add(C, K_OPT, -1, -1, 0, rb + V_OPT, last_dp, prev_comm)
        if npb and not opg:
            for j in range(npb):
                add(DP, K_DPP, -1, -1, j, rb + V_BUCKETS + ng + j, opt if j == 0 else -1)

    g.finish()
    d1 = g.d1
    for task, arr, i in need:
        d1[task] = arr[i]
    return g
