"""A block kind's seconds for the search's bounds, each block priced once per what prices it.

``block_seconds`` prices every block of a scenario's workload (``workload/builder.py``) the way
``build_plan`` does (cost/stage.py ``_block_costs``: ``price_ops`` per phase, with and without
userbuffers) and runs each phase alone (``alone.py``). A block kind of the search is a
(tp, cp, cp_comm_type, ep, etp, micro-batch size) on a GPU count, but most blocks read only part
of that: an attention block never reads ep or etp, the embedding and the head neither cp_comm_type,
an MoE block not cp_comm_type. DeepSeek-V3 on 16,384 GPUs prices 13,625 block kinds in its first
two minutes, 81,750 blocks, of which 2,995 are distinct.

So a block's sides are memoised on exactly what pricing reads (``_key``): its op lists (the ops
are frozen dataclasses, compared by value), the placement of every group its collectives run on
(``cost/comm.py`` ``group_placements``: size, span and members per scale-up domain, which with the
system's tiers decide every collective's time, ``moe_comm.py`` included), the GPU count (the
system the compute and network models are built from; the rest of the system is the space's) and
dtype (``ComputeModel``), and the contention slowdown and straggler factor (``speed_factors``).
Equal keys price alike: the memo changes no number (``tests/test_search_blocks.py``
``test_block_memo_prices_as_without_it``). Hashing a block's ops costs about a fifth of pricing it.
"""

from __future__ import annotations

from typing import Any

from ..config.scenario import Scenario
from ..memo import remember
from .a2a import ep_length
from .alone import ep_alone, phase_alone
from .bound import Sides, speed_factors

MAX_MEMO = 65_536   # distinct blocks kept per search (a cache: cleared when full)


def block_seconds(sc: Scenario, memo: dict[tuple, Any] | None = None) -> dict[str, Sides]:
    """Per block kind, three sides of the seconds of one micro-batch's forward, backward-input
    and backward-weight, each run alone (``phase_alone`` at ``sc``'s slowdown and straggler
    factor), priced as ``build_plan`` prices them (cost/stage.py: _block_costs): ``NO_TP``
    without the TP collectives, ``TP_OFF`` with them as priced without ``tp_comm_overlap``,
    ``TP_UB`` with them as priced with it (userbuffers windows: what a ``tp_comm_overlap``
    candidate's plan holds); ``EP``: what the expert all-to-all adds to each phase run alone
    (``ep_alone``; added where no F&B pair can hide it, ``hides_a2a``), ``EP_LEN`` its whole length
    (``ep_length``: what a pair runs beside the partner). ZeRO-2/3 collectives are not in the blocks.
    ``memo``: blocks already priced, by ``_key`` (module docstring)."""
    from ..cost.comm import group_placements
    from ..workload.builder import scenario_blocks

    blocks = scenario_blocks(sc)
    factors = speed_factors(sc)
    places = group_placements(sc) if memo is not None else None
    models: tuple = ()
    out = {}
    for name, ph in blocks.items():
        keys, hit = _lookup(memo, sc, name, ph, places, factors)
        if hit is None:
            if not models:
                models = _models(sc)
            hit = _sides((tuple(ph.fwd), tuple(ph.bwd), tuple(ph.wgt)), models, factors)
            if memo is not None and keys is not None:
                if len(memo) >= MAX_MEMO:
                    memo.clear()
                memo[keys[0]] = (ph, hit)
                memo[keys[1]] = hit
        out[name] = hit
    return out


_BY_ID = object()   # tags a memo key that holds a block's op lists by identity (``_lookup``)
_GROUPS: dict[int, tuple] = {}   # id of a block's Phases -> (them, the groups their collectives run on)


def _lookup(memo: dict[tuple, Any] | None, sc: Scenario, name: str, ph, places,
            factors: tuple[float, float]) -> tuple[tuple | None, Sides | None]:
    """((the block's key by identity, by content), its memoised sides or None); None keys when
    there is no memo or an op cannot be hashed. The key is what pricing one block reads (module
    docstring). The same op lists (one object: workload/builder.py builds each dense block once
    for every layout that differs only in what it does not read) are looked up by identity
    first, their entry holding them (so their id stays theirs); equal lists built apart (an MoE
    block of two cp_comm_types) by value."""
    if memo is None:
        return None, None
    seen = _GROUPS.get(id(ph))
    if seen is None or seen[0] is not ph:
        seen = (ph, tuple(sorted(ph.groups())))
        remember(_GROUPS, id(ph), seen, MAX_MEMO)
    rest = (tuple((g, places[g]) for g in seen[1]), sc.system.num_gpus, sc.strategy.dtype, factors)
    by_id = (_BY_ID, name, id(ph), *rest)
    hit = memo.get(by_id)
    if hit is not None and hit[0] is ph:
        return None, hit[1]
    key = (name, (tuple(ph.fwd), tuple(ph.bwd), tuple(ph.wgt)), *rest)
    try:
        found = memo.get(key)
    except TypeError:
        return None, None
    if found is not None:
        memo[by_id] = (ph, found)
    return (by_id, key), found


def _models(sc: Scenario) -> tuple:
    """(compute model, network model) of the scenario: what ``price_ops`` prices with."""
    from ..cost.comm import CommModel
    from ..cost.compute import ComputeModel

    return ComputeModel(sc.system, sc.strategy.dtype), CommModel(sc)


def _sides(ops: tuple, models: tuple, factors: tuple[float, float]) -> Sides:
    """The five sides of one block (``block_seconds``) from its op lists."""
    from ..cost.phase import price_ops

    cm, comm = models
    slow, k = factors
    pcs = [price_ops(list(phase), cm, comm, False) for phase in ops]
    ubs = [price_ops(list(phase), cm, comm, True) for phase in ops]
    return (tuple(phase_alone(pc, False, slow, k) for pc in pcs), tuple(phase_alone(pc, True, slow, k) for pc in pcs),
            tuple(phase_alone(pc, True, slow, k) for pc in ubs), tuple(ep_alone(pc, slow) for pc in pcs),
            tuple(ep_length(pc) for pc in pcs))
