"""Collective kinds and algorithms: the one table both the cost model and calibration read.

Each :class:`Algorithm` says, for ``n`` ranks and a buffer of S bytes (S = the full buffer, as
nccl-tests' ``size`` column and ``workload.ops.Collective.size_bytes``):

* ``wire(n)``   — bytes through each rank's busiest link / S (what the link time is priced on);
* ``steps(n)``  — latency (alpha) terms paid in sequence;
* ``busbw(n)``  — nccl-tests' busbw / algbw for that collective (``doc/PERFORMANCE.md``). nccl-tests
  uses the *ring* factor whatever algorithm NCCL picked, so for NVLS/tree busbw ≠ wire bytes / time
  and can exceed the link bandwidth.

Sources (cited per entry):

  ring all_reduce        wire 2(n−1)/n, 2(n−1) steps   (reduce-scatter + all-gather; Thakur,
                         Rabenseifner & Gropp 2005 §4.5; Patarasuk & Yuan 2009)
  ring all_gather / reduce_scatter   wire (n−1)/n, n−1 steps   (Thakur et al. 2005 §3.1, §4.3)
  tree all_reduce        wire 2(n−1)/n·S in the limit (double binary tree: each rank sends and
                         receives ~S per tree, pipelined), 2·⌈log2 n⌉ steps (Sanders, Speck &
                         Träff 2009; NCCL 2.4 "double binary trees" blog)
  nvls all_reduce        wire 1 (each GPU pushes S into the NVSwitch, which reduces and multicasts
                         S back; NVIDIA NVLink SHARP, NCCL ``src/device/all_reduce.h``
                         ``runRing``/``runNvls``), 2 steps (push, pull)
  sharp all_reduce       the same in-network reduction on the scale-out switch (InfiniBand SHARP)
  pairwise all_to_all    wire (n−1)/n, n−1 steps (each rank sends S/n to each of n−1 peers;
                         Thakur et al. 2005 §3.6, pairwise exchange)
  direct p2p             wire 1, 1 step

A new algorithm is one entry in :data:`ALGORITHMS`; :data:`DEFAULT_ALGORITHM` picks the one each
kind is priced with (the ring / pairwise family, matching ``cost/comm.py`` since its first version).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class CollectiveKind(StrEnum):
    """The collectives simengine models (values are the JSON / workload spellings)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    P2P = "p2p"


KINDS: tuple[str, ...] = tuple(k.value for k in CollectiveKind)


def _ring(n: int) -> float:
    return (n - 1) / n


def _ring2(n: int) -> float:
    return 2.0 * (n - 1) / n


@dataclass(frozen=True, slots=True)
class Algorithm:
    name: str
    kind: CollectiveKind
    wire: Callable[[int], float]    # bytes on the busiest link / S
    steps: Callable[[int], float]   # alpha terms in sequence
    busbw: Callable[[int], float]   # nccl-tests busbw / algbw (doc/PERFORMANCE.md)
    in_network: bool = False        # the switch reduces (NVLS / SHARP)


_K = CollectiveKind
ALGORITHMS: dict[tuple[CollectiveKind, str], Algorithm] = {
    (a.kind, a.name): a
    for a in (
        Algorithm("ring", _K.ALL_REDUCE, _ring2, lambda n: 2.0 * (n - 1), _ring2),
        Algorithm("tree", _K.ALL_REDUCE, _ring2, lambda n: 2.0 * math.ceil(math.log2(max(n, 2))),
                  _ring2),
        Algorithm("nvls", _K.ALL_REDUCE, lambda n: 1.0, lambda n: 2.0, _ring2, in_network=True),
        Algorithm("sharp", _K.ALL_REDUCE, lambda n: 1.0, lambda n: 2.0, _ring2, in_network=True),
        Algorithm("ring", _K.ALL_GATHER, _ring, lambda n: float(n - 1), _ring),
        Algorithm("ring", _K.REDUCE_SCATTER, _ring, lambda n: float(n - 1), _ring),
        Algorithm("nvls", _K.REDUCE_SCATTER, _ring, lambda n: 1.0, _ring, in_network=True),
        Algorithm("pairwise", _K.ALL_TO_ALL, _ring, lambda n: float(n - 1), _ring),
        Algorithm("direct", _K.P2P, lambda n: 1.0, lambda n: 1.0, lambda n: 1.0),
    )
}

DEFAULT_ALGORITHM: dict[CollectiveKind, str] = {
    _K.ALL_REDUCE: "ring", _K.ALL_GATHER: "ring", _K.REDUCE_SCATTER: "ring", _K.ALL_TO_ALL: "pairwise", _K.P2P: "direct",
}


def kind_of(kind: str | CollectiveKind) -> CollectiveKind:
    """``"all_reduce"`` or ``CollectiveKind.ALL_REDUCE`` → the enum; ValueError for anything else."""
    return kind if isinstance(kind, CollectiveKind) else CollectiveKind(kind)


# each kind's default algorithm by its spelling (a StrEnum member hashes as its value, so the enum
# finds it too): the cost model's hot path skips the enum conversion
_DEFAULT_OF: dict[str, Algorithm] = {k.value: ALGORITHMS[(k, a)] for k, a in DEFAULT_ALGORITHM.items()}


def algorithm(kind: str | CollectiveKind, name: str | None = None) -> Algorithm:
    """The algorithm ``name`` of ``kind`` (its default when ``name`` is None); KeyError if unknown."""
    if not name:
        hit = _DEFAULT_OF.get(kind) if isinstance(kind, str) else None  # a CollectiveKind is a str
        if hit is not None:
            return hit
    k = kind_of(kind)
    return ALGORITHMS[(k, name or DEFAULT_ALGORITHM[k])]


def bus_factor(kind: str, n_ranks: int) -> float:
    """nccl-tests busbw / algbw for ``kind`` on ``n_ranks`` (1.0 for kinds simengine does not model:
    broadcast / reduce are pipelined chains, busbw = algbw in nccl-tests)."""
    n = max(int(n_ranks), 1)
    try:
        return algorithm(kind).busbw(n)
    except ValueError:
        return 1.0


def wire_factor(kind: str | CollectiveKind, n_ranks: int, name: str | None = None) -> float:
    """Bytes through each rank's busiest link / S for ``kind`` (algorithm ``name`` or the default)."""
    return algorithm(kind, name).wire(max(int(n_ranks), 1))


def alpha_steps(kind: str | CollectiveKind, n_ranks: int, name: str | None = None) -> float:
    """Latency terms paid in sequence for ``kind`` on ``n_ranks`` (algorithm ``name`` or the default)."""
    return algorithm(kind, name).steps(max(int(n_ranks), 1))


def ranks_from_factor(kind: str, ratio: float) -> float | None:
    """Invert the busbw factor: the (real-valued) rank count a busbw/algbw ratio implies.
    all_reduce 2(n−1)/n = r → n = 2/(2−r); the (n−1)/n kinds: n = 1/(1−r)."""
    if kind == "all_reduce" and 0.0 < ratio < 2.0:
        return 2.0 / (2.0 - ratio)
    if kind in ("all_gather", "reduce_scatter", "all_to_all") and 0.0 < ratio < 1.0:
        return 1.0 / (1.0 - ratio)
    return None
