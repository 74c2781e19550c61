"""SimuMax's flattened operator-efficiency table (e.g. ``b200_op_efficiency.csv``) and its helpers.

One row per measured key of SimuMax ``configs/system/b200_bf16_ceperm.json`` (Apache-2.0,
© Moore Threads; layout in ../shared/validation/peer_model_notes.md §1, §9, §10):

* ``op_shape`` rows: ``matmul`` (``k_b,k_m,k_n,k_k,k_layout,k_accumulate,k_out_dtype``),
  ``group_matmul`` (``k_ng,k_M,k_N,k_K,k_stage``…), ``sdp_fwd`` / ``sdp_bwd`` (``k_batch,
  k_seq_len,k_head_num,k_kv_head_num,k_qk_head_dim,k_v_head_dim,k_qkv_contiguous``);
  ``efficiency`` = achieved / ``peak_tflops``.
* ``op_default`` rows: SimuMax's fallback per op (the mean of its measured shapes; 0 = none).
* ``mem_bw`` rows: ``gbps`` × ``efficiency`` and a per-kernel ``latency_us``. SimuMax applies
  "GB/s" as GiB/s (×2^30, peer notes, preamble), so achieved bytes/s = gbps·2^30·efficiency.

Attention FLOP conventions (the one conversion that matters here):
  file (SimuMax / ``test_fa_efficiency.py``):  base = b·h·s²·(d_qk+d_v), fwd = 2·base, bwd = 5·base,
      no causal discount, although the kernels ran causal — which is why efficiencies reach 1.2
      (2,700 "TFLOP/s" on a 2,250 TFLOP/s GPU) at 32k.
  simengine (workload/ops.py ``Attention``): fwd = 2·b·h·s_q·s_kv·(d_qk+d_v)·(s+1)/(2s) for
      causal attention (the s(s+1)/2 unmasked pairs of s²; FlashAttention-2, Dao 2023 §3.1),
      bwd = 2.5 × fwd (Dao 2023 §3.2).
  Both count bwd as 2.5 × fwd, so for fwd and bwd alike
      efficiency_simengine = efficiency_file × (s+1)/(2s)        (causal)
      efficiency_simengine = efficiency_file                     (non-causal use)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Literal

from ...config.system import GemmPoint
from ...errors import ConfigError
from ..csvutil import Issues, cell, norm_header, pos_float, pos_int, read_rows
from ..peaks import peak_map
from ..source import read_text

FIELD = "gemm_csv"
GIB_PER_GB = 2**30 / 1e9  # SimuMax's "GB/s" are GiB/s


@dataclass(frozen=True, slots=True)
class GroupedGemmRow:
    ng: int            # local experts (GEMMs in the group)
    m: int             # tokens per expert
    n: int
    k: int
    stage: str         # fwd | bwd_grad_act | bwd_grad_w
    dtype: str
    efficiency: float  # achieved / peak of dtype

    @property
    def flops(self) -> float:
        return 2.0 * self.ng * self.m * self.n * self.k


@dataclass(frozen=True, slots=True)
class AttentionRow:
    """One measured flash-attention shape; ``efficiency`` in the file's no-causal convention."""

    phase: Literal["fwd", "bwd"]
    batch: int
    seq_len: int
    head_num: int
    kv_head_num: int
    qk_head_dim: int
    v_head_dim: int
    qkv_contiguous: bool
    efficiency: float

    @property
    def file_flops(self) -> float:
        base = self.batch * self.head_num * self.seq_len**2 * (self.qk_head_dim + self.v_head_dim)
        return (2.0 if self.phase == "fwd" else 5.0) * base

    def simengine_efficiency(self, causal: bool = True) -> float:
        return self.efficiency * causal_fraction(self.seq_len) if causal else self.efficiency


@dataclass(frozen=True, slots=True)
class MemBw:
    name: str
    gbps: float         # as SimuMax writes it (applied as GiB/s)
    efficiency: float
    latency_us: float

    @property
    def achieved_gbs(self) -> float:
        """Achieved bandwidth in GB/s (10^9 B/s)."""
        return self.gbps * GIB_PER_GB * self.efficiency


