"""Uncertainty bands (simengine/uncertainty.py): every part at its low and high end together, and
communication hidden under compute widening the high end only."""

import pytest

from simengine.estimate import estimate
from simengine.uncertainty import _REL, GROUPED_REL, step_time_band

from scenarios import make


def test_the_band_moves_every_part_to_its_ends():
    sc = make("llama3-8b", system={"num_gpus": 8})
    parts = {"forward_compute": 1.0, "backward_compute": 2.0, "tp_comm": 0.5, "bubble": 0.25}
    lo, hi = step_time_band(parts, sc.system)
    c, m, b = _REL["compute"][1], _REL["comm"][1], _REL["bubble"][0]
    assert lo == pytest.approx(3.0 * (1 - c) + 0.5 * (1 - m) + 0.25 * (1 - b))
    assert hi == pytest.approx(3.0 * (1 + c) + 0.5 * (1 + m) + 0.25 * (1 + b))


def test_hidden_communication_widens_the_high_end_only():
    """A hidden collective longer by the communication's uncertainty may spill out from under its
    kernels (at most all of that extra); it can never make the step faster than modelled."""
    sc = make("llama3-8b", system={"num_gpus": 8})
    parts = {"forward_compute": 1.0, "backward_compute": 2.0, "dp_comm": 0.1}
    lo0, hi0 = step_time_band(parts, sc.system)
    lo1, hi1 = step_time_band(parts, sc.system, hidden_s=0.8)
    assert lo1 == lo0 and hi1 == pytest.approx(hi0 + 0.8 * _REL["comm"][1])


def test_an_estimate_that_hides_its_gradient_reduce_has_the_wider_band():
    """The same step with the DP reduce overlapped: its band's high end carries the hidden part."""
    cfg = {"system": {"num_gpus": 16}, "strategy": {"tp": 2, "global_batch_size": 64, "seq_len": 4096,
                                                    "overlap_grad_reduce": True}}
    rep = estimate(make("llama3-8b", **cfg))
    hidden = sum(rep.hidden_comm_s.values())
    assert hidden > 0
    lo, hi = step_time_band(rep.breakdown_s, make("llama3-8b", **cfg).system)
    assert rep.uncertainty["step_time_s"][0] == pytest.approx(lo)
    assert rep.uncertainty["step_time_s"][1] == pytest.approx(hi + hidden * _REL["comm"][1])



def test_no_band_promises_more_than_the_tensor_peak():
    """The band's fast end stops at the peak-bound: each GPU's share of the FLOPs a step executes
    (causal attention, recompute included) at the tensor peak (``estimate.peak_floor_s``). An
    estimate at ideal efficiencies (every kernel and link at its peak, no overheads) sits near
    it; a band that moved its compute 10 % below that would promise more than the hardware."""
    from simengine import presets
    from simengine.config import load_scenario
    from simengine.estimate import model_flops_per_step, peak_floor_s
    from simengine.uncertainty import bands

    cfg = presets.size_scenario("small")
    eff = cfg["system"].setdefault("efficiency", {})
    for k in ("gemm", "attention_fwd", "attention_bwd", "grouped_gemm", "hbm", "collective_scale_up",
              "collective_scale_out", "fp8_gemm"):
        eff[k] = 1.0
    eff.update(gemm_half_dim=0, kernel_overhead_us=0, collective_overhead_us=0)
    cfg["strategy"]["dtype"] = "bf16"
    sc = load_scenario(cfg)
    r = estimate(sc)
    floor = peak_floor_s(sc, model_flops_per_step(sc, causal=True) * r.hardware_flops_per_step / r.model_flops_per_step)
    lo, hi = r.uncertainty["step_time_s"]
    assert floor <= lo <= r.step_time_s <= hi and r.step_time_s < 1.5 * floor   # ideal: near the bound
    # its MFU band passes 100 % only by counting attention in full: a note says so
    assert r.uncertainty["mfu"][1] > 1.0 and any("attention's FLOPs in full" in n for n in r.notes)
    assert not estimate(load_scenario(presets.size_scenario("small"))).notes
    step = 1.05 * floor   # a step all compute, 5 % over the bound: its band's fast end would be 5.5 % under it
    got = bands(step, {"forward_compute": step}, sc.system, r.tokens_per_step, r.mfu, r.peak_memory_gib, floor_s=floor)
    assert got["step_time_s"][0] == floor and got["tokens_per_s"][1] == pytest.approx(r.tokens_per_step / floor)
    assert bands(r.step_time_s, {"forward_compute": r.step_time_s}, sc.system, 1.0, 0.5, 1.0, floor_s=2 * r.step_time_s)["step_time_s"][0] == r.step_time_s


