"""Per-rank orders → a DAG of tasks with one FIFO order per stream (no timing here).

Rules (each task starts when its stream is free and its dependencies are done):

* F of stage s needs the activation of stage s-1 (same micro-batch); B of stage s needs the
  gradient of stage s+1, or on the last stage its own F (the loss); W needs its B. With
  ``Schedule.chains`` > 1 (DualPipe's two directions) every chain has its own first and last stage.
* A hop to another rank is a p2p send task: with ``p2p_blocking`` (Megatron's default
  ``p2p_communication`` with blocking ``send_forward``/``send_backward``) it sits on the
  sender's compute stream right after the producer, otherwise on the sender's pp stream
  (``--overlap-p2p-communication``). The receiver's compute waits for it either way. A hop
  inside a rank (DualPipeV's turn) is free.
* In-layer collectives of a chunk (one kind at a time, ``overlap.py``): the hidden part runs on
  the comm stream starting with the compute (a zero-length gate task marks the start), the
  exposed part on the compute stream right after the compute. Every later compute task of the
  rank waits for the hidden parts (a layer cannot continue before its collective). A recompute's
  collectives (the forward's it re-runs, the FSDP gathers and reduce-scatters beside it) hide the
  same way from its start; their exposed part runs after the backward's kernels (``_recompute``).
* DP (Megatron DDP / distributed optimizer, ``_ParamAndGradBuffer`` buckets): with
  ``overlap_grad_reduce`` each chunk's group of buckets (its own, in chunk order; last layers
  first; cost/dp.py ``dp_work``: only the first rank's first chunk is bucketed, any other chunk's
  group is its one collective after zero-second entries) launch as the chunk's final backward
  produces them — that task is split into one piece per bucket; otherwise all buckets
  run after the rank's last backward (``finalize_model_grads``). The optimizer follows the last
  bucket. With ``overlap_param_gather`` the param all-gathers open the step and the first F of
  each chunk is split into one piece per bucket, piece j waiting for bucket j; otherwise they
  run after the optimizer (Megatron distributed optimizer gathers updated params at step end).
* An overlapped F&B pair (the schedule's ``pairs``: DualPipe ``_forward_backward_chunk``; or
  Megatron-Core's combined 1F1B, ``schedule/_combined.py``) runs as one unit: it starts when both
  the F's activation and the B's gradient have arrived (``_recv_forward`` + ``_recv_backward``,
  then ``_commit_and_wait_comm``), runs F then B on the compute stream, and sends both outputs
  after the B (``_send_forward``, ``_send_backward``). Each member's expert all-to-all
  (``layout.PAIRED_KIND``) is hidden on the comm stream from the pair's start, beside the other
  member's compute (its own value slots, ``layout.pair_kinds``; how much hides and the contention
  it costs: ``overlap.paired``); the B does not wait for the F's hidden all-to-all.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from ..schedule import Action, get_schedule
from ..schedule._combined import fb_orders
from .layout import (
    CHUNK_FIXED, K_B, K_DPG, K_DPP, K_EXP, K_F, K_GATE, K_HID, K_OPT, K_P2P, K_R, K_W, NSTREAM,
    PAIR_FIXED, S_COMM, S_COMPUTE, S_DP, S_PP, V_BF, V_BI, V_BUCKETS, V_F, V_OPT, V_P2P, V_R, V_W,
    grad_piece_slot, grad_tail_slot, layout, pair_kinds, param_piece_slot, param_tail_slot,
)


class TaskGraph:
    """Flat task arrays (original numbering = creation order), one list per field, and per-stream
    FIFO lists."""

    __slots__ = ("stream", "kind", "mb", "chunk", "aux", "val", "d1", "d2", "streams", "p",
                 "m", "nch", "stage_of", "grad_piece_of", "param_piece_of", "rank_base",
                 "chunk_base", "n_vals", "sig", "pair_base", "pairs", "chain_len")
    stream: list[int]
    kind: list[int]
    mb: list[int]
    chunk: list[int]
    aux: list[int]
    val: list[int]
    d1: list[int]
    d2: list[int]
    p: int
    m: int
    nch: int
    stage_of: list[list[int]]
    grad_piece_of: list[list[Any]]   # per bucket: (chunk, kind, pieces, bucket beside) or None
    param_piece_of: list[list[Any]]  # per bucket: (chunk, pieces, bucket beside) or None
    rank_base: list[int]
    chunk_base: list[list[int]]
    n_vals: int
    sig: tuple
    pair_base: list[dict]  # per rank: pair type (F chunk, B chunk, B leaves a W) → value block
    pairs: list[frozenset[int]]  # per rank: positions of the F of each overlapped F&B pair
    chain_len: int  # stages per independent pipeline (Schedule.chains)

    def __init__(self, p: int):
        self.stream, self.kind, self.mb, self.chunk, self.aux, self.val, self.d1, self.d2 = ([] for _ in range(8))
        self.streams: list[list[int]] = [[] for _ in range(p * NSTREAM)]

    def add(self, stream: int, kind: int, mb: int, chunk: int, aux: int, val: int,
            d1: int = -1, d2: int = -1) -> int:
        i = len(self.kind)
        self.stream.append(stream)
        self.kind.append(kind)
        self.mb.append(mb)
        self.chunk.append(chunk)
        self.aux.append(aux)
        self.val.append(val)
        self.d1.append(d1)
        self.d2.append(d2)
        self.streams[stream].append(i)
        return i


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
    """Contiguous, near-equal groups of bucket indices, first group to the first chunk (the
    priced plans give every chunk of a rank the same count, cost/dp.py ``dp_work``)."""
    k = len(chunks_in_order)
    q, rem = divmod(buckets, k)
    out, start = {}, 0
    for i, c in enumerate(chunks_in_order):
        size = q + (1 if i < rem else 0)
        out[c] = list(range(start, start + size))
        start += size
    return out


class _Links:
    """Cross-rank hand-offs, patched into ``d1`` once every rank is built."""

    def __init__(self, nstage: int, m: int):
        n = nstage * m
        self.f_out = [-1] * n      # last compute-stream task of F(stage, mb)
        self.b_out = [-1] * n
        self.deliver_f = [-1] * n  # what F(stage+1, mb) waits for
        self.deliver_b = [-1] * n  # what B(stage-1, mb) waits for
        self.need: list[tuple[int, list[int], int]] = []  # (task, array, index) → task.d1


class _Rank:
    """Builds one rank's tasks, one method per action kind."""

    def __init__(self, g: TaskGraph, links: _Links, r: int, order, stage_rank: list[int], blocking: bool):
        self.pairs = g.pairs[r]
        self.pair: tuple = ()  # the open pair: (value block, gate, comm before it, F's send)
        self.g, self.links, self.r, self.order = g, links, r, order
        self.stage_rank, self.blocking = stage_rank, blocking
        self.ng, self.npb, self.csig = g.sig[r]
        self.rb = g.rank_base[r]
        self.C, self.CM, self.PP, self.DP = (r * NSTREAM + s for s in (S_COMPUTE, S_COMM, S_PP, S_DP))
        self.wset = {(a[1], a[2]) for a in order if a[0] == "W"}
        first_f: dict[int, int] = {}
        last_g: dict[int, int] = {}
        for pos, (kind, mb, c) in enumerate(order):
            if kind == "F":
                first_f.setdefault(c, pos)
            elif kind == "W" or (mb, c) not in self.wset:
                last_g[c] = pos
        self.first_f, self.last_g = first_f, last_g
        nch = g.nch
        # each chunk's own group of buckets, in chunk order (cost/dp.py ``dp_work``: the same count
        # per chunk); built whatever the DP overlap flags (values.py puts the seconds in the launch
        # slots or in the tail's: one structure for every flag combination)
        self.pgroups = _split(self.npb, list(range(nch))) if self.npb else {}
        self.ggroups = _split(self.ng, list(range(nch))) if self.ng else {}
        self.prev_comm = -1  # latest hidden collective of this rank (later compute waits for it)
        self.last_dp = -1
        self.param_task: dict[int, int] = {}

    # -- helpers -------------------------------------------------------------------------
    def _comm(self, mb: int, c: int, first_val: int, kinds, gate: int, last: int) -> tuple[int, int]:
        """Hidden parts on the comm stream (from the gate), exposed parts after the compute."""
        comm_last = self._hidden(mb, c, first_val, kinds, gate)
        return self._exposed(mb, c, first_val, kinds, last), comm_last

    def _hidden(self, mb: int, c: int, first_val: int, kinds, gate: int) -> int:
        add = self.g.add
        comm_last = -1
        for i, (_, beside) in enumerate(kinds):
            if beside:
                comm_last = add(self.CM, K_HID, mb, c, i, first_val + 2 * i, gate if comm_last < 0 else -1)
        if comm_last >= 0:
            self.prev_comm = comm_last
        return comm_last

    def _exposed(self, mb: int, c: int, first_val: int, kinds, last: int) -> int:
        for i in range(len(kinds)):
            last = self.g.add(self.C, K_EXP, mb, c, i, first_val + 2 * i + 1)
        return last

    def _send(self, mb: int, c: int, aux: int, last: int, comm_last: int) -> int:
        if self.blocking:
            return self.g.add(self.C, K_P2P, mb, c, aux, self.rb + V_P2P, comm_last)
        return self.g.add(self.PP, K_P2P, mb, c, aux, self.rb + V_P2P, last, comm_last)

    def _grad_piece(self, kind: int, mb: int, c: int, j: int, bj: int, dep2: int) -> int:
        g = self.g
        t = g.add(self.C, kind, mb, c, j, grad_piece_slot(self.rb, self.ng, self.npb, bj), -1, dep2)
        grp = self.ggroups[c]
        # the bucket produced by the previous piece is reduced while this piece computes
        g.grad_piece_of[self.r][bj] = (c, kind, len(grp), grp[j - 1] if j > 0 else -1)
        self.last_dp = g.add(self.DP, K_DPG, mb, c, bj, self.rb + V_BUCKETS + bj, t)
        return t

    # -- actions -------------------------------------------------------------------------
    def params_first(self) -> None:
        g = self.g
        for c in sorted(self.pgroups, key=self.first_f.__getitem__):
            grp = self.pgroups[c]
            for i, j in enumerate(grp):
                self.param_task[j] = g.add(self.DP, K_DPP, -1, c, j, self.rb + V_BUCKETS + self.ng + j)
                # the next bucket is gathered while this piece computes
                g.param_piece_of[self.r][j] = (c, len(grp), grp[i + 1] if i + 1 < len(grp) else -1)

    def _first(self, s: int) -> bool:
        """Stage s opens its chain (no activation to receive, no gradient to send back)."""
        return s % self.g.chain_len == 0

    def _last(self, s: int) -> bool:
        """Stage s ends its chain: it holds the loss."""
        return s % self.g.chain_len == self.g.chain_len - 1

    def _b_input(self, mb: int, c: int) -> tuple[list[int], int]:
        """What B(mb, c) waits for: the next stage's gradient, or on the last stage its own F."""
        g, L = self.g, self.links
        s = g.stage_of[self.r][c]
        if self._last(s):
            return L.f_out, s * g.m + mb
        return L.deliver_b, (s + 1) * g.m + mb

    def _open_pair(self, pos: int, mb: int, c: int) -> tuple[int, int, tuple]:
        """Start of an F&B pair: a gate waiting for the B's gradient too. Returns the F's value
        slot, the F's first comm slot and the F's kinds in the pair."""
        g = self.g
        nxt = self.order[pos + 1]
        base = g.pair_base[self.r][(c, nxt[2], (nxt[1], nxt[2]) in self.wset)]
        gate = g.add(self.C, K_GATE, mb, c, 2, 0, -1, self.prev_comm)
        self.links.need.append((gate, *self._b_input(nxt[1], nxt[2])))
        self.pair = (base, gate, self.prev_comm)
        return base, base + PAIR_FIXED, pair_kinds(self.csig[c][0])

    def forward(self, pos: int, mb: int, c: int) -> None:
        g, L = self.g, self.links
        s = g.stage_of[self.r][c]
        cb = g.chunk_base[self.r][c]
        fk = self.csig[c][0]
        fval, cval = cb + V_F, cb + CHUNK_FIXED
        paired = pos in self.pairs
        if paired:
            fval, cval, fk = self._open_pair(pos, mb, c)
        idx = s * g.m + mb
        pieces = self.pgroups.get(c) if pos == self.first_f[c] else None
        gate = -1
        if pieces or _any_beside(fk):
            entry = gate = g.add(self.C, K_GATE, mb, c, 0, 0, -1, self.prev_comm)
            if pieces:
                for j, bj in enumerate(pieces):
                    last = g.add(self.C, K_F, mb, c, j, param_piece_slot(self.rb, self.ng, self.npb, bj),
                                 self.param_task[bj])
            else:
                last = g.add(self.C, K_F, mb, c, 0, fval)
        else:
            entry = last = g.add(self.C, K_F, mb, c, 0, fval, -1, self.prev_comm)
        if not self._first(s):
            L.need.append((entry, L.deliver_f, idx - g.m))
        last, comm_last = self._comm(mb, c, cval, fk, gate, last)
        L.f_out[idx] = last
        if paired:  # the F's output is sent after the pair's B (_forward_backward_chunk)
            self.pair += ((mb, c, s, idx, comm_last),)
        elif not self._last(s):
            L.deliver_f[idx] = self._send(mb, c, 0, last, comm_last) if self.stage_rank[s + 1] != self.r else last

    def _send_pair_forward(self, last: int) -> None:
        mb, c, s, idx, comm_last = self.pair[3]
        if not self._last(s):
            L = self.links
            L.deliver_f[idx] = self._send(mb, c, 0, last, comm_last) if self.stage_rank[s + 1] != self.r else last

    def backward(self, pos: int, mb: int, c: int) -> None:
        g, L = self.g, self.links
        s = g.stage_of[self.r][c]
        cb = g.chunk_base[self.r][c]
        fk, bk, has_r, rk = self.csig[c]
        idx = s * g.m + mb
        hw = (mb, c) in self.wset
        bval, cval = cb + (V_BI if hw else V_BF), cb + CHUNK_FIXED + 2 * len(fk)
        paired = (pos - 1) in self.pairs
        f_comm = self.prev_comm
        pair_gate = -1
        if paired:  # the B does not wait for the F's hidden all-to-all; its own hides from the pair's start
            base, pair_gate, self.prev_comm = self.pair[:3]
            bk = pair_kinds(bk)
            bval, cval = base + 1, base + PAIR_FIXED + 2 * len(self.csig[self.order[pos - 1][2]][0])
        pieces = self.ggroups.get(c) if (not hw and pos == self.last_g[c]) else None
        entry = gate = r_comm = b_comm = -1
        rval = cb + CHUNK_FIXED + 2 * (len(fk) + len(bk))
        if paired:  # the B's hidden all-to-all opens the pair: queued ahead of the recompute's collectives
            pre, b_comm = self.prev_comm, self._hidden(mb, c, cval, bk, pair_gate)
            self.prev_comm = pre
        if has_r:
            entry, r_comm = self._recompute(mb, c, rval, rk)
        if paired:
            gate = pair_gate
        elif _any_beside(bk):
            gate = g.add(self.C, K_GATE, mb, c, 1, 0, -1, self.prev_comm if entry < 0 else -1)
            if entry < 0:
                entry = gate
        wait = self.prev_comm if entry < 0 else -1
        if pieces:
            for j, bj in enumerate(pieces):
                last = self._grad_piece(K_B, mb, c, j, bj, wait if j == 0 else -1)
                if entry < 0:
                    entry = last
        else:
            last = g.add(self.C, K_B, mb, c, 0, bval, -1, wait)
            if entry < 0:
                entry = last
        L.need.append((entry, *self._b_input(mb, c)))
        L.b_out[idx] = last
        if has_r:  # the recompute's exposed collectives, after the backward's kernels (``_recompute``)
            last = self._exposed(mb, c, rval, rk, last)
        if paired:
            last = self._exposed(mb, c, cval, bk, last)
            comm_last = r_comm if r_comm >= 0 else b_comm   # the action's latest in the comm stream's FIFO
            self.prev_comm = comm_last if comm_last >= 0 else f_comm
            self._send_pair_forward(last)
            self.pair = ()
        else:
            last, comm_last = self._comm(mb, c, cval, bk, gate, last)
            if comm_last < 0:  # the gradient leaves after the action's collectives, as a forward's output
                comm_last = r_comm
        if not self._first(s):
            L.deliver_b[idx] = self._send(mb, c, 1, last, comm_last) if self.stage_rank[s - 1] != self.r else last

    def _recompute(self, mb: int, c: int, first_val: int, kinds) -> tuple[int, int]:
        """The chunk's recompute (``R``) and the hidden part of its collectives, on the comm stream
        from a gate at its start as a forward's (``_hidden``). Their exposed part is placed after
        the backward's kernels, beside the backward's own (``backward``): the recompute's and the
        backward's kernels stay one entry of the folded program (chains.py), and the metrics read
        an entry's leading kernels as its kernel time. Later compute, and the backward's gradient
        send, wait for the hidden part as for a forward's (``prev_comm``). Returns the first task
        and the last hidden collective (-1: none)."""
        g = self.g
        gate = -1
        if _any_beside(kinds):
            entry = gate = g.add(self.C, K_GATE, mb, c, 3, 0, -1, self.prev_comm)
            g.add(self.C, K_R, mb, c, 0, g.chunk_base[self.r][c] + V_R)
        else:
            entry = g.add(self.C, K_R, mb, c, 0, g.chunk_base[self.r][c] + V_R, -1, self.prev_comm)
        return entry, self._hidden(mb, c, first_val, kinds, gate)

    def weight(self, pos: int, mb: int, c: int) -> None:
        g, L = self.g, self.links
        idx = g.stage_of[self.r][c] * g.m + mb
        pieces = self.ggroups.get(c) if pos == self.last_g[c] else None
        if pieces:
            for j, bj in enumerate(pieces):
                t = self._grad_piece(K_W, mb, c, j, bj, self.prev_comm if j == 0 else -1)
                if j == 0:
                    L.need.append((t, L.b_out, idx))
        else:
            t = g.add(self.C, K_W, mb, c, 0, g.chunk_base[self.r][c] + V_W, -1, self.prev_comm)
            L.need.append((t, L.b_out, idx))

    def tail(self) -> None:
        """finalize_model_grads (the buckets not launched by their pieces: 0 s with
        ``overlap_grad_reduce``), the optimizer, the param gathers (0 s with ``overlap_param_gather``)."""
        g, rb = self.g, self.rb
        last_compute = g.streams[self.C][-1]
        for j in range(self.ng):
            self.last_dp = g.add(self.DP, K_DPG, -1, -1, j, grad_tail_slot(rb, self.ng, self.npb, j),
                                 last_compute if j == 0 else -1, self.prev_comm if j == 0 else -1)
        opt = g.add(self.C, K_OPT, -1, -1, 0, rb + V_OPT, self.last_dp, self.prev_comm)
        for j in range(self.npb):
            g.add(self.DP, K_DPP, -1, -1, j, param_tail_slot(rb, self.ng, self.npb, j), opt if j == 0 else -1)


