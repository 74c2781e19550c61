"""The step-time lower bound of a group, priced once per block kind and shared across layouts.

The bound (``pipeline_bound``) needs, per chunk, its forward / backward-input / backward-weight /
recompute phases each run alone at no contention (``sim/overlap.py: phase_seconds`` with slowdown
1). Those are linear in the blocks a chunk holds: a chunk's phase is its blocks' phases added
``n`` times (``cost/stage.py: _chunk_phases`` → ``PhaseCost.add``), and ``phase_seconds`` is a sum
over collectives of terms linear in their repeat count (``sim/overlap.py: resolve``). A block's
seconds depend only on what prices it — tp, cp, cp_comm_type, ep, etp, the micro-batch size and
the fixed settings (dtype, kernels, …) — and the chunk's block counts only on the pipeline layout
(pp, vpp, schedule, split). So the blocks are priced once per (tp, cp, cp_comm_type, ep, etp,
mbs), the layout placed once per (pp, vpp, schedule, split), and a group's bound is a few
additions instead of a plan; ``tests/test_search.py`` checks it equals ``prune._bounds`` of the
group's own plan on every group of small dense and MoE spaces.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ..config.scenario import Scenario
from ..schedule import get_schedule
from ..sim.graph import _split
from .a2a import A2A, Phases, a2a_of, a2a_work, hides_a2a
from .alone import _MAY_HIDE, ep_alone, phase_alone, zero_alone  # noqa: F401  (re-exported)
from .orders import Counts, Orders

BLOCK_KEY = ("tp", "cp", "cp_comm_type", "ep", "etp", "micro_batch_size")
PLACE_KEY = ("pp", "vpp", "schedule", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")


Stage = tuple[int, int, Phases]                 # (pp rank, data-flow stage, its phases for one micro-batch)


@dataclass(frozen=True, slots=True)
class Pipe:
    """What the bound reads of a pipeline layout and its schedule (``sim/graph.py`` rules):
    which rank runs each data-flow stage, the chains (``Schedule.chains``), whether every B
    carries its weight gradient (``not Schedule.splits_weight_grad``: the B task is B-full,
    ``layout.V_BF``), and which hand-offs cross ranks (a p2p send; a hop inside a rank is free)."""

    stage_rank: tuple[int, ...]
    chain_len: int
    full_b: bool
    send_f: tuple[bool, ...]                 # stage s sends its activation to another rank
    send_b: tuple[bool, ...]                 # stage s sends its input gradient to another rank
    ranks: tuple[tuple[int, tuple[int, ...]], ...]   # (rank, its stages), ranks in ascending order
    head_rank: tuple[int, ...]               # per stage: the rank of its chain's first stage


def pipe_of(rank_stage: list[tuple[int, int]], schedule: str) -> Pipe:
    """The ``Pipe`` of chunks given as (pp rank, data-flow stage) and a schedule name."""

    sched = get_schedule(schedule)
    n_st = len(rank_stage)
    rank = [0] * n_st
    for r, s in rank_stage:
        rank[s] = r
    n = max(1, n_st // max(1, sched.chains))
    send_f = tuple(s % n != n - 1 and rank[s + 1] != rank[s] for s in range(n_st))
    send_b = tuple(s % n != 0 and rank[s - 1] != rank[s] for s in range(n_st))
    by_rank: dict[int, list[int]] = {}
    for s in range(n_st):
        by_rank.setdefault(rank[s], []).append(s)
    return Pipe(tuple(rank), n, not sched.splits_weight_grad, send_f, send_b,
                tuple((r, tuple(by_rank[r])) for r in sorted(by_rank)), tuple(rank[s - s % n] for s in range(n_st)))


def pipeline_bound(pipe: Pipe, phases: list[Phases], m: int, tails: dict[int, float] | None = None,
                   p2p: float = 0.0, inline: bool = True, ranks: tuple | None = None,
                   order: Orders | None = None, grads: dict[int, tuple[float, ...]] | None = None,
                   a2a: A2A | None = None) -> float:
    """A lower bound on the step of the schedule, from data flow alone (``phases[s]``: stage s's
    phases each run alone, ``phase_alone``; DP buckets and the optimizer only in ``tails``).
    With F_s, B_s the forward and backward of stage s (B_s = backward-input + weight gradient when
    the schedule never splits W: its B task is B-full), P the p2p send of a hand-off that crosses
    ranks (on the sender's compute stream with ``inline`` — Megatron's blocking
    ``send_forward``/``send_backward`` —, else on its pp stream; the receiver waits for it either
    way), and rank r's lowest stage lo(r):

    * rank r's compute stream does nothing before micro-batch 1's forward reached stage lo(r):
      it starts at ≥ Σ_{s<lo} (F_s + P) and then runs m·(its F + B + W + R, and its inline
      sends), serially, then its ``tails[r]`` (``prune.dp_tail``: the optimizer follows its last compute);
    * for each stage s of rank r, the last backward on s ends ≥ that start + m·(F_s + B_s + R_s,
      and s's inline sends): every forward, recompute and backward of s precedes it on r's one
      stream; that micro-batch's gradient then runs back through B_{s−1}, …, B_0 (each after the
      send that brings it), one after another, and the rank of B_0 still runs its tail after it;
    * the same from the last backward on rank r's lowest stage lo of a chain, which follows every
      forward, recompute and backward of all of r's stages in that chain (the backward of a
      micro-batch on a higher stage of the chain precedes its backward on lo): ≥ start +
      m·Σ_{s of r in the chain}(F_s + B_s + R_s) + B_{lo−1} + … + B_0 — the interleaved drain.

    The step ends after all of them (the 1F1B bubble, Narayanan et al. 2021 §2.2.1: (p−1) stage
    times on top of m; for uniform stages of a B-full schedule the second term is the 1F1B
    makespan (m + p − 1)(F + B)). ``chains``: stage s is stage s mod n of chain s div n, each chain
    with its own first stage (DualPipe's two directions), and a rank starts when the first of its
    chains reaches it. ``ranks``: the (rank, stages) to evaluate when the others are known not to
    matter (``Placed.rep_ranks``); all of them by default.

    ``order`` (``order_terms``, any schedule's own per-rank orders): per rank, for each of its
    chunks, the actions its order runs up to and including that chunk's last B, and the actions
    the chain's head rank runs after that micro-batch's B on the chain's first stage. The last B
    of chunk c on rank r (stage s) ends ≥ start + the work of everything before it in its
    stream's FIFO order; its micro-batch's gradient then drains to the chain's first stage
    (B_{s−1} … B_0), whose rank still runs every action after that B, then its tail. For one
    chunk per rank this is the zero-bubble schedules' tail (Qi et al. 2024, ZB-H1/H2: W fills
    the bubble, never the drain); for DualPipe (DeepSeek-V3 report §3.2.1, Table 2) and
    interleaved it is the drain of a middle rank's last backward, (p/2 − 1) or (p − 1) stage
    backwards, on top of nearly all of its work.

    ``grads`` (with ``order``; only when ``overlap_grad_reduce`` launches the gradient buckets
    from the backward, graph.py ``_grad_piece``): per rank, its gradient buckets' seconds. A
    chunk's last gradient action (its last W, or its last B-full) launches that chunk's
    own group of buckets (graph.py ``_split``: contiguous groups in chunk order), one per
    piece, on the rank's one DP stream, and the optimizer waits for the last bucket. So the
    step ends ≥ start + the work before the i-th such action + every bucket from group i on +
    ``tails[r]`` (the optimizer, and the parameter gathers it leaves behind without
    ``overlap_param_gather``): what DualPipe's two groups queue at the end of a step.

    ``a2a`` (``A2A``, where F&B pairs may hide the expert all-to-all, ``hides_a2a``): per
    data-flow stage, its F's and B's all-to-all run alone (``ep_alone``) and their whole length,
    and per rank its pairs. An action run alone takes at least its all-to-all alone on the compute
    stream; a pair runs each member's all-to-all beside the other's compute (sim/overlap.py
    ``paired``: window + contention + exposed ≥ the all-to-all's length ≥ what it adds alone), so
    a pair takes at least both. So rank r is busy ≥ start + m·Σ its stages' all-to-all alone,
    then its tail. Closer (``a2a.a2a_work``): every action of r at its own lower bound, a pair's
    at max(B, A_F) + max(F, A_B). And on the way in and the way out: a lone F or B runs its
    all-to-all (its exposed part and contention, on the compute stream) before the send of its
    output, and a pair sends both outputs after its B (sim/graph.py), so from the arrival of the
    later input a pair takes ≥ max(B, A_F) + max(F, A_B) ≥ F + A_F and ≥ B + A_B: each hop of
    micro-batch 1's forward and of the drain's backwards adds at least that stage's all-to-all
    alone."""
    n = pipe.chain_len
    full_b = pipe.full_b
    tails = tails or {}
    sf, sb = pipe.send_f, pipe.send_b
    n_st = len(phases)
    pre_f = [0.0] * n_st
    pre_b = [0.0] * n_st
    acc_f = acc_b = 0.0
    for s, (f, b, w, _) in enumerate(phases):
        if s % n == 0:
            acc_f = acc_b = 0.0
        pre_f[s], pre_b[s] = acc_f, acc_b
        acc_f += f + (p2p if sf[s] else 0.0)
        acc_b += b + (w if full_b else 0.0) + (p2p if sb[s] else 0.0)
        if a2a is not None:  # a lone F or B holds its all-to-all alone before its send; a pair ≥ F + A_F, ≥ B + A_B
            acc_f += a2a.stages[s][0]
            acc_b += a2a.stages[s][1]
    # drain[s]: from the end of a backward on stage s to the end of that micro-batch's backward
    # on its chain's first stage: its send (when not already on the compute stream), then B_{s−1} … B_0
    drain = pre_b if inline or not p2p else [d + (p2p if sb[s] else 0.0) for s, d in enumerate(pre_b)]
    own = p2p if inline else 0.0
    head_tail = [tails.get(h, 0.0) for h in pipe.head_rank] if tails else [0.0] * n_st
    cost = _costs(phases, own, sf, sb) if order is not None else None
    best = 0.0
    for r, mine in (pipe.ranks if ranks is None else ranks):
        start = min([pre_f[s] for s in mine])
        tail_r = tails.get(r, 0.0)
        serial = 0.0
        chain: dict[int, list[float]] = {}  # chain → [its stages' work before their last backward, lowest stage]
        for s in mine:
            f, b, w, rc = phases[s]
            sends = own * (sf[s] + sb[s])
            serial += f + b + w + rc + sends
            last = f + b + rc + sends + (w if full_b else 0.0)
            t = start + m * last + drain[s] + head_tail[s]
            if t > best:
                best = t
            acc = chain.get(s // n)
            if acc is None:
                chain[s // n] = [last, s]
            else:
                acc[0] += last
                if s < acc[1]:
                    acc[1] = s
        t = start + m * serial + tail_r
        if t > best:
            best = t
        if a2a is not None:
            lone = sum(a2a.stages[s][0] + a2a.stages[s][1] for s in mine)
            best = max(best, start + m * lone + tail_r)
            if a2a.pairs:
                best = max(best, start + m * (serial + lone) + a2a_work((), a2a.pairs[r], a2a, phases, full_b) + tail_r)
        for work, lo in chain.values():
            lo_i = int(lo)
            t = start + m * work + drain[lo_i] + head_tail[lo_i]
            if t > best:
                best = t
        if cost is not None and order is not None:
            held = a2a if order.last_b_pairs else None   # the all-to-all of the counted actions too
            for k, (s, before, after) in enumerate(order.last_b[r]):
                extra = 0.0
                if held is not None:
                    pb, pa = order.last_b_pairs[r][k]
                    extra = a2a_work(before, pb, held, phases, full_b) + a2a_work(after, pa, held, phases, full_b)
                best = max(best, start + _work(before, cost) + drain[s] + _work(after, cost) + extra + head_tail[s])
            g = grads.get(r) if grads else None
            if g:
                befores = order.last_grad[r]
                group = chunk_groups(g, order.last_grad_chunks[r])
                for i, before in enumerate(befores):
                    queued = sum(group[i:])
                    extra = a2a_work(before, order.last_grad_pairs[r][i], held, phases, full_b) if held is not None else 0.0
                    best = max(best, start + _work(before, cost) + extra + queued + tail_r)
    return best


def chunk_groups(buckets: tuple[float, ...], chunks: tuple[int, ...]) -> list[float]:
    """The seconds of each chunk's group of gradient buckets, in the order of ``chunks`` (each
    chunk's last gradient action, in order). The engine gives chunk c the c-th of len(chunks)
    contiguous near-equal groups (graph.py ``_split`` in chunk order)."""
    groups = _split(len(buckets), list(range(len(chunks))))
    return [sum(buckets[j] for j in groups[c]) for c in chunks]


def _costs(phases: list[Phases], own: float, sf: tuple[bool, ...], sb: tuple[bool, ...]) -> list[tuple[float, float, float]]:
    """Per stage, the seconds of one F on its compute stream (its forward and inline send), one B
    (its recompute, backward-input and inline send) and one W (its weight gradient)."""
    return [(f + own * sf[s], b + rc + own * sb[s], w) for s, (f, b, w, rc) in enumerate(phases)]


def _work(counts: Counts, cost: list[tuple[float, float, float]]) -> float:
    """Seconds of ``counts`` actions (``order_terms``) on one compute stream, each at its stage's
    ``_costs`` (a B-full counts one W: its B task carries the weight gradient)."""
    t = 0.0
    for s, nf, nb, nw in counts:
        cf, cb, cw = cost[s]
        t += nf * cf + nb * cb + nw * cw
    return t


def schedule_chains(name: str) -> int:
    """Independent pipelines of a schedule (its registry entry's ``chains``)."""

    return get_schedule(name).chains


Sides = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]
# the sides of a block's seconds (EP: what its expert all-to-all adds run alone; EP_LEN: its whole length)
NO_TP, TP_OFF, TP_UB, EP, EP_LEN = 0, 1, 2, 3, 4


def speed_factors(sc: Scenario) -> tuple[float, float]:
    """(contention slowdown, compute multiplier) the engine applies to every phase: the strategy's
    ``overlap_slowdown`` (sim/overlap.py) and the straggler factor on compute
    (pipeline.py ``pipeline_input``: ``straggler_factor × scenario_straggler_factor``)."""
    from ..cost.scale import scenario_straggler_factor

    s = sc.strategy
    return float(s.overlap_slowdown), s.straggler_factor * scenario_straggler_factor(sc)


# Collectives some schedule or flag may hide entirely, so a bound leaves them out: the ZeRO-2/3
# collectives (DP flags) and the expert all-to-all, which F&B pairs (dualpipe, dualpipev,
# overlap_moe_expert_parallel_comm) and moe_shared_expert_overlap hide behind other compute
# (sim/layout.py PAIRED_KIND; sim/overlap.py ``paired``).
def a2a_terms(placed: "Placed", secs: dict[str, "Sides"], strategy, m: int) -> tuple[bool, A2A | None]:
    """(whether F, B and W hold the expert all-to-all, ``pipeline_bound``'s ``a2a``) of a
    strategy's placed layout with m micro-batches per chain: the one or the other, as
    ``hides_a2a`` decides."""
    ep = not hides_a2a(strategy)
    if ep:
        return ep, None
    stages = stage_a2a(placed, secs)
    return ep, a2a_of(stages, strategy, m)


def chunk_parts(cw) -> dict[str, int]:
    """How many times each block kind runs per micro-batch in one chunk: the parts
    ``cost/stage.py: _chunk_phases`` adds up."""
    parts = [("attn", cw.attn_layers - cw.window_layers), ("attn_window", cw.window_layers),
             ("mlp", cw.dense_layers), ("moe", cw.moe_layers), ("mamba", cw.mamba_layers),
             ("embed", int(cw.first)), ("head", int(cw.last))]
    if cw.mtp:
        parts += [(k, cw.mtp) for k in ("mtp", "attn", "moe" if cw.mtp_moe else "mlp", "head")]
    n: dict[str, int] = {}
    for k, c in parts:
        if c:
            n[k] = n.get(k, 0) + c
    return n


def chunk_works(model, strategy) -> list:
    """Every chunk (``workload.builder.ChunkWork``) of ``place_layers``, rank by rank."""
    from ..workload.builder import place_layers

    return [cw for chunks in place_layers(SimpleNamespace(model=model, strategy=strategy))  # type: ignore[arg-type]  # reads .model/.strategy only
            for cw in chunks]


@dataclass(slots=True)
class Placed:
    """A pipeline layout placed once: its ``Pipe``, its distinct chunk contents and, per
    data-flow stage, which of them it holds; the chunks themselves (for memory and recompute)."""

    pipe: Pipe
    kinds: list[dict[str, int]]
    of_stage: list[int]
    works: list                                 # ChunkWork per data-flow stage
    rep_ranks: tuple | None = None              # the ranks whose terms can be the bound's, without tails


def _rep_ranks(pipe: Pipe, of_stage: list[int]) -> tuple | None:
    """In a one-chain pipeline where rank r holds stages r, r + p, r + 2p, … (1F1B, GPipe,
    interleaved, zero-bubble), a rank holding the same chunks as a later rank, with the same
    sends, has every term of ``pipeline_bound`` no larger than that rank's (its start and the
    drains below its stages are sums over fewer stages), so without per-rank tails only the last
    rank of each kind counts. None when the layout is not of that shape."""
    p = len(pipe.ranks)
    if pipe.chain_len != len(pipe.stage_rank) or any(r != s % p for s, r in enumerate(pipe.stage_rank)):
        return None
    last: dict[tuple, int] = {}
    for i, (_, mine) in enumerate(pipe.ranks):
        last[tuple((of_stage[s], pipe.send_f[s], pipe.send_b[s]) for s in mine)] = i
    return tuple(pipe.ranks[i] for i in sorted(last.values()))


def place(model, strategy) -> Placed:
    works = chunk_works(model, strategy)
    by_stage = sorted(works, key=lambda cw: cw.index)
    kinds: list[dict[str, int]] = []
    of_stage = []
    for cw in by_stage:
        n = chunk_parts(cw)
        if n not in kinds:
            kinds.append(n)
        of_stage.append(kinds.index(n))
    pipe = pipe_of([(cw.rank, cw.index) for cw in works], strategy.schedule)
    return Placed(pipe, kinds, of_stage, by_stage, _rep_ranks(pipe, of_stage))


def stage_a2a(placed: Placed, secs: dict[str, Sides]) -> list[tuple[float, float, float, float]]:
    """Per data-flow stage, its F's and B's expert all-to-all run alone (``EP`` side) and their
    whole length (``EP_LEN``) for one micro-batch: ``A2A.stages``."""
    per = [tuple(sum(c * secs[key][side][i] for key, c in n.items()) for side, i in ((EP, 0), (EP, 1), (EP_LEN, 0), (EP_LEN, 1)))
           for n in placed.kinds]
    return [per[i] for i in placed.of_stage]  # type: ignore[misc]  # four sums


def stage_phases_of(placed: Placed, secs: dict[str, Sides], side: int,
                    recompute: list[float] | None = None, ep: bool = False) -> list[Phases]:
    """Per data-flow stage, its (F, B, W, R) from the block seconds of one side (0: without TP
    collectives); ``recompute[i]``: the R of distinct chunk i (none: 0). ``ep``: with the expert
    all-to-all run alone added to F, B and W (``hides_a2a`` is False)."""
    per = []
    for i, n in enumerate(placed.kinds):
        f = b = w = 0.0
        for key, c in n.items():
            x = secs[key][side]
            f += c * x[0]
            b += c * x[1]
            w += c * x[2]
            if ep:
                e = secs[key][EP]
                f += c * e[0]
                b += c * e[1]
                w += c * e[2]
        per.append((f, b, w, recompute[i] if recompute else 0.0))
    return [per[i] for i in placed.of_stage]


class SharedBounds:
    """Memo of block seconds and placed layouts for one search space in one process."""

    def __init__(self) -> None:
        self.blocks: dict[tuple, dict[str, Sides]] = {}
        self.places: dict[tuple, Placed] = {}
        self.priced: dict[tuple, Any] = {}
        self.work: dict[tuple, tuple[float, float]] = {}
        self.chunk_memory: dict[tuple, dict[tuple, tuple[float, float]]] = {}   # refine._Memory, per block kind
        self.order_peaks: dict[tuple, list[tuple[float, float]]] = {}          # refine._Memory: per-rank peaks of an order
        self.statics: dict[tuple, dict[int, list[tuple[float, float]]]] = {}   # refine._Memory: (model states, other streams' pools) per ZeRO stage, per rank
        self.floors: dict[tuple, tuple[float, float, float, float, float]] = {}  # prune.work_floor: model work per block kind
        self.chains: dict[str, int] = {}                                       # prune.work_floor: chains per schedule
        self.priced_rc: dict[tuple, dict[tuple, Any]] = {}                     # refine._Memory: priced blocks per recompute, per block kind
        self.zero: dict[tuple, dict[tuple, tuple[float, float, float]]] = {}  # refine._Memory: ZeRO-2/3 deltas per chunk, per block kind
        self.counts: dict[str, int] | None = None   # block kinds of the whole model (one stage)
        self.chunk_kinds: dict[int, tuple] = {}     # refine._chunk_kinds: per placed layout, its chunks for memory
        self.block_memo: dict[tuple, Any] = {}      # blocks.block_seconds: one block's sides by what prices it

    def secs(self, gpus: int, strat: dict[str, Any], scenario_of) -> dict[str, Sides]:
        """Block seconds of ``strat``'s block kind on ``gpus`` GPUs (the straggler factor and the
        network follow the GPU count); ``scenario_of()`` builds the validated scenario when new."""
        from .blocks import block_seconds

        bk = (gpus, *(strat[k] for k in BLOCK_KEY))
        secs = self.blocks.get(bk)
        if secs is None:
            secs = self.blocks[bk] = block_seconds(scenario_of(), self.block_memo)
        return secs

    def priced_blocks(self, gpus: int, strat: dict[str, Any], scenario_of):
        """``cost/stage.py: _priced`` of ``strat``'s block kind: its priced blocks and per-layer
        activations (what every chunk's memory and recompute read; they depend on the block
        kind alone — ``workload/dims.py``)."""
        from ..cost.stage import _priced
        from ..workload.builder import build_workload

        bk = (gpus, *(strat[k] for k in BLOCK_KEY))
        hit = self.priced.get(bk)
        if hit is None:
            sc = scenario_of()
            hit = self.priced[bk] = _priced(sc, build_workload(sc))
        return hit

    def model_work(self, gpus: int, strat: dict[str, Any], model, whole_strategy, scenario_of,
                   tco: bool) -> tuple[float, float]:
        """(forward + backward-input + backward-weight seconds, forward + backward-input seconds)
        of one micro-batch through the whole model (every block kind times its count over the
        layers of a one-stage placement, ``whole_strategy()``), each block at the least of its
        sides (with ``tco``: with or without userbuffers), the TP collectives as priced without
        userbuffers otherwise."""
        key = (gpus, tco, *(strat[k] for k in BLOCK_KEY))
        hit = self.work.get(key)
        if hit is None:
            secs = self.secs(gpus, strat, scenario_of)
            if self.counts is None:
                self.counts = {}
                for cw in chunk_works(model, whole_strategy()):
                    for k, c in chunk_parts(cw).items():
                        self.counts[k] = self.counts.get(k, 0) + c
            sides = (TP_OFF, TP_UB) if tco else (TP_OFF,)
            hit = self.work[key] = (sum(c * min(sum(secs[k][sd]) for sd in sides) for k, c in self.counts.items()),
                                    sum(c * min(secs[k][sd][0] + secs[k][sd][1] for sd in sides) for k, c in self.counts.items()))
        return hit

    def model_a2a(self, gpus: int, strat: dict[str, Any], scenario_of, paired: bool) -> float:
        """The expert all-to-all of one micro-batch through the whole model (``counts`` as in
        ``model_work``, after it), each phase's run alone (``EP``): the forward's, backward's and
        weight gradient's where no pair can hide it (``stage_phases_of``'s ``ep``), the forward's and
        backward's where one may (``stage_a2a``: what every action or pair runs at least)."""
        secs = self.secs(gpus, strat, scenario_of)
        n = 2 if paired else 3
        return sum(c * sum(secs[k][EP][:n]) for k, c in (self.counts or {}).items())

    def placed(self, strat: dict[str, Any], model, strategy) -> Placed:
        pk = tuple(strat.get(k) for k in PLACE_KEY)
        hit = self.places.get(pk)
        if hit is None:
            hit = self.places[pk] = place(model, strategy)
        return hit

    def bound(self, gpus: int, strat: dict[str, Any], model, strategy, m: int, scenario_of, tco: bool) -> float:
        """``pipeline_bound`` of the no-recompute plan of ``strat`` with m micro-batches and the
        TP collectives as priced without ``tp_comm_overlap`` — the least of that and the bound
        with them as priced with it when ``tco`` (the group holds both)."""
        secs = self.secs(gpus, strat, scenario_of)
        placed = self.placed(strat, model, strategy)
        reps = placed.rep_ranks
        ep, a2a = a2a_terms(placed, secs, strategy, m)
        out = pipeline_bound(placed.pipe, stage_phases_of(placed, secs, TP_OFF, ep=ep), m, ranks=reps, a2a=a2a)
        if tco:
            out = min(out, pipeline_bound(placed.pipe, stage_phases_of(placed, secs, TP_UB, ep=ep), m, ranks=reps, a2a=a2a))
        return out
