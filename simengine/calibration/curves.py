"""Plot-ready data of a calibration: each fit beside the measured points it came from.

* GEMM: efficiency against FLOPs (2·b·m·n·k) of every measured point (evenly sampled to
  ``MAX_POINTS``), with the table's own interpolation at that point when the point is held out
  (one in five, drawn at random as ``provenance.gemm_holdout_error`` draws its own: an evenly
  spaced stride held out a grid's whole edge plane, an extrapolation shown as interpolation), so
  a reader sees how well unmeasured shapes are predicted.
* Collectives: per fitted nccl-tests table, measured busbw against message size and the alpha-beta
  line's busbw = size·factor / t_fit(size) (``fit.AlphaBetaFit.time_us``).
* Attention: efficiency against sequence length per pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..collectives import bus_factor

MAX_POINTS = 2000


def _sample(rows: Sequence, limit: int = MAX_POINTS) -> list:
    n = len(rows)
    if n <= limit:
        return list(rows)
    return [rows[round(i * (n - 1) / (limit - 1))] for i in range(limit)]


def gemm_curve(points: Sequence) -> list[dict]:
    from .table import GemmIndex

    from .provenance import holdout

    pts = _sample(points)
    held = holdout(len(pts), len(pts)) if len(pts) >= 10 else set()   # drawn as the fit error's (provenance.holdout)
    index = GemmIndex([p for i, p in enumerate(pts) if i not in held]) if held else None
    out = []
    for i, p in enumerate(pts):
        pred = index(p.m, p.n, p.k, p.b, p.dtype, p.layout) if index is not None and i in held else None
        out.append({"flops": 2.0 * p.b * p.m * p.n * p.k, "efficiency": p.efficiency, "layout": p.layout or "any",
                    "dtype": p.dtype, "shape": f"{p.m}x{p.n}x{p.k}" + (f" b{p.b}" if p.b > 1 else ""),
                    "held_out_prediction": pred})
    return out


def collective_curve(label: str, table_no: int, table, fit, tier: str, used: bool) -> list[dict]:
    factor = bus_factor(table.collective, table.n_ranks or 2)
    out = []
    for r in table.rows:
        t_fit = fit.time_us(r.size_bytes, factor)
        out.append({"source": label, "table": table_no, "kind": table.collective, "tier": tier, "ranks": table.n_ranks,
                    "size_bytes": r.size_bytes, "busbw_gbs": r.busbw_gbs, "used": used,
                    "fit_busbw_gbs": r.size_bytes * factor / (t_fit * 1e3) if t_fit > 0 else None})
    return out


def attention_curve(points: Sequence) -> list[dict]:
    return [{"phase": p.phase, "seq_len": p.seq_len, "efficiency": p.efficiency, "heads": p.heads, "batch": p.batch}
            for p in _sample(points)]
