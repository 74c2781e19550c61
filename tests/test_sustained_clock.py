"""gpu.sustained_clock_ratio: isolated attention / grouped-GEMM efficiencies converted to the clock a
power-limited training step sustains (cost/compute.py), and what it does on the measured B200 runs."""

import copy
import csv
import io
import json
from pathlib import Path
from statistics import mean

import pytest
from pydantic import ValidationError

from simengine import presets
from simengine.api import estimate
from simengine.config.system import AttentionPoint, GPUSpec, GroupedGemmPoint, SystemSpec
from simengine.cost.compute import ComputeModel
from simengine.validation import b200_runs, b200_system
from simengine.workload.ops import Attention, Gemm, GroupedGemm

from scenarios import VALIDATION, scenario_dict

ROOT = Path(__file__).resolve().parents[1]
FAMILY = {"llama3_70b": "dense", "deepseekv2": "moe", "llama3_70b_cp": "cp"}


def b200_data():
    """The one place this file reads measured data: (runs CSV text, op-table path, NCCL fits)."""
    runs, table = VALIDATION / "b200_megatron_runs.csv", VALIDATION / "b200_op_efficiency.csv"
    assert runs.is_file() and table.is_file(), f"bundled validation data missing at {VALIDATION}"
    fits = json.loads((ROOT / "presets" / "calibration" / "b200-nccl-fits.json").read_text())
    return runs.read_text(), table, fits


def _system(ratio: float, **eff) -> SystemSpec:
    d = scenario_dict("llama3-8b", "b200-sxm-180gb")["system"]
    d["gpu"] = {**d["gpu"], "sustained_clock_ratio": ratio}
    d["efficiency"] = {**d.get("efficiency", {}), **eff}
    return SystemSpec.model_validate(d)


ATT = Attention("attn", 1, 64, 8, 4096, 4096, 128, 128, True, "fwd")
GRP = GroupedGemm("fwd:expert_fc1", groups=20, m=1232, n=3072, k=5120)
GEMM = Gemm("fwd:fc1", 4096, 28672, 8192)


@pytest.mark.parametrize("tables", [False, True])
def test_ratio_scales_attention_and_grouped_gemm_not_dense_gemm(tables):
    eff = {}
    if tables:
        eff = {"attention_table": [AttentionPoint(phase="fwd", seq_len=4096, heads=64, kv_heads=8, efficiency=0.44).model_dump()],
               "grouped_gemm_table": [GroupedGemmPoint(groups=20, m=1232, n=3072, k=5120, efficiency=0.51).model_dump()]}
    full, slow = ComputeModel(_system(1.0, **eff)), ComputeModel(_system(0.8, **eff))
    assert slow.attention_efficiency(ATT) == pytest.approx(0.8 * full.attention_efficiency(ATT))
    assert slow.grouped_efficiency(GRP) == pytest.approx(0.8 * full.grouped_efficiency(GRP))
    assert slow.gemm_efficiency(GEMM.m, GEMM.n, GEMM.k) == full.gemm_efficiency(GEMM.m, GEMM.n, GEMM.k)
    # compute-bound kernels: time (less the launch overhead) grows by 1/ratio
    oh = full.overhead
    assert slow.attention(ATT) - oh == pytest.approx((full.attention(ATT) - oh) / 0.8, rel=1e-6)


def test_ratio_is_a_bounded_gpu_field_defaulting_to_no_derate():
    base = scenario_dict("llama3-8b", "h100-sxm5-80gb")["system"]["gpu"]
    assert GPUSpec.model_validate(base).sustained_clock_ratio == 1.0
    for bad in (0.0, -0.1, 1.2, 1e-300, 0.049):
        with pytest.raises(ValidationError):
            GPUSpec.model_validate({**base, "sustained_clock_ratio": bad})


def test_b200_default_is_read_off_the_op_table():
    """Preset value = mean over the forward flash-attention shapes measured at both s = 32768 and
    s = 131072 of eff(131072) / eff(32768) (the long runs reach the power cap, the short bursts do not)."""
    _, table, _ = b200_data()
    rows = [r for r in csv.DictReader(io.StringIO(table.read_text())) if r["op"] == "sdp_fwd" and r["table"] == "op_shape"]
    by = {}
    for r in rows:
        key = (r["k_head_num"], r["k_kv_head_num"], r["k_qk_head_dim"], r["k_v_head_dim"])
        by.setdefault(key, {})[int(r["k_seq_len"])] = float(r["efficiency"])
    ratios = [v[131072] / v[32768] for v in by.values() if 131072 in v and 32768 in v]
    assert len(ratios) == 3
    gpu = presets.load_preset("systems", "b200-sxm-180gb")["gpu"]
    assert gpu["sustained_clock_ratio"] == pytest.approx(mean(ratios), abs=0.005)


def _errors(system: dict) -> dict[str, tuple[list[float], list[float]]]:
    text, _, _ = b200_data()
    out: dict[str, tuple[list[float], list[float]]] = {}
    for run in b200_runs(text, system):
        rep = estimate(run.config)
        t, m = out.setdefault(FAMILY[run.family], ([], []))
        t.append(abs(rep.step_time_s * 1e3 / run.real_ms - 1))
        m.append(abs(rep.peak_memory_gib / run.real_alloc_gib - 1))
    return out


@pytest.fixture(scope="module")
def systems():
    """datasheet / calibrated B200 systems, with the preset's clock ratio and without it (ratio 1)."""
    _, table, fits = b200_data()
    preset = presets.load_preset("systems", "b200-sxm-180gb")
    off = copy.deepcopy(preset)
    off["gpu"]["sustained_clock_ratio"] = 1.0
    return {name: _errors(s) for name, s in (
        ("datasheet", preset), ("calibrated", b200_system(preset, table, fits)),
        ("datasheet_off", off), ("calibrated_off", b200_system(off, table, fits)))}


def _mape(fams, which=0, only=None):
    vals = [v for f, pair in fams.items() if only in (None, f) for v in pair[which]]
    return sum(vals) / len(vals)


def test_datasheet_stays_accurate(systems):
    assert _mape(systems["datasheet"]) <= 0.035
    assert _mape(systems["datasheet"], which=1) <= 0.003


def test_clock_ratio_makes_the_calibrated_rows_more_accurate_on_every_family(systems):
    for fam in FAMILY.values():
        assert _mape(systems["calibrated"], only=fam) < _mape(systems["calibrated_off"], only=fam)
    assert _mape(systems["calibrated"]) <= 0.032          # 5.0 % without the ratio
    assert _mape(systems["calibrated"], which=1) <= 0.003


def test_calibrated_beats_datasheet_on_dense(systems):
    assert _mape(systems["calibrated"], only="dense") < _mape(systems["datasheet"], only="dense")


@pytest.mark.xfail(strict=True, reason=(
    "known gap: on MoE and CP the datasheet scalars (grouped-GEMM mean pulled down by tiny-M shapes, attention "
    "block curve that ignores sequence length) sit below the exact-shape measurements and so hide work the "
    "workload misses; see the H3 report"))
def test_calibrated_beats_datasheet_on_every_family(systems):
    for fam in FAMILY.values():
        assert _mape(systems["calibrated"], only=fam) < _mape(systems["datasheet"], only=fam)
