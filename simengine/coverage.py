"""Calibration coverage: how much of a scenario's op time is priced from measured data.

``coverage(scenario)`` walks the ops one micro-batch runs on every pipeline rank (the workload
builder, ``workload/builder.py``), prices each with the cost model (``cost/compute.py``,
``cost/comm.py``) and classifies how its efficiency was obtained:

* ``measured``     — an exact measured point (GEMM table shape; attention / grouped-GEMM shape;
  a collective fit on the same kind, tier and group size);
* ``interpolated`` — inside the measured range: log-shape interpolation of the GEMM table
  (``calibration/table.py``), the nearest measured attention / grouped-GEMM shape, a collective
  fit of another group size on the same kind and tier;
* ``extrapolated`` — a GEMM outside the table's range (clamped to its edge);
* ``default``      — no measurement applies: the system's scalar efficiencies and curves.

Weights are op seconds × how often the op runs per step (layers of that block on the rank ×
micro-batches; forward, backward and weight-gradient passes), summed over ranks: a share of the
priced op time, before overlap and pipeline bubbles (which no table calibrates). Memory-bound
kernels use the scalar HBM efficiency. Not counted: the data-parallel gradient collectives, the
optimizer and the pipeline p2p (priced per step in cost/dp.py and the simulator, not workload ops).
Memory-bound kernels use the scalar HBM efficiency: ``measured`` only when ``measured_fields`` names
``efficiency.hbm`` (a calibration's provenance), else ``default``.
"""

from __future__ import annotations

from collections.abc import Collection

from .calibration.table import gemm_index
from .config.scenario import Scenario
from .cost.comm import CommModel
from .cost.compute import BF16_ONLY_GEMMS, ComputeModel
from .workload.builder import build_workload
from .workload.ops import Attention, Collective, Gemm, GroupedGemm, Memory

CLASSES = ("measured", "interpolated", "extrapolated", "default")


def coverage(sc: Scenario, measured_fields: Collection[str] = ()) -> dict[str, dict[str, float]]:
    """``{op kind: {"seconds": s, "measured": share, "interpolated": …, "extrapolated": …,
    "default": …}}`` plus ``"total"``; op kinds: gemm, grouped_gemm, attention, memory_bound and
    each collective kind present (``all_reduce`` …). Shares of each kind sum to 1."""
    wl = build_workload(sc)
    comp = ComputeModel(sc.system, sc.strategy.dtype)
    comm = CommModel(sc)
    ctx = _Ctx(sc, comp, comm, frozenset(measured_fields))
    acc: dict[str, dict[str, float]] = {}
    mb = sc.num_microbatches
    for chunks in wl.ranks:
        for ch in chunks:
            for block, times in _block_counts(ch, wl.blocks).items():
                ph = wl.blocks[block]
                for op in (*ph.fwd, *ph.bwd, *ph.wgt):
                    kind, cls, secs = ctx.classify(op)
                    if secs > 0:
                        row = acc.setdefault(kind, dict.fromkeys(CLASSES, 0.0))
                        row[cls] += secs * times * mb
    return _shares(acc)


def _block_counts(ch, blocks) -> dict[str, int]:
    counts = {"attn": ch.attn_layers, "mlp": ch.dense_layers, "moe": ch.moe_layers, "mamba": ch.mamba_layers,
              "embed": int(ch.first), "head": int(ch.last), "mtp": ch.mtp}
    return {b: n for b, n in counts.items() if n and b in blocks}


def _shares(acc: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    total = dict.fromkeys(CLASSES, 0.0)
    for kind, row in sorted(acc.items()):
        secs = sum(row.values())
        out[kind] = {"seconds": secs, **{c: row[c] / secs for c in CLASSES}}
        for c in CLASSES:
            total[c] += row[c]
    tsum = sum(total.values())
    out["total"] = {"seconds": tsum, **{c: (total[c] / tsum if tsum else 0.0) for c in CLASSES}}
    return out


class _Ctx:
    def __init__(self, sc: Scenario, comp: ComputeModel, comm: CommModel, measured: frozenset[str]):
        self.sc, self.comp, self.comm, self.measured = sc, comp, comm, measured
        e = sc.system.efficiency
        self.index = gemm_index(e.gemm_table) if e.gemm_table else None
        self.dtype = sc.strategy.dtype

    def classify(self, op) -> tuple[str, str, float]:
        if isinstance(op, Gemm):
            return "gemm", self._gemm(op), self.comp.gemm(op)
        if isinstance(op, GroupedGemm):
            return "grouped_gemm", self._grouped(op), self.comp.grouped_gemm(op)
        if isinstance(op, Attention):
            return "attention", self._attention(op), self.comp.attention(op)
        if isinstance(op, Memory):
            cls = "measured" if "efficiency.hbm" in self.measured else "default"
            return "memory_bound", cls, self.comp.memory(op)
        if isinstance(op, Collective):
            return op.kind, self._collective(op), self.comm.time(op.kind, op.bytes, op.group, op.size)
        return "other", "default", 0.0

    def _gemm(self, op: Gemm) -> str:
        if self.index is None or (self.dtype != "bf16" and op.name.endswith(BF16_ONLY_GEMMS)):
            return "default"
        return self.index.source(op.m, op.n, op.k, op.b, self.dtype, op.layout)

    def _grouped(self, op: GroupedGemm) -> str:
        # cost/compute.py ComputeModel.grouped_efficiency: nearest forward shape of the same pass
        table = [p for p in self.sc.system.efficiency.grouped_gemm_table if p.layout == op.layout]
        if not table or self.dtype != "bf16":
            return "default"
        fwd = {"TN": (op.m, op.n, op.k), "NN": (op.m, op.k, op.n), "NT": (op.k, op.m, op.n)}[op.layout]
        want = (op.groups, *fwd)
        return "measured" if any((p.groups, p.m, p.n, p.k) == want for p in table) else "interpolated"

    def _attention(self, op: Attention) -> str:
        if op.impl == "unfused":
            return "default" if self.index is None else "interpolated"
        table = [p for p in self.sc.system.efficiency.attention_table if p.phase == op.phase]
        if not table:
            return "default"
        want = (op.b, op.s_kv, op.heads, op.kv_heads, op.d_qk, op.d_v)
        hit = any((p.batch, p.seq_len, p.heads, p.kv_heads, p.d_qk, p.d_v) == want for p in table)
        return "measured" if hit else "interpolated"

    def _collective(self, op: Collective) -> str:
        p = self.comm.places[op.group]
        tier = "scale_out" if p.in_domain < op.size else "scale_up"
        fits = self.comm.fits.get((op.kind, tier))
        if not fits:
            return "default"
        return "measured" if any(f.group_size == op.size for f in fits) else "interpolated"