@dataclass(frozen=True)
class B200Tables:
    matmul: tuple[GemmPoint, ...]
    grouped: tuple[GroupedGemmRow, ...]
    attention: tuple[AttentionRow, ...]
    defaults: dict[str, float]
    mem_bw: dict[str, MemBw]
    peak_tflops: float | None
    notes: tuple[str, ...] = ()
    matmul_rows: int = 0   # op_shape matmul rows in the file (before merging duplicates)


def causal_fraction(seq_len: int) -> float:
    """Unmasked fraction of the s² query-key pairs under a causal mask: s(s+1)/2 / s²."""
    s = max(int(seq_len), 1)
    return (s + 1) / (2.0 * s)


def read_b200_op_efficiency(
    source: str | bytes | os.PathLike,
    *,
    peak_tflops: float | dict[str, float] | None = None,
    wgrad_out_dtype: str | None = "fp32",
) -> B200Tables:
    """Read the whole file. With ``peak_tflops`` (the target system's peaks) every efficiency is
    re-expressed against it (same achieved TFLOP/s); without, the file's own peak is kept."""
    text, _ = read_text(source, FIELD)
    header, rows = read_rows(text, FIELD)
    return read_simumax_rows(header, rows, peaks=peak_map(peak_tflops), wgrad_out_dtype=wgrad_out_dtype)


read_simumax_op_table = read_b200_op_efficiency  # the format's name; the old one stays for callers

_BOOL = {"true": True, "false": False, "1": True, "0": False}


def _grouped_row(cells, get, line: int, issues: Issues, dtype: str, eff: float) -> GroupedGemmRow | None:
    dims = _all_parsed([pos_int(get(cells, c), line, c, issues) for c in ("k_ng", "k_M", "k_N", "k_K")])
    if dims is None:
        return None
    ng, gm, gn, gk = dims
    return GroupedGemmRow(ng, gm, gn, gk, stage=get(cells, "k_stage") or "fwd", dtype=dtype, efficiency=eff)


def _attention_row(cells, get, line: int, issues: Issues, op: str, eff: float) -> AttentionRow | None:
    cols = ("k_batch", "k_seq_len", "k_head_num", "k_kv_head_num", "k_qk_head_dim", "k_v_head_dim")
    shape = _all_parsed([pos_int(get(cells, c), line, c, issues) for c in cols])
    if shape is None:
        return None
    contiguous = _BOOL.get(get(cells, "k_qkv_contiguous").lower(), True)
    batch, seq_len, heads, kv_heads, qk_dim, v_dim = shape
    phase: Literal["fwd", "bwd"] = "fwd" if op == "sdp_fwd" else "bwd"
    return AttentionRow(phase, batch, seq_len, heads, kv_heads, qk_dim, v_dim, qkv_contiguous=contiguous, efficiency=eff)