def _any_beside(kinds) -> bool:
    return any(beside for _, beside in kinds)


_ACTIONS = {"F": _Rank.forward, "B": _Rank.backward, "W": _Rank.weight}


def _pair_types(order, pairs: frozenset[int]) -> tuple[frozenset[int], tuple]:
    """The pairs a rank runs and their distinct types (F chunk, B chunk, the B leaves a W), in
    order of first appearance. A pair needs an F right before a B of another micro-batch-chunk;
    the first F and the last backward of each chunk stay alone (they carry the DP bucket pieces)."""
    wset = {(a[1], a[2]) for a in order if a[0] == "W"}
    first_f: dict[int, int] = {}
    last_g: dict[int, int] = {}
    for pos, (kind, mb, c) in enumerate(order):
        if kind == "F":
            first_f.setdefault(c, pos)
        elif kind == "W" or (mb, c) not in wset:
            last_g[c] = pos
    kept: set[int] = set()
    types: dict[tuple[int, int, bool], None] = {}
    for pos in sorted(pairs):
        f, b = order[pos], order[pos + 1] if pos + 1 < len(order) else None
        if f[0] != "F" or b is None or b[0] != "B" or (f[1], f[2]) == (b[1], b[2]):
            raise ValueError(f"F&B pair at position {pos} is not an F followed by the B of another micro-batch")
        if pos == first_f[f[2]] or pos + 1 == last_g[b[2]]:
            continue
        kept.add(pos)
        types.setdefault((f[2], b[2], (b[1], b[2]) in wset), None)
    return frozenset(kept), tuple(types)


