"""GEMM efficiency lookup (exact, interpolated, clamped, fast) and the B200 attention/grouped helpers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simengine.calibration import (
    GemmIndex, attention_efficiency_from_b200, causal_fraction, gemm_efficiency, gemm_index, grouped_gemm_efficiency,
    grouped_gemm_mean, read_b200_op_efficiency, read_xla_matmul_table,
)
from simengine.config.system import GemmPoint

VALIDATION = Path(__file__).resolve().parent / "data" / "calibration"  # real logs and sweeps (README there)
B200 = Path(__file__).resolve().parents[1] / "simengine" / "validation" / "data" / "b200_op_efficiency.csv"
XLA = VALIDATION / "gemm_sweeps" / "xla_sm90_h100_matmul_perf_table.csv"
def needs_data(test):  # the data ship in the repo: a missing file fails below, never skips
    return test


assert (B200.is_file() and XLA.is_file()), 'bundled calibration test data missing'


@pytest.fixture(scope="module")
def xla():
    return read_xla_matmul_table(XLA)


@pytest.fixture(scope="module")
def b200():
    return read_b200_op_efficiency(B200)


def _pt(m, n, k, eff, layout=None, dtype="bf16", b=1):
    return GemmPoint(m=m, n=n, k=k, b=b, dtype=dtype, layout=layout, efficiency=eff)


def test_exact_and_layout_rules():
    pts = (_pt(1024, 1024, 1024, 0.5, "TN"), _pt(1024, 1024, 1024, 0.3, "NN"), _pt(2048, 2048, 2048, 0.7),
           _pt(4096, 4096, 4096, 0.6, dtype="fp8"))
    assert gemm_efficiency(pts, 1024, 1024, 1024, layout="TN") == 0.5
    assert gemm_efficiency(pts, 1024, 1024, 1024, layout="NN") == 0.3
    assert gemm_efficiency(pts, 1024, 1024, 1024) == pytest.approx(0.4)           # any layout: mean
    assert gemm_efficiency(pts, 2048, 2048, 2048, layout="NT") == 0.7             # point without layout
    assert gemm_efficiency(pts, 4096, 4096, 4096, dtype="fp8") == 0.6
    assert gemm_efficiency(pts, 1024, 1024, 1024, dtype="fp32") is None           # no such dtype
    assert gemm_efficiency((), 1, 1, 1) is None
    # NT at 1024³ is not measured: interpolate among NT-or-unlayouted points (only the 2048³ one)
    assert gemm_efficiency(pts, 1024, 1024, 1024, layout="NT") == pytest.approx(0.7)


def test_interpolation_between_two_points_on_a_line():
    pts = (_pt(1024, 1024, 1024, 0.2), _pt(4096, 1024, 1024, 0.6))
    mid = gemm_efficiency(pts, 2048, 1024, 1024)  # log-midpoint: equal weights
    assert mid == pytest.approx(0.4)
    v = gemm_efficiency(pts, 1500, 1024, 1024)
    assert 0.2 < v < 0.4


@needs_data
def test_exact_value_at_table_points(xla, b200):
    for p in xla[::37]:
        assert gemm_efficiency(xla, p.m, p.n, p.k, p.b, p.dtype) == pytest.approx(p.efficiency)
    for p in b200.matmul[::29]:
        assert gemm_efficiency(b200.matmul, p.m, p.n, p.k, p.b, p.dtype, p.layout) == pytest.approx(p.efficiency)


@needs_data
def test_value_between_neighbours(xla):
    e = {(p.b, p.m, p.n, p.k, p.dtype): p.efficiency for p in xla}
    lo, hi = e[(1, 256, 1024, 1024, "bf16")], e[(1, 512, 1024, 1024, "bf16")]
    v = gemm_efficiency(xla, 362, 1024, 1024)  # ≈ log2-midpoint of 256 and 512
    assert min(lo, hi) < v < max(lo, hi)
    rng = np.random.default_rng(0)
    bf = [p for p in xla if p.dtype == "bf16"]
    coords = np.array([[math.log2(p.m), math.log2(p.n), math.log2(p.k), math.log2(p.b)] for p in bf])
    effs = np.array([p.efficiency for p in bf])
    for _ in range(50):
        m, n, k = (int(x) for x in 2 ** rng.uniform(8, 12, 3))
        v = gemm_efficiency(xla, m, n, k)
        d = ((coords - [math.log2(m), math.log2(n), math.log2(k), 0]) ** 2).sum(1)
        near = effs[np.argsort(d)[:8]]
        assert near.min() - 1e-12 <= v <= near.max() + 1e-12


@needs_data
def test_outside_the_table_clamps_to_the_edge(xla):
    edge = gemm_efficiency(xla, 4096, 4096, 4096)
    assert gemm_efficiency(xla, 1 << 17, 1 << 16, 1 << 15) == pytest.approx(edge)
    small = gemm_efficiency(xla, 256, 256, 256)
    assert gemm_efficiency(xla, 16, 8, 1) == pytest.approx(small)
    assert gemm_efficiency(xla, 4096, 4096, 4096, b=64) == pytest.approx(gemm_efficiency(xla, 4096, 4096, 4096, b=4))


@needs_data
def test_lookup_is_cached_and_deterministic(b200):
    pts = b200.matmul
    assert gemm_index(pts) is gemm_index(pts)
    rng = np.random.default_rng(1)
    queries = [(int(a), int(b), int(c), 1, "bf16", lay) for (a, b, c), lay in
               zip(rng.integers(128, 100_000, (400, 3)), ["TN", "NN", "NT", None] * 100)]
    cached = [gemm_efficiency(pts, *q) for q in queries]   # speed is measured in benchmarks/, not here
    fresh = [gemm_efficiency(list(pts), *q) for q in queries[:40]]   # a list is never cached: a new index
    assert cached[:40] == fresh and cached == [gemm_index(pts)(*q) for q in queries]
    assert all(0 < v <= 1 for v in cached)
    assert len(set(cached)) > 100   # the queries reach many distinct points, not one clamped edge


def test_index_parameters():
    pts = tuple(_pt(2**i, 1024, 1024, 0.07 * i) for i in range(8, 14))
    idx = GemmIndex(pts, neighbours=2, power=1.0)
    assert idx(2**10 * 1.4142, 1024, 1024) == pytest.approx(gemm_efficiency(pts, 1448, 1024, 1024), abs=0.05)


# ---- B200 attention and grouped GEMM ---------------------------------------------------------------


def test_causal_fraction():
    assert causal_fraction(1) == 1.0
    assert causal_fraction(4096) == pytest.approx(4097 / 8192)


@needs_data
def test_attention_conversion_to_causal_flops(b200):
    raw = 1.201756785556635  # sdp_fwd, s=32768, 8 heads, 1 kv head (no-causal convention: > 1)
    kw = {"seq_len": 32768, "head_num": 8, "kv_head_num": 1, "qk_head_dim": 128, "v_head_dim": 128}
    assert attention_efficiency_from_b200(b200, phase="fwd", causal=False, **kw) == pytest.approx(raw)
    v = attention_efficiency_from_b200(b200, phase="fwd", **kw)
    assert v == pytest.approx(raw * 32769 / 65536) and v < 1
    bwd = attention_efficiency_from_b200(b200, phase="bwd", **kw)
    assert bwd == pytest.approx(0.9548560173212152 * 32769 / 65536)
    # qkv_contiguous rows preferred; an unmeasured shape → nearest measured one
    assert attention_efficiency_from_b200(b200, phase="fwd", seq_len=4096, head_num=64, kv_head_num=8) == pytest.approx(
        0.8715233665672911 * 4097 / 8192)
    near = attention_efficiency_from_b200(b200, phase="fwd", seq_len=30000, head_num=8, kv_head_num=1)
    assert near == pytest.approx(v)
    assert attention_efficiency_from_b200(b200, phase="fwd", seq_len=30000, nearest=False) is None
    overall = attention_efficiency_from_b200(b200, phase="fwd")
    assert 0.2 < overall < 0.6


@needs_data
def test_attention_conversion_matches_simengine_flop_count(b200):
    ops = pytest.importorskip("simengine.workload.ops")
    row = next(r for r in b200.attention if r.phase == "bwd" and r.seq_len == 32768 and r.head_num == 16)
    peak = 2250e12
    t = row.file_flops / (row.efficiency * peak)  # measured kernel time implied by the file
    op = ops.Attention(name="a", b=row.batch, heads=row.head_num, kv_heads=row.kv_head_num, s_q=row.seq_len,
                       s_kv=row.seq_len, d_qk=row.qk_head_dim, d_v=row.v_head_dim, causal=True, phase="bwd")
    assert op.flops / (t * peak) == pytest.approx(row.simengine_efficiency())


@needs_data
def test_grouped_gemm_helpers(b200):
    assert grouped_gemm_mean(b200) == pytest.approx(b200.defaults["group_matmul"])
    stages = [grouped_gemm_mean(b200, stage=s) for s in ("fwd", "bwd_grad_act", "bwd_grad_w")]
    assert stages[2] < stages[1] < stages[0]
    effs = [r.efficiency for r in b200.grouped]
    assert min(effs) < grouped_gemm_mean(b200, weighting="flops") < max(effs)
    assert grouped_gemm_mean(b200, stage="nope") is None
    assert grouped_gemm_efficiency(b200, ng=160, m=154, n=3072, k=5120, stage="fwd") == pytest.approx(0.19968557879607124)
    assert grouped_gemm_efficiency(b200, ng=150, m=160, n=3000, k=5000, stage="fwd") == pytest.approx(0.19968557879607124)