def read_simumax_rows(header: list[str], rows, *, peaks: dict[str, float], wgrad_out_dtype: str | None = "fp32") -> B200Tables:
    idx: dict[str, int] = {}
    for i, h in enumerate(header):
        idx.setdefault(h.strip(), i)          # exact names first: k_m and k_M are different columns
    for i, h in enumerate(header):
        idx.setdefault(norm_header(h), i)
    for need in ("table", "op", "efficiency"):
        if need not in idx:
            raise ConfigError([(FIELD, f"SimuMax operator table: missing column '{need}'")])
    issues = Issues(FIELD)

    def get(cells: list[str], name: str) -> str:
        return cell(cells, idx.get(name))

    mm: dict[tuple, list[tuple[str, float]]] = {}
    grouped: list[GroupedGemmRow] = []
    attention: list[AttentionRow] = []
    defaults: dict[str, float] = {}
    mem_bw: dict[str, MemBw] = {}
    file_peak: float | None = None
    for line, cells in rows:
        table, op = get(cells, "table"), get(cells, "op")
        if table == "mem_bw":
            g = pos_float(get(cells, "gbps"), line, "gbps", issues)
            e = pos_float(get(cells, "efficiency"), line, "efficiency", issues)
            lat = pos_float(get(cells, "latency_us") or "0", line, "latency_us", issues, allow_zero=True)
            if g is not None and e is not None and lat is not None:
                mem_bw[op] = MemBw(op, g, e, lat)
            continue
        eff = pos_float(get(cells, "efficiency"), line, "efficiency", issues, allow_zero=(table == "op_default"))
        raw_peak = get(cells, "peak_tflops")
        row_peak = pos_float(raw_peak, line, "peak_tflops", issues) if raw_peak else None
        if eff is None or (raw_peak and row_peak is None):
            continue
        if row_peak:
            file_peak = file_peak or row_peak
        dtype = "fp8" if op.startswith("fp8") else "bf16"
        scale = row_peak / peaks[dtype] if row_peak and dtype in peaks else 1.0
        if table == "op_default":
            defaults[op] = eff * scale
        elif table != "op_shape":
            issues.add(line, "table", f"unknown table {table[:30]!r} (op_shape | op_default | mem_bw)")
        elif op in ("matmul", "fp8_matmul"):
            key = _matmul_key(cells, get, line, issues, dtype)
            if key is not None:
                mm.setdefault(key, []).append((get(cells, "k_out_dtype") or "", _eff(eff * scale, line, issues)))
        elif op in ("group_matmul", "fp8_group_matmul"):
            row = _grouped_row(cells, get, line, issues, dtype, eff * scale)
            if row is not None:
                grouped.append(row)
        elif op in ("sdp_fwd", "sdp_bwd"):
            att = _attention_row(cells, get, line, issues, op, eff * scale)
            if att is not None:
                attention.append(att)
        else:
            issues.add(line, "op", f"unknown op {op[:30]!r}")
    issues.raise_if_any()
    points, notes = _merge_matmul(mm, wgrad_out_dtype)
    if not (points or grouped or attention or defaults or mem_bw):
        raise ConfigError([(FIELD, "SimuMax operator table: no usable rows")])
    n_rows = sum(len(v) for v in mm.values())
    return B200Tables(points, tuple(grouped), tuple(attention), defaults, mem_bw, file_peak, notes, n_rows)


def _all_parsed(vals: list[int | None]) -> tuple[int, ...] | None:
    """``vals`` when every cell parsed (each bad one is already in ``issues``), else None."""
    ints = tuple(v for v in vals if v is not None)
    return ints if len(ints) == len(vals) else None


def _matmul_key(cells, get, line, issues, dtype):
    b = pos_int(get(cells, "k_b"), line, "k_b", issues, default=1)
    m, n, k = (pos_int(get(cells, c), line, c, issues) for c in ("k_m", "k_n", "k_k"))
    layout = get(cells, "k_layout").upper() or None
    if layout is not None and layout not in ("TN", "NN", "NT"):
        issues.add(line, "k_layout", f"layout {layout[:10]!r} is not TN, NN or NT")
        return None
    if None in (b, m, n, k):
        return None
    if max(m, n, k) > 2**31 or b > 2**20:  # type: ignore[operator]
        issues.add(line, "k_m", "m, n and k must be at most 2^31 and b at most 2^20 (GemmPoint bounds)")
        return None
    return (m, n, k, b, dtype, layout)


def _eff(eff: float, line: int, issues: Issues) -> float:
    if not 1e-4 <= eff <= 1.0:  # GemmPoint bounds: achieved / peak cannot exceed 1 (config/system.py)
        issues.add(line, "efficiency", f"{eff:.4g} is outside [0.0001, 1] of the system's peak (measured on a faster GPU?)")
        return 1.0
    return eff


def _merge_matmul(mm: dict[tuple, list[tuple[str, float]]], wgrad_out_dtype: str | None):
    """One GemmPoint per (m,n,k,b,dtype,layout). SimuMax measured some wgrad (NT) shapes twice:
    accumulating into an fp32 main_grad (Megatron's gradient-accumulation fusion, the default)
    and with a bf16 output (grads reduced in bf16); ``wgrad_out_dtype`` picks one (else the
    mean); ``None`` keeps every row as its own point."""
    points = []
    dup = 0
    if wgrad_out_dtype is None:
        pts = tuple(GemmPoint(m=m, n=n, k=k, b=b, dtype=dt, layout=lay, efficiency=e)
                    for (m, n, k, b, dt, lay), vals in mm.items() for _, e in vals)
        return pts, ()
    for (m, n, k, b, dtype, layout), vals in mm.items():
        chosen = [e for od, e in vals if od == wgrad_out_dtype] if len(vals) > 1 else []
        if len(vals) > 1:
            dup += 1
        use = chosen or [e for _, e in vals]
        points.append(GemmPoint(m=m, n=n, k=k, b=b, dtype=dtype, layout=layout, efficiency=sum(use) / len(use)))
    notes = (f"{dup} matmul shape(s) measured with two output dtypes; kept out_dtype={wgrad_out_dtype}",) if dup else ()
    return tuple(points), notes


