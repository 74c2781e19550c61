"""The memory-headroom objective's bound on a group: the most GiB any of its candidates may leave
free, from the closed-form memory the refinement uses (``refine._Memory``), so the frontier
(run.py ``_best_first``) screens groups in that order and never screens one that cannot reach the
top."""

from __future__ import annotations

import math
from typing import Any

from .refine import _group
from .space import SearchSpace
from .types import HEADROOM_SLACK_GIB, Rejection


def headroom_bound(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int,
                   order: int) -> tuple[float, Rejection | None]:
    """(an upper bound on the memory headroom — GiB left free on the fullest stage, the estimate's
    ``free_memory_gib`` — of every candidate of the group; its rejection when its layout is invalid
    or it fits at no recompute and ZeRO stage). Memory falls along each recompute family
    (``recompute_options``), so the most any option leaves free is at none, selective or a family's
    last option, at the ZeRO stage that leaves the most; ``_Memory.over`` is the estimate's memory
    from its closed forms (equal to the plan's to ~1e-14 GiB, ``tightest``). What lets the headroom
    objective screen its groups best first instead of all of them before timing any: a 64…1,024-GPU
    space ran minutes with its progress bar still."""
    g = _group(space, gpus, layout, mbs)
    if isinstance(g, Rejection):
        return -math.inf, g
    if not g.rcs or not g.zs:
        return math.inf, None
    ends = [rc for rc in g.rcs if rc[0] in ("none", "selective")]
    for fam in ("offload", "full"):
        ends += [rc for rc in g.rcs if rc[0] == fam][-1:]
    best = max(-g.memo.over(rc, z) for rc in ends for z in g.zs)
    if best < -HEADROOM_SLACK_GIB:
        return best, g.oom(space, gpus, layout)
    return best + HEADROOM_SLACK_GIB, None
