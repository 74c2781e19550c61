"""Flash-attention sweep CSV (what ``python -m simengine.measure attention`` writes):

``phase,batch,seq_len,heads,kv_heads,d_qk,d_v,causal`` and one value column: ``efficiency``
(``efficiency_pct``), ``tflops`` or a time (``time_us`` / ``time_ms`` / ``time_ns`` / ``time_s``).
``#`` lines are comments (the kit's header with GPU, clocks and torch version).

FLOPs follow simengine's Attention op (workload/ops.py): fwd = 2·b·h·s²·(d_qk+d_v)·f with
f = (s+1)/(2s) when causal (FlashAttention-2, Dao 2023 §3.1), bwd = 2.5 × fwd (Dao 2023 §3.2); so an
``efficiency`` column must already be on those causal FLOPs, and a time is turned into one with them.
"""

from __future__ import annotations

import os

from ...config.system import AttentionPoint
from ...errors import ConfigError
from ..csvutil import Issues, cell, norm_header, pos_float, pos_int, read_rows
from ..peaks import MAX_EFFICIENCY, MIN_EFFICIENCY, VALUE_COLUMNS, efficiency_from
from ..source import read_text

FIELD = "attention_csv"
_INTS = ("batch", "seq_len", "heads", "kv_heads", "d_qk", "d_v")
_LIMITS = {"batch": 2**20, "seq_len": 2**27, "heads": 2**16, "kv_heads": 2**16, "d_qk": 2**16, "d_v": 2**16}
_ALIASES = {"b": "batch", "s": "seq_len", "seq": "seq_len", "num_heads": "heads", "head_num": "heads",
            "kv_head_num": "kv_heads", "num_kv_heads": "kv_heads", "head_dim": "d_qk", "qk_head_dim": "d_qk",
            "v_head_dim": "d_v", "pass": "phase"}
_TRUE = {"1", "true", "yes", "causal"}


def attention_flops(phase: str, batch: int, seq_len: int, heads: int, d_qk: int, d_v: int, causal: bool) -> float:
    """simengine's flash-attention FLOPs (module docstring; workload/ops.py ``Attention.flops``)."""
    frac = (seq_len + 1) / (2.0 * seq_len) if causal else 1.0
    fwd = 2.0 * batch * heads * seq_len * seq_len * (d_qk + d_v) * frac
    return fwd if phase == "fwd" else 2.5 * fwd


def read_attention_csv(source: str | bytes | os.PathLike, *, peak_tflops: float | None = None) -> tuple[AttentionPoint, ...]:
    """Rows → AttentionPoints (bf16 peak ``peak_tflops`` turns times / TFLOP/s into efficiencies)."""
    text, _ = read_text(source, FIELD)
    header, rows = read_rows(text, FIELD, "phase,batch,seq_len,heads,kv_heads,d_qk,d_v,causal,time_us")
    idx: dict[str, int] = {}
    for i, h in enumerate(header):
        n = norm_header(h)
        idx.setdefault(_ALIASES.get(n, n), i)
    value = next(((n, VALUE_COLUMNS[n]) for n in VALUE_COLUMNS if n in idx), None)
    missing = [c for c in ("phase", "seq_len", "heads") if c not in idx]
    if missing or value is None:
        need = missing + ([] if value else ["efficiency | tflops | time_us"])
        raise ConfigError([(FIELD, f"missing column {', '.join(need)} (header: {', '.join(header)[:200]})")])
    if not rows:
        raise ConfigError([(FIELD, "no data rows")])
    issues = Issues(FIELD)
    out: list[AttentionPoint] = []
    vname, (vkind, vscale) = value
    for line, cells in rows:
        phase = cell(cells, idx["phase"]).lower()
        if phase not in ("fwd", "bwd"):
            issues.add(line, "phase", f"{phase[:20]!r} is not fwd or bwd")
            continue
        vals = {c: pos_int(cell(cells, idx.get(c)), line, c, issues, default=_default(c, idx, cells)) for c in _INTS}
        raw = pos_float(cell(cells, idx[vname]), line, vname, issues)
        if None in vals.values() or raw is None:
            continue
        if any(vals[c] > _LIMITS[c] for c in _INTS):  # type: ignore[operator]
            issues.add(line, "", "a size is beyond the accepted range (seq_len ≤ 2^27, heads ≤ 2^16)")
            continue
        causal = cell(cells, idx.get("causal")).lower() in _TRUE if "causal" in idx else True
        flops = attention_flops(phase, vals["batch"], vals["seq_len"], vals["heads"], vals["d_qk"], vals["d_v"], causal)  # type: ignore[arg-type]
        eff = efficiency_from(vkind, raw * vscale, flops, peak_tflops)
        if eff is None:
            issues.add(line, vname, f"'{vname}' needs the GPU's bf16 peak TFLOP/s")
            continue
        if not MIN_EFFICIENCY <= eff <= MAX_EFFICIENCY:
            issues.add(line, vname, f"efficiency {eff:.4g} is outside [{MIN_EFFICIENCY:g}, {MAX_EFFICIENCY:g}]")
            continue
        out.append(AttentionPoint(phase=phase, batch=vals["batch"], seq_len=vals["seq_len"], heads=vals["heads"],  # type: ignore[arg-type]
                                  kv_heads=vals["kv_heads"], d_qk=vals["d_qk"], d_v=vals["d_v"], efficiency=eff))  # type: ignore[arg-type]
    issues.raise_if_any()
    return tuple(out)


def _default(col: str, idx: dict[str, int], cells: list[str]) -> int | None:
    if col == "batch":
        return 1
    if col == "kv_heads":
        return int(cell(cells, idx["heads"])) if cell(cells, idx["heads"]).isdigit() else None
    if col == "d_v" and "d_qk" in idx and cell(cells, idx["d_qk"]).isdigit():
        return int(cell(cells, idx["d_qk"]))
    return 128 if col in ("d_qk", "d_v") else None
