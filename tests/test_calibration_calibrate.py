"""calibrate(): measured files → a new SystemSpec, plus the summary the UI shows."""

from __future__ import annotations

from pathlib import Path


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simengine.calibration import calibrate, calibrate_with_summary, gemm_efficiency, load_b200_system_efficiency
from simengine.config.system import GPUSpec, NetworkTier, PeakTflops, ScaleUp, SystemSpec
from simengine.errors import ConfigError
import contextlib

VALIDATION = Path(__file__).resolve().parent / "data" / "calibration"  # real logs and sweeps (README there)
B200 = Path(__file__).resolve().parents[1] / "simengine" / "validation" / "data" / "b200_op_efficiency.csv"
XLA = VALIDATION / "gemm_sweeps" / "xla_sm90_h100_matmul_perf_table.csv"
LOGS = VALIDATION / "nccl_logs"
def needs_data(test):  # the data ship in the repo: a missing file fails below, never skips
    return test


assert B200.is_file() and XLA.is_file() and LOGS.is_dir(), "bundled calibration test data missing"


def _h100():
    return SystemSpec(
        name="8xH100", gpu=GPUSpec(name="H100 SXM", memory_gib=80, hbm_bandwidth_gbs=3350,
                                   peak_tflops=PeakTflops(bf16=989.4, fp8=1978.9, fp32=66.9)),
        num_gpus=16, scale_up=ScaleUp(domain_size=8, bandwidth_gbs=450, latency_us=2.0),
        scale_out=NetworkTier(bandwidth_gbs=50, latency_us=5.0),
    )


def _b200():
    return SystemSpec(
        name="8xB200", gpu=GPUSpec(name="B200", memory_gib=180, hbm_bandwidth_gbs=8000,
                                   peak_tflops=PeakTflops(bf16=2250, fp8=4500, fp32=80)),
        num_gpus=8, scale_up=ScaleUp(domain_size=8, bandwidth_gbs=900, latency_us=2.0),
        scale_out=NetworkTier(bandwidth_gbs=50, latency_us=5.0),
    )


@needs_data
def test_b200_file_sets_table_and_scalars():
    system = _b200()
    new, summary = calibrate_with_summary(system, B200)
    e = new.efficiency
    assert system.efficiency.gemm_table == () and new is not system  # the input is untouched
    assert len(e.gemm_table) == 432 and summary.gemm_format == "b200" and summary.gemm_points_by_dtype == {"bf16": 432}
    assert e.attention_fwd == pytest.approx(summary.scalars["attention_fwd"])
    # SimuMax's own default (mean of measured shapes) converted to causal FLOPs: ≈ half of it
    assert e.attention_fwd == pytest.approx(0.7059717796465379 / 2, rel=2e-3)
    assert e.attention_bwd == pytest.approx(0.6943225842672003 / 2, rel=2e-3)
    assert e.grouped_gemm == pytest.approx(0.30199308868813257)
    assert e.hbm == pytest.approx(8000 * 2**30 / 1e9 * 0.666 / 8000)   # SimuMax "GB/s" are GiB/s
    assert e.kernel_overhead_us == 30.0
    assert (summary.attention_rows, summary.grouped_gemm_rows) == (64, 108)
    assert "b200 GEMM table (432 shapes)" in e.source
    p = e.gemm_table[0]
    assert gemm_efficiency(e.gemm_table, p.m, p.n, p.k, layout=p.layout) == p.efficiency
    assert SystemSpec.model_validate_json(new.model_dump_json()) == new


@needs_data
def test_load_b200_system_efficiency():
    e = load_b200_system_efficiency(B200)
    assert len(e.gemm_table) == 432 and e.kernel_overhead_us == 30.0
    assert e.hbm == pytest.approx(0.666 * 2**30 / 1e9)
    assert e.collective_table == ()  # untouched default
    assert e.gemm == pytest.approx(0.4878, abs=1e-4)  # the file's plain-GEMM default (op_default matmul)


