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

from types import SimpleNamespace
from typing import Any

from ..config.scenario import Scenario

BLOCK_KEY = ("tp", "cp", "cp_comm_type", "ep", "etp", "micro_batch_size")
PLACE_KEY = ("pp", "vpp", "schedule", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")


Phases = tuple[float, float, float, float]     # forward, backward-input, backward-weight, recompute seconds
Stage = tuple[int, int, Phases]                 # (pp rank, data-flow stage, its phases for one micro-batch)


def pipeline_bound(stages: list[Stage], m: int, tails: dict[int, float] | None = None, chains: int = 1) -> float:
    """A lower bound on the step of any schedule, from data flow alone (each phase at no
    contention, p2p, DP and optimizer work left out). With F_s, B_s the forward and
    backward-input of stage s (data-flow order) and rank r's lowest stage lo(r):

    * rank r's compute stream does nothing before micro-batch 1's forward reached stage lo(r):
      it starts at ≥ Σ_{s<lo} F_s and then runs m·(its F + B + W + R), serially;
    * for each stage s of rank r, the last backward-input on s ends ≥ that start + m·(F_s + B_s
      + R_s) (every forward, recompute and backward of s precedes it on r's one stream), and
      that micro-batch's gradient then runs back through B_{s−1}, …, B_0, one after another.

    The step ends after both (GPipe/1F1B-style bubble: Narayanan et al. 2021 §2.2.1, (p−1)
    stage times on top of m). ``tails[r]``: work rank r must still run after all its compute
    (``dp_tail``), added to the first term. ``chains``: the schedule's independent pipelines
    (schedule/base.py; DualPipe's two directions): stage s is stage s mod (stages/chains) of chain
    s div (stages/chains), each chain with its own first stage, and a rank starts when the first
    of its chains reaches it."""
    by_stage = sorted(stages, key=lambda x: x[1])
    n = max(1, len(by_stage) // max(1, chains))
    pre_f: dict[int, float] = {}
    pre_b: dict[int, float] = {}
    acc_f: dict[int, float] = {}
    acc_b: dict[int, float] = {}
    for _, s, (f, b, _, _) in by_stage:
        c = s // n
        pre_f[s], pre_b[s] = acc_f.get(c, 0.0), acc_b.get(c, 0.0)
        acc_f[c], acc_b[c] = pre_f[s] + f, pre_b[s] + b
    ranks: dict[int, list[tuple[int, Phases]]] = {}
    for r, s, ph in by_stage:
        ranks.setdefault(r, []).append((s, ph))
    best = 0.0
    for r, mine in ranks.items():
        start = min(pre_f[s] for s, _ in mine)
        best = max(best, start + m * sum(sum(ph) for _, ph in mine) + (tails or {}).get(r, 0.0))
        for s, (f, b, _, rc) in mine:
            best = max(best, start + m * (f + b + rc) + pre_b[s])
    return best


def schedule_chains(name: str) -> int:
    """Independent pipelines of a schedule (its registry entry's ``chains``)."""
    from ..schedule import get_schedule

    return get_schedule(name).chains


def dp_tail(dp, overlap_grad_reduce: bool, overlap_param_gather: bool) -> float:
    """Seconds a rank's DP work (``cost/dp.py: DPWork``) adds after its last compute, for sure:
    the optimizer follows the last gradient bucket, which follows the backward that produces it;
    without ``overlap_grad_reduce`` every bucket runs after the rank's last backward
    (``finalize_model_grads``), without ``overlap_param_gather`` the parameter all-gathers run
    after the optimizer (sim/graph.py, the DP rules). Buckets run alone here: no contention."""
    tail = dp.optimizer_s
    if not overlap_grad_reduce:
        tail += sum(dp.grad_buckets_s)
    if not overlap_param_gather:
        tail += sum(dp.param_buckets_s)
    return tail


def block_seconds(sc: Scenario) -> dict[str, tuple[tuple[float, ...], tuple[float, ...]]]:
    """Per block kind: (without TP collectives, with them) seconds of one micro-batch's forward,
    backward-input and backward-weight, each run alone, priced as ``build_plan`` prices it with the
    overlap flags off (cost/stage.py: _block_costs); ZeRO-2/3 collectives are not in the blocks."""
    from ..cost.comm import CommModel
    from ..cost.compute import ComputeModel
    from ..cost.phase import price_ops
    from ..workload.builder import build_workload

    wl = build_workload(sc)
    cm, comm = ComputeModel(sc.system, sc.strategy.dtype), CommModel(sc)
    out = {}
    for key, ph in wl.blocks.items():
        pcs = [price_ops(ops, cm, comm, False) for ops in (ph.fwd, ph.bwd, ph.wgt)]
        out[key] = (tuple(phase_alone(pc, False) for pc in pcs), tuple(phase_alone(pc, True) for pc in pcs))
    return out


# Collectives some schedule or flag may hide entirely, so a bound leaves them out: the ZeRO-2/3
# collectives (DP flags) and the expert all-to-all, which F&B pairs (dualpipe, dualpipev,
# overlap_moe_expert_parallel_comm) and moe_shared_expert_overlap hide behind other compute
# (sim/layout.py PAIRED_KIND; sim/overlap.py ``paired``).
_MAY_HIDE = ("dp_comm", "ep_comm")


def phase_alone(pc, with_tp: bool) -> float:
    """One priced phase run alone at no contention (sim/overlap.py: phase_seconds, slowdown 1 —
    the least any overlap leaves); the collectives some overlap may hide entirely (``_MAY_HIDE``) are left out,
    and without ``with_tp`` the TP collectives too (userbuffers overlap may hide them all)."""
    from ..sim.inputs import CommTask
    from ..sim.overlap import phase_seconds

    tasks = tuple(CommTask(*t) for t in pc.tasks()
                  if t[0] not in _MAY_HIDE and (with_tp or t[0] != "tp_comm"))
    return phase_seconds(pc.compute_s, tasks, 1.0)


def stage_blocks(model, strategy) -> list[tuple[int, int, dict[str, int]]]:
    """Per chunk (pp rank, data-flow stage, how many times each block kind runs per micro-batch):
    the parts ``cost/stage.py: _chunk_phases`` adds up over the chunks of ``place_layers``."""
    from ..workload.builder import place_layers

    out = []
    for chunks in place_layers(SimpleNamespace(model=model, strategy=strategy)):  # type: ignore[arg-type]  # reads .model/.strategy only
        for cw in chunks:
            parts = [("attn", len(cw.layers) - cw.window_layers), ("attn_window", cw.window_layers),
                     ("mlp", cw.dense_layers), ("moe", cw.moe_layers), ("embed", int(cw.first)), ("head", int(cw.last))]
            if cw.mtp:
                parts += [(k, cw.mtp) for k in ("mtp", "attn", "moe" if cw.mtp_moe else "mlp", "head")]
            n: dict[str, int] = {}
            for k, c in parts:
                if c:
                    n[k] = n.get(k, 0) + c
            out.append((cw.rank, cw.index, n))
    return out


class SharedBounds:
    """Memo of block seconds and chunk blocks for one search space in one process."""

    def __init__(self) -> None:
        self.blocks: dict[tuple, dict[str, tuple[tuple[float, ...], tuple[float, ...]]]] = {}
        self.places: dict[tuple, list[tuple[int, int, dict[str, int]]]] = {}

    def bound(self, strat: dict[str, Any], model, strategy, m: int, scenario_of) -> tuple[float, float]:
        """(without TP collectives, with them): ``pipeline_bound`` of the no-recompute plan of
        ``strat`` with m micro-batches. ``scenario_of()`` builds the validated scenario when the
        block kind is new."""
        bk = tuple(strat[k] for k in BLOCK_KEY)
        secs = self.blocks.get(bk)
        if secs is None:
            secs = self.blocks[bk] = block_seconds(scenario_of())
        pk = tuple(strat.get(k) for k in PLACE_KEY)
        chunks = self.places.get(pk)
        if chunks is None:
            chunks = self.places[pk] = stage_blocks(model, strategy)
        out = []
        for side in (0, 1):
            stages = [(r, s, (*(sum(c * secs[k][side][i] for k, c in n.items()) for i in range(3)), 0.0))
                      for r, s, n in chunks]
            out.append(pipeline_bound(stages, m, chains=schedule_chains(strat["schedule"])))  # type: ignore[arg-type]
        return out[0], out[1]
