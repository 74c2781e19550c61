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
how many of the groups overlapping u are kept (of each overlap size), weighted by the
multivariate hypergeometric C(n_v, i_v)·…·C(G − j, M − Σi) / C(G, M), which gives it exactly (simengine/workload/routing.py ``_unit_miss``). Without groups (G = M = 1) this is the plain hypergeometric
units·(1 − C(E − E/units, k)/C(E, k)). When every group lies inside one node and M groups are
kept, at most M nodes are hit — DeepSeek-V3's "each token is sent to at most 4 nodes".
"""

from __future__ import annotations

from functools import lru_cache
from itertools import product
from math import exp, lgamma


def _miss(total: int, inside: int, k: int) -> float:
    """C(total − inside, k) / C(total, k): k draws without replacement all miss ``inside``."""
    if inside <= 0:
        return 1.0
    if total - inside < k:
        return 0.0
    return exp(_log_comb(total - inside, k) - _log_comb(total, k))


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


def _log_comb(n: int, r: int) -> float:
    return lgamma(n + 1) - lgamma(r + 1) - lgamma(n - r + 1)


@lru_cache(maxsize=1024)
def _unit_miss(overlaps: tuple[int, ...], experts: int, groups: int, keep: int, k: int) -> float:
    """E_S[P(unit missed | S)] for a unit whose overlapping groups hold ``overlaps`` experts.

    A contiguous unit overlaps at most three kinds of group (a partial first, whole middle ones,
    a partial last), so S is summarised by how many of each kind it keeps (multivariate
    hypergeometric weights Π C(n_v, i_v) · C(G − j, M − Σi) / C(G, M), in logs)."""
    e_s = keep * (experts // groups)
    kinds: dict[int, int] = {}
    for o in overlaps:
        kinds[o] = kinds.get(o, 0) + 1
    values, counts = list(kinds), list(kinds.values())
    others, log_total = groups - len(overlaps), _log_comb(groups, keep)
    p = 0.0
    for picks in product(*(range(min(n, keep) + 1) for n in counts)):
        rest = keep - sum(picks)
        if rest < 0 or rest > others:
            continue
        log_w = sum(_log_comb(n, i) for n, i in zip(counts, picks)) + _log_comb(others, rest) - log_total
        if log_w < -80.0:  # below 1e-35 of the mass: no effect on the expectation
            continue
        p += exp(log_w) * _miss(e_s, sum(v * i for v, i in zip(values, picks)), k)
    return p


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
