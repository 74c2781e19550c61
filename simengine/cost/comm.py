"""Collective time: alpha-beta with ring factors, on the network tier the group actually spans.

Ring algorithms (Thakur, Rabenseifner & Gropp 2005; NCCL's busbw convention, nccl-tests
doc/PERFORMANCE.md) on n ranks with a buffer of S bytes:

- all-reduce:      2(n−1) steps, 2(n−1)/n · S bytes through each GPU's link
- all-gather / reduce-scatter: (n−1) steps, (n−1)/n · S  (S = the full, gathered buffer)
- all-to-all:      (n−1) steps, (n−1)/n · S
- p2p:             1 step, S

t = overhead + steps·α + bytes_on_link / (bandwidth · efficiency); the steps and wire factors of
each kind come from the one table in ``simengine/collectives.py`` (shared with calibration).

Group placement follows Megatron-Core's rank order tp-cp-ep-dp-pp (parallel_state.py): a group
with stride ``stride`` and ``n`` members spans n·stride consecutive ranks; if that span fits in
one scale-up domain it uses scale-up bandwidth, otherwise the per-GPU scale-out (NIC) bandwidth.
A ring collective that crosses domains runs one ring (NCCL channel) per NIC, so a group with g
members per domain gets min(scale-up, g × scale-out) of bus bandwidth. An all-to-all that crosses
domains sends (n_in−1)/n of its data over scale-up and (n−n_in)/n over
scale-out concurrently, where n_in members share a domain; the slower part dominates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ..collectives import KINDS, alpha_steps, wire_factor
from ..config.scenario import Scenario
from ..memo import remember


@dataclass(frozen=True, slots=True)
class Tier:
    nominal_Bps: float     # per-GPU link bandwidth (bytes/s) from the datasheet
    efficiency: float      # achieved bus bandwidth / nominal for large messages
    latency_s: float       # alpha per ring step
    overhead_s: float      # fixed per-call cost

    @property
    def bandwidth_Bps(self) -> float:
        return self.nominal_Bps * self.efficiency


@dataclass(frozen=True, slots=True)
class GroupPlacement:
    size: int
    span: int          # consecutive ranks the group covers
    in_domain: int     # members inside one scale-up domain


@lru_cache(maxsize=4096)
def least_piece(d: int, size: int, groups: int) -> int:
    """The fewest members any of ``groups`` aligned groups keeps in one scale-up domain.

    Megatron's groups are aligned blocks of ``size`` members (one every ``stride`` ranks), and a
    domain holds ``d`` = domain / stride consecutive members of each: group q covers members
    [q·size, (q+1)·size). A group is cut at a domain boundary when its block crosses a multiple of
    d — tp 2 on 3-GPU nodes: ranks 2–3, 1 + 1; ep 16 on a 72-GPU NVL72 rack: ranks 64–79, 8 + 8 —
    and the cut group sets the collective's time, so its smallest piece is the members a domain
    holds. Only the groups the job has count (64 GPUs of a 72-GPU rack cut none); the offsets repeat
    every d / gcd(d, size) groups."""
    if d % size == 0:
        return size
    least = size
    for q in range(min(groups, d // math.gcd(d, size))):
        offset = q * size % d
        if offset + size <= d:
            continue   # inside one domain
        first = d - offset
        last = (size - first) % d or d
        least = min(least, first, last)
    return least


def group_placements(sc: Scenario) -> dict[str, GroupPlacement]:
    """Size, span and members-per-domain of each parallel group under Megatron's rank order."""
    st = sc.strategy
    tp, cp, dp, pp = st.tp, st.cp, sc.dp, st.pp
    etp, ep = st.etp_size, st.ep
    dom, world = sc.system.domain, sc.system.num_gpus

    def place(size: int, stride: int) -> GroupPlacement:
        span = size * stride
        if stride < dom and dom % stride == 0:
            inside = least_piece(dom // stride, size, max(1, world // span))
        else:
            inside = size if span <= dom else max(1, min(size, dom // stride)) if stride < dom else 1
        return GroupPlacement(size, span, inside)

    return {
        "tp": place(tp, 1),
        "cp": place(cp, tp),
        "dp": place(dp * cp, tp),          # Megatron's data-parallel group with CP (grads, optimizer)
        # HSDP: the shard group is the inner dp_shard·cp ranks, the replicas stride over it
        "dps": place(sc.dp_shard * cp, tp),
        "dpr": place(sc.dp_replicas, tp * cp * sc.dp_shard),
        "ep": place(ep, etp),              # expert grid: etp-ep-edp-pp
        "etp": place(etp, 1),
        "edp": place(sc.edp, etp * ep),
        "pp": place(pp, tp * cp * dp),
    }


_RING_KINDS = ("all_reduce", "all_gather", "reduce_scatter")


class CommModel:
    """Prices collectives for one scenario; measured fits (``Efficiency.collective_table``, from
    nccl-tests via calibration) replace the tier's efficiency and fixed latency per kind."""

    __slots__ = ("tiers", "places", "_cache", "fits", "mesh_links")

    def __init__(self, sc: Scenario):
        self.tiers, self.fits, self.places, self.mesh_links = _comm_parts(sc)
        self._cache: dict[tuple, float] = {}  # this model's collective times (``time``)

    def tier_of(self, group: str) -> str:
        p = self.places[group]
        return "scale_up" if p.in_domain >= p.size else "scale_out"

    def time(self, kind: str, size_bytes: float, group: str, n: int | None = None) -> float:
        """Seconds for one collective of ``size_bytes`` (the full buffer) on ``group``."""
        p = self.places[group]
        n = p.size if n is None else n
        if n <= 1 or size_bytes <= 0:
            return 0.0
        key = (kind, size_bytes, group, n)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        cross = p.in_domain < n
        tier_name = "scale_out" if cross else "scale_up"
        tier = self.tiers[(kind, tier_name)]
        sized = self.fits.get((kind, tier_name))
        if sized and len(sized) > 1:
            fit = min(sized, key=lambda f: abs((f.group_size or n) - n))
            tier = Tier(tier.nominal_Bps, fit.efficiency, fit.step_latency_us * 1e-6, fit.latency_us * 1e-6)
        bw = tier.bandwidth_Bps
        if self.mesh_links and not cross:
            # full mesh (xGMI): only the links to the other group members carry the collective
            # (SimuMax's FC8 factor (n−1)/7, peer_model_notes.md §2); p2p uses one link
            bw *= (1 if kind == "p2p" else (n - 1)) / self.mesh_links
        if kind == "p2p":
            t = tier.overhead_s + tier.latency_s + size_bytes / bw
        elif kind == "all_to_all" and cross:
            inside = p.in_domain
            up_tier = self.tiers[(kind, "scale_up")]
            t_up = (inside - 1) / n * size_bytes / up_tier.bandwidth_Bps
            t_out = (n - inside) / n * size_bytes / bw
            t = tier.overhead_s + (n - 1) * tier.latency_s + max(t_up, t_out)
        else:
            if cross:
                # NCCL runs one ring per NIC: a group with g members per domain crosses on g NICs
                # at once, up to the scale-up bandwidth (nccl-tests busbw on multi-node runs)
                up_bw = self.tiers[(kind, "scale_up")].bandwidth_Bps
                bw = min(up_bw, p.in_domain * bw)
            # steps and wire bytes of the kind's default algorithm (simengine/collectives.py)
            steps = alpha_steps(kind, n)
            lat = steps * tier.latency_s
            if cross and kind in _RING_KINDS:
                # a ring over several domains crosses the network only between domains: NCCL's
                # latency model (src/graph/tuning.cc ncclTopoTuneModel, Ring) charges
                # nInterSteps = nNodes−1 (2(nNodes−1) for all-reduce) steps at the network latency
                # and the other nsteps − nInterSteps at the intra-node (NVLink) latency
                inter = min(steps, (2.0 if kind == "all_reduce" else 1.0) * (n / p.in_domain - 1.0))
                lat = inter * tier.latency_s + (steps - inter) * self.tiers[(kind, "scale_up")].latency_s
            t = tier.overhead_s + lat + wire_factor(kind, n) * size_bytes / bw
        self._cache[key] = t
        return t


def _comm_parts(sc: Scenario) -> tuple[dict, dict, dict, int]:
    """(tiers, fits, places, mesh links) of ``CommModel``: a pure function of the system and of
    the group sizes ``group_placements`` reads (tp, cp, dp, pp, ep, etp, the ZeRO shard group),
    memoised on exactly those (``_PARTS``). Shared between models: read them, never change them."""
    st = sc.strategy
    key = (sc.system, st.tp, st.cp, sc.dp, st.pp, st.ep, st.etp_size, sc.dp_shard)
    try:
        hit = _PARTS.get(key)
    except TypeError:  # a system holding a list (unhashable): built every time
        return _build_parts(sc)
    if hit is None:
        hit = _build_parts(sc)
        remember(_PARTS, key, hit, MAX_PARTS)
    return hit


def _build_parts(sc: Scenario) -> tuple[dict, dict, dict, int]:
    sysm, e = sc.system, sc.system.efficiency
    ov = e.collective_overhead_us * 1e-6
    up = Tier(sysm.scale_up.bandwidth_gbs * 1e9, e.collective_scale_up, sysm.scale_up.latency_us * 1e-6, ov)
    out = Tier(sysm.scale_out.bandwidth_gbs * 1e9, e.collective_scale_out, sysm.scale_out.latency_us * 1e-6, ov)
    tiers: dict[tuple[str, str], Tier] = {}
    for kind in KINDS:
        for name, tier in (("scale_up", up), ("scale_out", out)):
            tiers[(kind, name)] = tier
    # measured fits, per (kind, tier) and optionally per group size (closest size wins)
    fits: dict[tuple[str, str], list] = {}
    for fit in e.collective_table:
        fits.setdefault((fit.kind, fit.tier), []).append(fit)
        base = tiers[(fit.kind, fit.tier)]
        tiers[(fit.kind, fit.tier)] = Tier(base.nominal_Bps, fit.efficiency, fit.step_latency_us * 1e-6, fit.latency_us * 1e-6)
    scale_up = sysm.scale_up
    mesh_links = scale_up.domain_size - 1 if scale_up.topology == "mesh" and scale_up.domain_size > 1 else 0
    return tiers, fits, group_placements(sc), mesh_links


# (system, tp, cp, dp, pp, ep, etp, dp_shard) -> CommModel's (tiers, fits, places, mesh links)
_PARTS: dict[tuple, tuple] = {}
MAX_PARTS = 256
