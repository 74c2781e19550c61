"""Grouped (MoE expert) GEMM sweep CSV (what ``python -m simengine.measure grouped-gemm`` writes):

``groups,m,n,k`` [``layout`` TN|NN|NT] [``dtype``] and one value column: ``efficiency``
(``efficiency_pct``), ``tflops`` or a time (``time_us`` / ``time_ms`` / ``time_ns`` / ``time_s``).
FLOPs = 2·groups·m·n·k (workload/ops.py ``GroupedGemm.flops``; one multiply-add = 2 FLOPs).
Rows are keyed by the forward shape (m tokens per expert, k in, n out) as SimuMax keys them.
"""

from __future__ import annotations

import os
from typing import Literal

from ...config.system import GroupedGemmPoint
from ...errors import ConfigError
from ..csvutil import Issues, cell, norm_header, pos_float, pos_int, read_rows
from ..peaks import MAX_EFFICIENCY, MIN_EFFICIENCY, VALUE_COLUMNS, efficiency_from, normalize_dtype
from ..source import read_text

FIELD = "grouped_gemm_csv"
_ALIASES = {"ng": "groups", "num_groups": "groups", "experts": "groups", "num_experts": "groups", "g": "groups"}
_LIMIT = 2**31
_LAYOUTS: dict[str, Literal["TN", "NN", "NT"]] = {"TN": "TN", "NN": "NN", "NT": "NT"}


def read_grouped_gemm_csv(source: str | bytes | os.PathLike, *, peak_tflops: float | None = None,
                          dtypes: tuple[str, ...] | None = ("bf16",)) -> tuple[GroupedGemmPoint, ...]:
    """Rows → GroupedGemmPoints (rows of ``dtypes`` only, None = all; ``peak_tflops`` turns times /
    TFLOP/s into efficiencies). ``GroupedGemmPoint`` carries no dtype: the engine reads it as bf16."""
    text, _ = read_text(source, FIELD)
    header, rows = read_rows(text, FIELD, "groups,m,n,k,efficiency")
    idx: dict[str, int] = {}
    for i, h in enumerate(header):
        col = norm_header(h)
        idx.setdefault(_ALIASES.get(col, col), i)
    value = next(((n, VALUE_COLUMNS[n]) for n in VALUE_COLUMNS if n in idx), None)
    missing = [c for c in ("groups", "m", "n", "k") if c not in idx]
    if missing or value is None:
        need = missing + ([] if value else ["efficiency | tflops | time_us"])
        raise ConfigError([(FIELD, f"missing column {', '.join(need)} (header: {', '.join(header)[:200]})")])
    if not rows:
        raise ConfigError([(FIELD, "no data rows")])
    issues = Issues(FIELD)
    out: list[GroupedGemmPoint] = []
    vname, (vkind, vscale) = value
    for line, cells in rows:
        g, m, n, k = (pos_int(cell(cells, idx[c]), line, c, issues) for c in ("groups", "m", "n", "k"))
        raw = pos_float(cell(cells, idx[vname]), line, vname, issues)
        layout = _LAYOUTS.get(cell(cells, idx.get("layout")).upper() or "TN")
        dtype = normalize_dtype(cell(cells, idx.get("dtype")) or "bf16")
        if g is None or m is None or n is None or k is None or raw is None:
            continue
        if layout is None or dtype is None:
            issues.add(line, "layout" if layout is None else "dtype",
                       "layout must be TN, NN or NT and dtype bf16, fp8 or fp32")
            continue
        if dtypes is not None and dtype not in dtypes:
            continue
        if max(m, n, k) > _LIMIT or g > 2**20:
            issues.add(line, "", "m, n, k must be ≤ 2^31 and groups ≤ 2^20")
            continue
        eff = efficiency_from(vkind, raw * vscale, 2.0 * g * m * n * k, peak_tflops)
        if eff is None:
            issues.add(line, vname, f"'{vname}' needs the GPU's bf16 peak TFLOP/s")
            continue
        if not MIN_EFFICIENCY <= eff <= MAX_EFFICIENCY:
            issues.add(line, vname, f"efficiency {eff:.4g} is outside [{MIN_EFFICIENCY:g}, {MAX_EFFICIENCY:g}]")
            continue
        out.append(GroupedGemmPoint(layout=layout, groups=g, m=m, n=n, k=k, efficiency=eff))
    issues.raise_if_any()
    return tuple(out)