@needs_data
def test_xla_and_all_logs_on_h100():
    logs = {p.name: p.read_text() for p in sorted(LOGS.glob("*.log"))}
    new, summary = calibrate_with_summary(_h100(), XLA.read_bytes(), logs)
    e = new.efficiency
    assert len(e.gemm_table) == 375 and summary.gemm_rows_skipped == {"fp32": 375}
    table = {(p.kind, p.tier): p for p in e.collective_table}
    assert set(table) == {("all_reduce", "scale_up"), ("all_gather", "scale_up"), ("reduce_scatter", "scale_up"),
                          ("all_to_all", "scale_up"), ("p2p", "scale_up"), ("all_reduce", "scale_out"),
                          ("all_gather", "scale_out")}
    ar = table[("all_reduce", "scale_up")]
    assert ar.efficiency * 450 == pytest.approx(480, rel=0.03)  # the H100 NVLink log wins over A100 / H20
    used = [f for f in summary.collective_fits if f.used]
    assert len(used) == len(e.collective_table) == 7 and len(summary.collective_fits) == 12
    assert any("A100" in w and "H100 SXM" in w for w in summary.warnings)     # GPU mismatch noticed
    # once per log, not once per table of it (the H20 log holds two all-reduce tables)
    assert len(summary.warnings) == len(set(summary.warnings))
    assert sum("measured on NVIDIA H20" in w for w in summary.warnings) == 1
    # multi-node: 2 × 8 H100 on 400G IB, NCCL crosses nodes on 8 NICs at once → ~469 / (8 × 50) GB/s
    assert not any("clipped" in w for w in summary.warnings)
    assert table[("all_reduce", "scale_out")].efficiency == pytest.approx(1.17, abs=0.1)
    assert table[("all_reduce", "scale_out")].group_size == 16
    assert any("single message size" in w for w in summary.warnings)


@needs_data
def test_log_given_as_path_and_errors_name_the_file(tmp_path):
    new = calibrate(_h100(), nccl_logs={"ar.log": LOGS / "xxrjun-c01-n1g8_5coll_8gpu.log"})
    assert len(new.efficiency.collective_table) == 5
    bad = tmp_path / "junk.log"
    bad.write_text("hello\nworld\n")
    with pytest.raises(ConfigError, match="junk.log") as e:
        calibrate(_h100(), nccl_logs={"junk.log": str(bad)})
    assert e.value.field == "nccl_log"
    with pytest.raises(ConfigError) as e:
        calibrate(_h100(), gemm_csv="m,n,k\n1,2,3\n")
    assert e.value.field == "gemm_csv"
    # every unreadable log is named, not only the first (an empty one went unmentioned beside garbage)
    good = LOGS / "xxrjun-c01-n1g8_5coll_8gpu.log"
    with pytest.raises(ConfigError) as e:
        calibrate(_h100(), nccl_logs={"junk.log": str(bad), "ok.log": good, "empty.log": ""})
    said = " ".join(m for _, m in e.value.issues)
    assert "junk.log" in said and "empty.log" in said and "ok.log" not in said


def test_nothing_given_changes_nothing():
    s = _h100()
    assert calibrate(s).efficiency == s.efficiency


def test_synthetic_log_end_to_end():
    rows = []
    for i in range(20, 31):
        size = 1 << i
        t = 15.0 + size * 1.75 / 360e3
        alg = size / (t * 1e3)
        rows.append(f"{size} {size // 4} float sum -1 {t:.2f} {alg:.2f} {alg * 1.75:.2f} 0 {t:.2f} {alg:.2f} {alg * 1.75:.2f} 0")
    log = "# Collective test starting: all_reduce_perf\n" + "\n".join(rows) + "\n"
    new, summary = calibrate_with_summary(_h100(), nccl_logs={"x.log": log})
    (p,) = new.efficiency.collective_table
    assert (p.kind, p.tier) == ("all_reduce", "scale_up")
    assert p.efficiency == pytest.approx(360 / 450, rel=1e-3) and p.latency_us == pytest.approx(15.0, abs=0.05)
    assert summary.collective_fits[0].n_ranks == 8 and summary.collective_fits[0].used


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=500), st.text(max_size=500))
def test_fuzz_calibrate_only_config_error(gemm, log):
    with contextlib.suppress(ConfigError):
        calibrate(_h100(), gemm_csv=gemm + "\n", nccl_logs={"a.log": log + "\n"})


def test_a_shape_measured_twice_at_different_efficiencies_is_warned_about():
    """Two rows for 4096³ at 600 and 300 TFLOP/s were accepted without a word."""
    from simengine.api import calibrate
    from simengine.presets import load_spec

    rows = ["m,n,k,dtype,efficiency"] + [f"{256 * 2 ** (i % 5)},{512 * 2 ** (i // 5)},1024,bf16,0.5" for i in range(20)]
    text = "\n".join(rows + ["4096,4096,4096,bf16,0.6", "4096,4096,4096,bf16,0.3"]) + "\n"
    _, summary = calibrate(load_spec("systems", "h100-sxm5-80gb"), gemm=text.encode())
    said = " ".join(summary.warnings)
    assert "1 GEMM shape(s) measured more than once" in said and "4096x4096x4096 bf16: 0.6, 0.3" in said
    _, clean = calibrate(load_spec("systems", "h100-sxm5-80gb"), gemm="\n".join(rows).encode())
    assert not any("more than once" in w for w in clean.warnings)
