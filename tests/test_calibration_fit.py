"""Alpha-beta fits of collectives and the network-tier helper."""

from __future__ import annotations

from pathlib import Path


import numpy as np
import pytest

from simengine.calibration import bus_factor, collective_point, fit_alpha_beta, fit_table, parse_nccl_log, tier_for
from simengine.calibration.formats.nccl_tests import NcclRow, NcclTable
from simengine.config.system import GPUSpec, NetworkTier, PeakTflops, ScaleUp, SystemSpec
from simengine.errors import ConfigError

VALIDATION = Path(__file__).resolve().parent / "data" / "calibration"  # real logs and sweeps (README there)
LOGS = VALIDATION / "nccl_logs"
def needs_logs(test):  # the data ship in the repo: a missing file fails below, never skips
    return test


assert LOGS.is_dir(), 'bundled calibration test data missing'


def _system(domain=8, gpus_per_node=8, up=450.0, out=50.0):
    return SystemSpec(
        gpu=GPUSpec(name="H100 SXM", memory_gib=80, peak_tflops=PeakTflops(bf16=989.4, fp8=1978.9, fp32=66.9),
                    hbm_bandwidth_gbs=3350),
        num_gpus=64, gpus_per_node=gpus_per_node,
        scale_up=ScaleUp(domain_size=domain, bandwidth_gbs=up, latency_us=2.0),
        scale_out=NetworkTier(bandwidth_gbs=out, latency_us=5.0),
    )


@pytest.mark.parametrize("kind,n", [("all_reduce", 8), ("all_gather", 16), ("reduce_scatter", 4),
                                    ("all_to_all", 8), ("p2p", 2)])
def test_bus_factors(kind, n):
    expected = {"all_reduce": 2 * (n - 1) / n, "p2p": 1.0}.get(kind, (n - 1) / n)
    assert bus_factor(kind, n) == pytest.approx(expected)


@pytest.mark.parametrize("alpha,busbw,factor", [(12.5, 321.0, 1.75), (0.0, 48.0, 0.9375), (250.0, 8.0, 1.0)])
def test_fit_recovers_synthetic_alpha_beta_exactly(alpha, busbw, factor):
    sizes = np.array([2**i for i in range(10, 35)], dtype=float)
    times = alpha + sizes * factor / (busbw * 1e3)
    fit = fit_alpha_beta(sizes, times, factor)
    assert fit.alpha_us == pytest.approx(alpha, abs=1e-6)
    assert fit.busbw_gbs == pytest.approx(busbw, rel=1e-9)
    assert fit.rel_rms < 1e-9 and fit.min_bytes == 1 << 20  # sizes < 1 MiB not used
    assert fit.time_us(1 << 30, factor) == pytest.approx(alpha + (1 << 30) * factor / (busbw * 1e3))


def test_fit_is_robust_to_one_outlier_and_weights_small_sizes():
    sizes = np.array([2**i for i in range(20, 31)], dtype=float)
    times = 20.0 + sizes / 200e3
    times[3] *= 3.0  # one sick measurement
    fit = fit_alpha_beta(sizes, times, 1.0)
    assert fit.busbw_gbs == pytest.approx(200.0, rel=0.01)
    assert fit.alpha_us == pytest.approx(20.0, rel=0.05)


def test_fit_negative_intercept_is_clamped_and_single_point():
    sizes = np.array([1 << 20, 1 << 24, 1 << 28], dtype=float)
    times = np.array([1.0, 90.0, 1400.0])  # extrapolates to a negative latency
    fit = fit_alpha_beta(sizes, times, 1.0)
    assert fit.alpha_us == 0.0 and fit.busbw_gbs > 0
    one = fit_alpha_beta([10 << 30], [80922.0], 1.75)
    assert one.alpha_us == 0.0 and one.busbw_gbs == pytest.approx((10 << 30) * 1.75 / 80922e3)
    assert "single" in one.note


def test_fit_rejects_nonsense():
    with pytest.raises(ConfigError):
        fit_alpha_beta([1 << 20, 1 << 22, 1 << 24], [100.0, 50.0, 10.0], 1.0)
    with pytest.raises(ConfigError):
        fit_alpha_beta([], [], 1.0)
    t = NcclTable("broadcast", 8, (NcclRow(1 << 20, 1, "float", 10.0, 0.1, 0.1),))
    with pytest.raises(ConfigError):
        fit_table(t)


@needs_logs
def test_h100_nvlink_all_reduce_busbw_is_about_480():
    t = parse_nccl_log(LOGS / "xxrjun-c01-n1g8_5coll_8gpu.log").table("all_reduce")
    fit = fit_table(t)
    assert fit.busbw_gbs == pytest.approx(480.0, rel=0.03)
    assert 0 < fit.alpha_us < 150 and fit.rel_rms < 0.05
    assert fit.quality_warning(max(r.busbw_gbs for r in t.rows)) == ""


@needs_logs
def test_every_real_table_fits_sensibly():
    for p in LOGS.glob("*.log"):
        for t in parse_nccl_log(p).tables:
            fit = fit_table(t)
            top = max(r.busbw_gbs for r in t.rows)
            assert 0.5 * top < fit.busbw_gbs < 1.3 * top, (p.name, t.collective)
            assert fit.alpha_us >= 0


def test_tier_for():
    s = _system()
    assert tier_for(8, s) == "scale_up"
    assert tier_for(16, s) == "scale_out"
    assert tier_for(2, s, n_hosts=2) == "scale_out"      # 2 ranks on 2 NVL8 servers
    nvl72 = _system(domain=72, gpus_per_node=4, up=900.0)
    assert tier_for(64, nvl72, n_hosts=16) == "scale_up"  # the NVLink domain spans hosts


def test_collective_point_efficiency_and_clip():
    fit = fit_alpha_beta([1 << 20, 1 << 30], [20.0 + (1 << 20) / 400e3, 20.0 + (1 << 30) / 400e3], 1.0)
    p, warn = collective_point("all_reduce", "scale_up", fit, 450.0)
    assert p.efficiency == pytest.approx(400 / 450) and p.latency_us == pytest.approx(20.0) and warn == ""
    p, warn = collective_point("all_reduce", "scale_out", fit, 50.0)
    assert p.efficiency == 2.0 and "clipped" in warn
