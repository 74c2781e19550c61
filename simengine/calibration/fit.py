"""Alpha-beta fit of nccl-tests results, and the network tier a measured group ran on.

Model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005, §2), per call of one collective:

    time_us = alpha_us + bytes_on_wire / busbw          bytes_on_wire = size_bytes · factor(kind, n)

with the ring bus factor of :mod:`.collectives` (AR 2(n−1)/n, AG/RS/A2A (n−1)/n, p2p 1). The
fitted ``busbw`` is thus directly comparable to nccl-tests' busbw column (``doc/PERFORMANCE.md``)
and to a per-GPU link bandwidth; ``efficiency = busbw / tier bandwidth``.

Fit: least squares on the *relative* residual (t_i − alpha − beta·x_i)/t_i so that a 16 GiB
point does not drown a 1 MiB one, over sizes ≥ 1 MiB (below that NCCL switches protocol, LL/LL128,
and latency is not a constant); made robust by iteratively reweighted least squares with Huber
weights (Huber 1964; c = 1.345 × the MAD scale), alpha constrained ≥ 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config.system import CollectivePoint, SystemSpec
from ..errors import ConfigError
from .collectives import KINDS, bus_factor
from .formats.nccl_tests import NcclTable

MIN_FIT_BYTES = 1 << 20
TIME_RANGE_US = (1e-6, 1e12)   # a picosecond to 11.6 days: a copy's or a collective's time
Tier = Literal["scale_up", "scale_out"]


@dataclass(frozen=True, slots=True)
class AlphaBetaFit:
    """``time_us ≈ alpha_us + size·factor / (busbw_gbs·1e3)``; residuals are relative."""

    alpha_us: float
    busbw_gbs: float
    n_points: int
    rel_rms: float          # RMS of (fit − measured)/measured over the points used
    rel_max: float
    min_bytes: int
    max_bytes: int
    note: str = ""

    def quality_warning(self, max_measured_busbw_gbs: float | None = None) -> str:
        """Non-empty when the straight line describes the curve poorly (bandwidth steps with size)."""
        if self.rel_rms > 0.10:
            return f"alpha-beta fit is poor (RMS relative error {self.rel_rms:.0%}): time is not linear in size"
        if max_measured_busbw_gbs and self.busbw_gbs > 1.05 * max_measured_busbw_gbs:
            return (f"fitted busbw {self.busbw_gbs:.1f} GB/s exceeds every measured busbw "
                    f"(max {max_measured_busbw_gbs:.1f}); alpha {self.alpha_us:.0f} µs absorbs a non-linear curve")
        return ""

    def time_us(self, size_bytes: float, factor: float) -> float:
        return self.alpha_us + size_bytes * factor / (self.busbw_gbs * 1e3)


def fit_alpha_beta(
    sizes_bytes: Sequence[float],
    times_us: Sequence[float],
    factor: float,
    *,
    min_bytes: int = MIN_FIT_BYTES,
    iterations: int = 20,
) -> AlphaBetaFit:
    """Robust relative-error fit of ``time = alpha + size·factor/busbw`` (see module docstring).

    Uses the sizes ≥ ``min_bytes``; when fewer than two are, the largest sizes available. With a
    single size, alpha is not identifiable: it is set to 0 and ``note`` says so.
    """
    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    ok = np.isfinite(s) & np.isfinite(t) & (s > 0) & (t > 0)
    s, t = s[ok], t[ok]
    if s.size == 0 or not factor > 0:
        raise ConfigError([("nccl_log", "no positive (size, time) pairs to fit")])
    _check_times(t)
    use = s >= min_bytes
    note = ""
    if use.sum() < 2:
        use = s >= np.sort(s)[-min(2, s.size)]
        if s.size > 1:
            note = f"fewer than two sizes ≥ {min_bytes} B: fitted the largest sizes"
    x, y = s[use] * factor, t[use]
    if x.size == 1 or np.ptp(x) == 0:
        beta = float(np.mean(y / x))
        return _result(0.0, beta, x, y, "single message size: latency not identifiable, set to 0")
    h = np.ones_like(x)
    alpha = beta = 0.0
    for _ in range(iterations):
        alpha, beta = _weighted_line(x, y, h)
        r = (y - alpha - beta * x) / y
        mad = float(np.median(np.abs(r - np.median(r)))) * 1.4826
        if mad < 1e-12:
            break
        c = 1.345 * mad
        h_new = np.where(np.abs(r) <= c, 1.0, c / np.maximum(np.abs(r), 1e-300))
        if np.allclose(h_new, h, rtol=0, atol=1e-9):
            break
        h = h_new
    if not beta > 0:
        raise ConfigError([("nccl_log", "time does not grow with message size; cannot fit a bandwidth")])
    return _result(alpha, beta, x, y, note, s[use])


def _check_times(t: np.ndarray) -> None:
    """ConfigError for a time outside ``TIME_RANGE_US``: no measurement, and its square (the fit's
    weights are 1/time²) under- or overflows (1e-300 µs printed numpy's divide-by-zero warnings)."""
    lo, hi = TIME_RANGE_US
    bad = t[(t < lo) | (t > hi)]
    if bad.size:
        raise ConfigError([("nccl_log", f"a time of {bad[0]:.3g} µs is no measurement (expected {lo:g} to {hi:g} µs)")])


def _weighted_line(x: np.ndarray, y: np.ndarray, h: np.ndarray) -> tuple[float, float]:
    """Minimise Σ h·((y − a − b·x)/y)² with a ≥ 0 (closed form 2×2 normal equations)."""
    w = h / (y * y)
    sw, sx, sy = w.sum(), (w * x).sum(), (w * y).sum()
    sxx, sxy = (w * x * x).sum(), (w * x * y).sum()
    det = sw * sxx - sx * sx
    if det > 0:
        b = (sw * sxy - sx * sy) / det
        a = (sy - b * sx) / sw
        if a >= 0:
            return float(a), float(b)
    return 0.0, float(sxy / sxx)


def _result(alpha: float, beta: float, x: np.ndarray, y: np.ndarray, note: str, sizes=None) -> AlphaBetaFit:
    pred = alpha + beta * x
    rel = (pred - y) / y
    sizes = x if sizes is None else sizes
    return AlphaBetaFit(
        alpha_us=float(alpha),
        busbw_gbs=float(1e-3 / beta),  # β in µs/B → B/µs = 1e6 B/s → GB/s = 1e-3/β
        n_points=int(x.size),
        rel_rms=float(np.sqrt(np.mean(rel * rel))),
        rel_max=float(np.max(np.abs(rel))),
        min_bytes=int(np.min(sizes)),
        max_bytes=int(np.max(sizes)),
        note=note,
    )


def fit_table(table: NcclTable, *, min_bytes: int = MIN_FIT_BYTES) -> AlphaBetaFit:
    """Fit one parsed nccl-tests table (out-of-place times)."""
    if not table.supported:
        raise ConfigError([("nccl_log", f"{table.collective} is not a collective simengine models ({', '.join(KINDS)})")])
    if table.n_ranks is None and table.collective != "p2p":
        raise ConfigError([("nccl_log", f"rank count of the {table.collective} table is unknown; pass n_ranks=")])
    factor = bus_factor(table.collective, table.n_ranks or 2)
    if factor <= 0:
        raise ConfigError([("nccl_log", f"{table.collective} on {table.n_ranks} rank moves no data; nothing to fit")])
    return fit_alpha_beta([r.size_bytes for r in table.rows], [r.time_us for r in table.rows], factor, min_bytes=min_bytes)


def tier_for(n_ranks: int, system: SystemSpec, n_hosts: int | None = None) -> Tier:
    """The network tier a group of ``n_ranks`` (spread over ``n_hosts`` hosts, if known) runs on.

    Megatron-Core rank order packs a group into as few scale-up domains as possible (DESIGN.md),
    so a group of at most ``system.domain`` GPUs is scale-up — unless the log shows it spanned
    several hosts while the scale-up domain is one host (NVL8 servers), then it is scale-out.
    """
    if n_ranks > system.domain:
        return "scale_out"
    if n_hosts is not None and n_hosts > 1 and system.scale_up.domain_size <= system.gpus_per_node:
        return "scale_out"
    return "scale_up"


def tier_bandwidth_gbs(system: SystemSpec, tier: Tier, ranks_per_domain: int = 1) -> float:
    """Nominal per-GPU bus bandwidth of a group on ``tier``. Across domains NCCL runs one ring
    (channel) per NIC, so a group with g members per domain crosses the boundary on g NICs at once:
    min(scale-up, g × scale-out) — the same mechanism cost/comm.py prices with."""
    if tier == "scale_up":
        return system.scale_up.bandwidth_gbs
    g = max(1, ranks_per_domain)
    return min(system.scale_up.bandwidth_gbs, g * system.scale_out.bandwidth_gbs)


MAX_EFFICIENCY = 2.0  # CollectivePoint.efficiency upper bound (simengine/config/system.py)


def collective_point(kind: str, tier: Tier, fit: AlphaBetaFit, tier_bw_gbs: float,
                     group_size: int | None = None) -> tuple[CollectivePoint | None, str]:
    """``CollectivePoint(efficiency = busbw / tier bandwidth, latency_us = alpha)`` and a warning
    (empty if none); ``None`` when the efficiency is below the schema's 1e-4. Efficiency is clipped to the schema's (0, 2] — a multi-node all_reduce whose
    busbw exceeds twice the per-GPU NIC bandwidth (NVLS/tree) is reported, not silently lost."""
    eff = fit.busbw_gbs / tier_bw_gbs
    warn = ""
    if eff > MAX_EFFICIENCY:
        warn = (f"{kind} on {tier}: busbw {fit.busbw_gbs:.1f} GB/s is {eff:.2f}× the tier bandwidth "
                f"{tier_bw_gbs:g} GB/s; clipped to {MAX_EFFICIENCY} (CollectivePoint.efficiency ≤ 2)")
        eff = MAX_EFFICIENCY
    if not eff >= 1e-4:  # CollectivePoint.efficiency ≥ 1e-4: a log this slow measured something else
        return None, warn
    latency = min(max(fit.alpha_us, 0.0), 1e6)
    size = group_size if group_size and group_size >= 2 else None
    return CollectivePoint(kind=kind, tier=tier, efficiency=eff, latency_us=latency, group_size=size), warn  # type: ignore[arg-type]
