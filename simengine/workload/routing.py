"""Where a token's routed experts live: expected distinct destination ranks and nodes per token.

Routing model. A token picks ``top_k`` distinct experts out of ``E``. With group-limited routing
(DeepSeek-V2 §2.1.3 device-limited, DeepSeek-V3 §2.1.2 node-limited; Megatron-Core
``TransformerConfig.moe_router_num_groups`` / ``moe_router_group_topk``, router
``group_limited_topk``) the experts are cut into ``n_group`` equal contiguous groups, the token first
keeps ``topk_group`` groups and then its top-k experts among their ``topk_group·E/n_group``
experts. Under *uniform* routing (balanced load, the published benchmarks force-balance it) the
kept groups are a uniform ``topk_group``-subset and the experts a uniform k-subset of their union.

Megatron places experts contiguously (rank r of the EP group holds experts
[r·E/ep, (r+1)·E/ep), ``MoELayer.local_expert_indices``), so a *unit* (a rank, or a node of
``d`` consecutive EP ranks) holds a contiguous block of ``E/units`` experts.

Derivation. Unit u is missed when none of the k experts falls in it. Given the kept groups S
(union of ``E_S`` experts, of which ``c_u(S)`` lie in u) the k-subset is hypergeometric, so

    P(u missed | S) = C(E_S − c_u(S), k) / C(E_S, k) = Π_{i<k} (E_S − c_u(S) − i) / (E_S − i)

and E[distinct units hit] = Σ_u (1 − E_S[P(u missed | S)]). The average over S only depends on
which of the groups overlapping u are kept; a small dynamic programme over those groups (how
many kept, how many of u's experts they hold) weighted by C(G − j, M − i) / C(G, M) gives it
exactly. Without groups (G = M = 1) this is the plain hypergeometric
units·(1 − C(E − E/units, k)/C(E, k)). When every group lies inside one node and M groups are
kept, at most M nodes are hit — DeepSeek-V3's "each token is sent to at most 4 nodes".
"""

from __future__ import annotations

from functools import lru_cache
from math import comb


def _miss(total: int, inside: int, k: int) -> float:
    """C(total − inside, k) / C(total, k): k draws without replacement all miss ``inside``."""
    if inside <= 0:
        return 1.0
    if total - inside < k:
        return 0.0
    p = 1.0
    for i in range(k):
        p *= (total - inside - i) / (total - i)
    return p


def _overlaps(unit: int, units: int, experts: int, groups: int) -> tuple[int, ...]:
    """Experts of ``unit`` in each group that overlaps it (contiguous layouts of both)."""
    lo, hi = unit * experts // units, (unit + 1) * experts // units
    per = experts // groups
    out = []
    for g in range(lo // per, (hi - 1) // per + 1):
        a, b = max(lo, g * per), min(hi, (g + 1) * per)
        if b > a:
            out.append(b - a)
    return tuple(out)


@lru_cache(maxsize=1024)
def _unit_miss(overlaps: tuple[int, ...], experts: int, groups: int, keep: int, k: int) -> float:
    """E_S[P(unit missed | S)] for a unit whose overlapping groups hold ``overlaps`` experts."""
    e_s = keep * (experts // groups)
    states: dict[tuple[int, int], int] = {(0, 0): 1}   # (special groups kept, unit experts kept) → ways
    for o in overlaps:
        nxt: dict[tuple[int, int], int] = {}
        for (i, c), w in states.items():
            nxt[(i, c)] = nxt.get((i, c), 0) + w
            if i < keep:
                nxt[(i + 1, c + o)] = nxt.get((i + 1, c + o), 0) + w
        states = nxt
    others, total = groups - len(overlaps), comb(groups, keep)
    return sum(w * comb(others, keep - i) * _miss(e_s, c, k) for (i, c), w in states.items()) / total


def expected_units_hit(experts: int, top_k: int, units: int, groups: int = 1, keep: int = 1) -> float:
    """Expected number of distinct units (of ``units`` equal contiguous blocks of experts) that hold
    at least one of a token's ``top_k`` experts under uniform group-limited routing."""
    if units <= 1:
        return 1.0
    if groups <= 1:
        groups, keep = 1, 1
    patterns: dict[tuple[int, ...], int] = {}
    for u in range(units):
        key = _overlaps(u, units, experts, groups)
        patterns[key] = patterns.get(key, 0) + 1
    return sum(n * (1.0 - _unit_miss(key, experts, groups, keep, top_k)) for key, n in patterns.items())
