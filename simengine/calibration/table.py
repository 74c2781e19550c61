"""GEMM efficiency lookup in a measured table: exact match, else interpolation in log-shape space.

``gemm_efficiency(points, m, n, k, b, dtype, layout)``:

1. Exact: a point with the same (m, n, k, b, dtype) and layout — when the query and the point
   both name a layout they must agree; a point without layout matches any query, and a query
   without layout averages every layout measured at that shape.
2. Otherwise inverse-distance weighting (Shepard 1968) over the ``NEIGHBOURS`` nearest points of
   the same dtype, in (log2 m, log2 n, log2 k, log2 b) — GEMM efficiency varies with the
   *ratio* of sizes (tile quantisation, wave count), so log space makes 256→512 as far as
   4096→8192. Weights 1/d^``POWER``. The points that match the query's layout (that layout, or
   no layout) are used when the table has any, else all layouts of the dtype.
3. Outside the table's range, each coordinate is first clamped to the range the table covers
   (per dimension), so the nearest edge points decide: efficiency saturates for shapes larger
   than any measured, and shapes smaller than any measured get the smallest measured shapes'
   efficiency — an over-estimate for tiny GEMMs, which the cost model's memory roofline and
   per-kernel overhead bound anyway.

``None`` when the table has no point of that dtype (the caller then uses its default curve).
``NEIGHBOURS`` = 8 and ``POWER`` = 3 minimise the leave-one-out error on the two real tables in
../shared/validation (B200 SimuMax, 432 shapes: mean |error| 0.043 on a mean efficiency of 0.49;
OpenXLA H100 grid, 750 points: 0.027), though any 6–12 neighbours and power 1–4 is within 5 % of it.

Speed: an index (numpy arrays per dtype × layout) is built once per points tuple and cached by
identity (the cache holds the tuple, so its id cannot be reused while cached); every answer is
memoised per (m, n, k, b, dtype, layout). Warm lookups cost about a microsecond.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ..config.system import GemmPoint
from .formats.simumax_op_table import attention_efficiency_from_b200, causal_fraction, grouped_gemm_efficiency, grouped_gemm_mean

__all__ = [
    "GemmIndex", "gemm_efficiency", "gemm_index", "attention_efficiency_from_b200", "causal_fraction",
    "grouped_gemm_mean", "grouped_gemm_efficiency",
]

NEIGHBOURS = 8
POWER = 3.0
_CACHE_SIZE = 16
_MEMO_MAX = 200_000


class _Group:
    """Points of one dtype (and one layout subset): coordinates, values, per-dimension range."""

    __slots__ = ("coords", "eff", "lo", "hi")

    def __init__(self, coords: np.ndarray, eff: np.ndarray):
        self.coords = coords
        self.eff = eff
        self.lo = coords.min(axis=0)
        self.hi = coords.max(axis=0)

    def interpolate(self, q: np.ndarray, neighbours: int, power: float) -> float:
        q = np.minimum(np.maximum(q, self.lo), self.hi)
        d2 = ((self.coords - q) ** 2).sum(axis=1)
        k = min(neighbours, d2.size)
        near = np.argpartition(d2, k - 1)[:k] if k < d2.size else np.arange(d2.size)
        dn = d2[near]
        zero = dn < 1e-18
        if zero.any():
            return float(self.eff[near][zero].mean())
        w = dn ** (-power / 2.0)
        return float((w * self.eff[near]).sum() / w.sum())


class GemmIndex:
    """Lookup structure over one tuple of GemmPoints (build once, query many times)."""

    def __init__(self, points: Sequence[GemmPoint], neighbours: int = NEIGHBOURS, power: float = POWER):
        self.neighbours = neighbours
        self.power = power
        exact: dict[tuple, list[float]] = {}
        by: dict[tuple[str, str | None], list[GemmPoint]] = {}
        for p in points:
            exact.setdefault((p.m, p.n, p.k, p.b, p.dtype, p.layout), []).append(p.efficiency)
            exact.setdefault((p.m, p.n, p.k, p.b, p.dtype, "*"), []).append(p.efficiency)
            by.setdefault((p.dtype, p.layout), []).append(p)
        self._exact = {key: sum(v) / len(v) for key, v in exact.items()}
        self._groups: dict[tuple[str, str | None], _Group] = {}
        dtypes = {d for d, _ in by}
        for d in dtypes:
            all_pts = [p for (dd, _), ps in by.items() if dd == d for p in ps]
            self._groups[(d, "*")] = _group(all_pts)
            for lay in ("TN", "NN", "NT"):
                subset = by.get((d, lay), []) + by.get((d, None), [])
                if subset:
                    self._groups[(d, lay)] = _group(subset)
        self._memo: dict[tuple, float | None] = {}

    def __call__(self, m: int, n: int, k: int, b: int = 1, dtype: str = "bf16", layout: str | None = None) -> float | None:
        key = (m, n, k, b, dtype, layout)
        try:
            return self._memo[key]
        except KeyError:
            pass
        value = self._lookup(m, n, k, b, dtype, layout)
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[key] = value
        return value

    def source(self, m: int, n: int, k: int, b: int = 1, dtype: str = "bf16", layout: str | None = None) -> str:
        """How a query is answered: ``measured`` (exact point), ``interpolated`` (inside the range the
        table covers in every dimension), ``extrapolated`` (clamped to the edge) or ``default`` (no
        point of that dtype: the caller's curve)."""
        ex = self._exact
        keys = [(m, n, k, b, dtype, "*")] if layout is None else [(m, n, k, b, dtype, layout), (m, n, k, b, dtype, None)]
        if any(key in ex for key in keys):
            return "measured"
        group = (self._groups.get((dtype, layout)) if layout is not None else None) or self._groups.get((dtype, "*"))
        if group is None:
            return "default"
        q = np.array([_log2(m), _log2(n), _log2(k), _log2(b)])
        return "interpolated" if bool(np.all(q >= group.lo) and np.all(q <= group.hi)) else "extrapolated"

    def _lookup(self, m, n, k, b, dtype, layout) -> float | None:
        ex = self._exact
        if layout is None:
            hit = ex.get((m, n, k, b, dtype, "*"))
        else:
            hit = ex.get((m, n, k, b, dtype, layout))
            if hit is None:
                hit = ex.get((m, n, k, b, dtype, None))
        if hit is not None:
            return hit
        group = self._groups.get((dtype, layout)) if layout is not None else None
        if group is None:
            group = self._groups.get((dtype, "*"))
        if group is None:
            return None
        q = np.array([_log2(m), _log2(n), _log2(k), _log2(b)])
        return group.interpolate(q, self.neighbours, self.power)


def _log2(v: float) -> float:
    return math.log2(max(float(v), 1.0))


def _group(points: list[GemmPoint]) -> _Group:
    raw = np.array([(p.m, p.n, p.k, p.b) for p in points], dtype=float).reshape(-1, 4)
    coords = np.log2(np.maximum(raw, 1.0))  # same as _log2 per coordinate, vectorised
    eff = np.array([p.efficiency for p in points], dtype=float)
    return _Group(coords, eff)


_cache: OrderedDict[int, tuple[Sequence[GemmPoint], GemmIndex]] = OrderedDict()
_lock = threading.Lock()


def gemm_index(points: Sequence[GemmPoint]) -> GemmIndex:
    """The cached index of ``points`` (keyed by identity; the cache keeps ``points`` alive).

    Only tuples (immutable, as ``Efficiency.gemm_table``) are cached; any other sequence gets a
    fresh index (about 2 ms for 500 points) since it could change under the cache."""
    if not isinstance(points, tuple):
        return GemmIndex(points)
    key = id(points)
    hit = _cache.get(key)
    if hit is not None and hit[0] is points:
        return hit[1]
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is points:
            return hit[1]
        index = GemmIndex(points)
        _cache[key] = (points, index)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return index


def gemm_efficiency(
    points: Sequence[GemmPoint], m: int, n: int, k: int, b: int = 1, dtype: str = "bf16", layout: str | None = None,
) -> float | None:
    """Measured (exact or interpolated) efficiency of an m×n×k GEMM (batch b); see module doc."""
    if not points:
        return None
    return gemm_index(points)(m, n, k, b, dtype, layout)