# ---------------------------------------------------------------------------------------------
# Helpers over the B200 rows
# ---------------------------------------------------------------------------------------------


def attention_efficiency_from_b200(
    rows: tuple[AttentionRow, ...] | B200Tables,
    *,
    phase: Literal["fwd", "bwd"],
    causal: bool = True,
    batch: int | None = None,
    seq_len: int | None = None,
    head_num: int | None = None,
    kv_head_num: int | None = None,
    qk_head_dim: int | None = None,
    v_head_dim: int | None = None,
    contiguous: bool | None = True,
    nearest: bool = True,
) -> float | None:
    """Flash-attention efficiency in simengine's convention (module docstring) for a shape.

    Fields left ``None`` match any row; the rows matching all given fields are averaged
    (arithmetic mean of per-row efficiencies, as SimuMax's own default is the mean of its
    measured shapes). With nothing matching and ``nearest``, the row nearest in log2 space over
    the given fields is used. ``contiguous`` prefers rows of that ``qkv_contiguous`` when any.
    ``None`` when no row of ``phase`` exists.
    """
    pool = [r for r in (rows.attention if isinstance(rows, B200Tables) else rows) if r.phase == phase]
    if contiguous is not None and any(r.qkv_contiguous == contiguous for r in pool):
        pool = [r for r in pool if r.qkv_contiguous == contiguous]
    if not pool:
        return None
    want = {"batch": batch, "seq_len": seq_len, "head_num": head_num, "kv_head_num": kv_head_num,
            "qk_head_dim": qk_head_dim, "v_head_dim": v_head_dim}
    given = {k: v for k, v in want.items() if v is not None}
    match = [r for r in pool if all(getattr(r, k) == v for k, v in given.items())]
    if not match:
        if not nearest:
            return None
        best = min(pool, key=lambda r: sum((math.log2(max(getattr(r, k), 1)) - math.log2(max(v, 1))) ** 2
                                           for k, v in given.items()))
        match = [best]
    vals = [r.simengine_efficiency(causal) for r in match]
    return sum(vals) / len(vals)


def grouped_gemm_mean(
    rows: tuple[GroupedGemmRow, ...] | B200Tables,
    *,
    stage: str | None = None,
    weighting: Literal["mean", "flops"] = "mean",
) -> float | None:
    """Mean grouped-GEMM efficiency over the rows (of one ``stage``).

    ``mean``: arithmetic mean of the rows (SimuMax's ``op_default`` convention). ``flops``: total
    FLOPs / total time = FLOP-weighted harmonic mean — the efficiency of running all measured
    shapes back to back.
    """
    pool = [r for r in (rows.grouped if isinstance(rows, B200Tables) else rows) if stage is None or r.stage == stage]
    if not pool:
        return None
    if weighting == "flops":
        return sum(r.flops for r in pool) / sum(r.flops / r.efficiency for r in pool)
    return sum(r.efficiency for r in pool) / len(pool)


def grouped_gemm_efficiency(
    rows: tuple[GroupedGemmRow, ...] | B200Tables, *, ng: int, m: int, n: int, k: int, stage: str = "fwd",
) -> float | None:
    """Measured efficiency of the grouped GEMM nearest (log2 space over ng, M, N, K) in ``stage``."""
    pool = [r for r in (rows.grouped if isinstance(rows, B200Tables) else rows) if r.stage == stage]
    if not pool:
        return None
    q = [math.log2(max(v, 1)) for v in (ng, m, n, k)]
    best = min(pool, key=lambda r: sum((math.log2(v) - w) ** 2 for v, w in zip((r.ng, r.m, r.n, r.k), q)))
    return best.efficiency