def _log_spread(op: str) -> float:
    """Standard deviation of log(measured / modelled) efficiency over the bundled B200 shapes of
    ``op`` (plain ``matmul`` against the default curve, ``group_matmul`` against the scalar grouped
    level), the B200 preset without measured tables (a constant factor such as the clock leaves it alone)."""
    import csv
    import math
    import statistics
    from pathlib import Path

    from simengine import presets
    from simengine.cost.compute import ComputeModel
    from simengine.workload.ops import GroupedGemm

    system = presets.load_spec("systems", "b200-sxm-180gb")
    assert not system.efficiency.gemm_table and not system.efficiency.grouped_gemm_table
    cm = ComputeModel(system, "bf16")
    path = Path(__file__).resolve().parents[1] / "simengine" / "validation" / "data" / "b200_op_efficiency.csv"
    logs = []
    for r in csv.DictReader(path.open()):
        if r["table"] != "op_shape" or r["op"] != op:
            continue
        if op == "matmul":
            model = cm.gemm_efficiency(int(r["k_m"]), int(r["k_n"]), int(r["k_k"]), int(r["k_b"] or 1), r["k_layout"] or "TN")
        else:
            model = cm.grouped_efficiency(GroupedGemm("x", int(r["k_ng"]), int(r["k_M"]), int(r["k_N"]), int(r["k_K"])))
        logs.append(math.log(float(r["efficiency"]) / model))
    assert len(logs) > 100
    return statistics.pstdev(logs)


def test_the_grouped_half_width_is_the_measured_spread_of_the_grouped_pricing():
    """The module docstring's figures: the grouped pricing's spread against the measured B200
    shapes is about twice the plain GEMM curve's, and so is the grouped half-width."""
    plain, grouped = _log_spread("matmul"), _log_spread("group_matmul")
    assert plain == pytest.approx(0.15, abs=0.01) and grouped == pytest.approx(0.32, abs=0.01)
    assert GROUPED_REL / _REL["compute"][1] == pytest.approx(grouped / plain, rel=0.1)


def test_moe_experts_at_the_scalar_level_widen_the_band_and_a_measured_table_narrows_it_back():
    from simengine.estimate import grouped_scalar_share
    from simengine.cost.stage import build_plan

    cfg = {"system": {"num_gpus": 8}, "strategy": {"ep": 8, "global_batch_size": 16, "seq_len": 4096}}
    sc = make("mixtral-8x7b", **cfg)
    share = grouped_scalar_share(build_plan(sc).stages[0])
    assert 0.2 < share < 0.9   # the experts are most of a Mixtral layer's GEMMs
    rep = estimate(sc)
    lo, hi = step_time_band(rep.breakdown_s, sc.system, sum(rep.hidden_comm_s.values()), share)
    assert rep.uncertainty["step_time_s"] == pytest.approx((lo, hi))
    narrow = step_time_band(rep.breakdown_s, sc.system, sum(rep.hidden_comm_s.values()))
    compute = sum(rep.breakdown_s[k] for k in ("forward_compute", "backward_compute", "recompute") if k in rep.breakdown_s)
    widen = share * (GROUPED_REL - _REL["compute"][1]) * compute
    assert hi - narrow[1] == pytest.approx(widen) and narrow[0] - lo == pytest.approx(widen)
    # measured grouped shapes for every pass: the experts are no longer at the scalar level
    points = [{"layout": lay, "groups": 1, "m": 4096, "n": 14336, "k": 4096, "efficiency": 0.5} for lay in ("TN", "NN", "NT")]
    measured = make("mixtral-8x7b", **{**cfg, "system": {"num_gpus": 8, "efficiency": {"grouped_gemm_table": points}}})
    assert grouped_scalar_share(build_plan(measured).stages[0]) == 0.0
    # a dense model has none
    assert grouped_scalar_share(build_plan(make("llama3-8b", system={"num_gpus": 8})).stages[0]) == 0.0