def _stages(sched, name: str, p: int, vpp: int, nch: int) -> tuple[list[list[int]], list[int]]:
    nstage = p * nch
    stage_of = [[sched.stage_of(r, c, p, vpp) for c in range(nch)] for r in range(p)]
    stage_rank = [-1] * nstage
    for r in range(p):
        for c in range(nch):
            stage_rank[stage_of[r][c]] = r
    if -1 in stage_rank:
        raise ValueError(f"schedule '{name}': stage_of is not a bijection onto {nstage} stages")
    return stage_of, stage_rank


def build_graph(key: tuple, orders: Sequence[Sequence[Action]] | None = None) -> TaskGraph:
    """``key = (schedule, p, m, vpp, p2p_blocking, fb_overlap, sig)`` with ``sig`` as in
    ``layout.layout``; ``fb_overlap`` = Megatron-Core's combined 1F1B (``schedule/_combined.py``).
    Explicit ``orders`` run without F&B pairs. The DP overlap flags are not in it: the structure
    holds both places of every bucket (``_Rank.tail``), values.py fills the one the flags choose."""
    name, p, m, vpp, blocking, fb, sig = key
    sched = get_schedule(name)
    sched.check(p, m, vpp)
    nch = sched.chunks_per_rank(vpp)
    for r, s in enumerate(sig):
        if len(s[2]) != nch:
            raise ValueError(f"stages[{r}] has {len(s[2])} chunks; schedule '{name}' with vpp={vpp} needs {nch}")
    pairs = None
    if orders is None:
        orders, pairs = fb_orders(sched, p, m, vpp, fb)
    validate_orders(orders, p, m, nch)
    stage_of, stage_rank = _stages(sched, name, p, vpp, nch)

    g = TaskGraph(p)
    g.p, g.m, g.nch, g.stage_of, g.sig = p, m, nch, stage_of, sig
    g.chain_len = p * nch // sched.chains
    ptypes = []
    g.pairs = []
    for r in range(p):
        kept, types = _pair_types(orders[r], pairs[r] if pairs else frozenset())
        g.pairs.append(kept)
        ptypes.append(types)
    g.rank_base, g.chunk_base, g.n_vals, g.pair_base = layout(sig, ptypes)
    g.grad_piece_of = [[None] * s[0] for s in sig]
    g.param_piece_of = [[None] * s[1] for s in sig]
    links = _Links(p * nch, m)
    for r in range(p):
        rk = _Rank(g, links, r, orders[r], stage_rank, blocking)
        rk.params_first()
        for pos, (kind, mb, c) in enumerate(orders[r]):
            _ACTIONS[kind](rk, pos, mb, c)
        rk.tail()
    d1 = g.d1  # patched with the links known only once every rank is built
    for task, arr, i in links.need:
        d1[task] = arr[i]
    return g
