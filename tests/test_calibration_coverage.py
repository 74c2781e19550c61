"""coverage(scenario): which share of the op time each op kind prices from measured points."""

from __future__ import annotations

import copy

import pytest

from simengine import presets
from simengine.calibration import calibrate
from simengine.config import load_scenario
from simengine.coverage import CLASSES, coverage
from simengine.workload.builder import build_workload
from simengine.workload.ops import Gemm

from scenarios import VALIDATION


def _cfg():
    return copy.deepcopy(presets.size_scenario("small"))


def _gemm_shapes(sc):
    wl = build_workload(sc)
    seen = {}
    for ph in wl.blocks.values():
        for op in (*ph.fwd, *ph.bwd, *ph.wgt):
            if isinstance(op, Gemm):
                seen[(op.m, op.n, op.k, op.b, op.layout)] = op
    return list(seen.values())


def test_uncalibrated_scenario_is_all_default():
    cov = coverage(load_scenario(_cfg()))
    assert {"gemm", "attention", "memory_bound", "total"} <= set(cov)
    for kind, row in cov.items():
        assert row["default"] == pytest.approx(1.0), kind
        assert sum(row[c] for c in CLASSES) == pytest.approx(1.0)


def test_measuring_every_gemm_shape_makes_gemm_measured_and_half_interpolates():
    cfg = _cfg()
    sc = load_scenario(cfg)
    shapes = _gemm_shapes(sc)
    rows = "\n".join(f"{g.m},{g.n},{g.k},{g.b},{g.layout},0.6" for g in shapes)
    system = calibrate(sc.system, f"m,n,k,b,layout,efficiency\n{rows}\n")
    cfg["system"] = system.model_dump(mode="json")
    cov = coverage(load_scenario(cfg))
    assert cov["gemm"]["measured"] == pytest.approx(1.0)
    assert cov["attention"]["default"] == pytest.approx(1.0)
    assert 0 < cov["total"]["measured"] < 1
    # drop every other shape: those become interpolated or extrapolated, none default
    half = "\n".join(f"{g.m},{g.n},{g.k},{g.b},{g.layout},0.6" for g in shapes[::2])
    cfg["system"] = calibrate(sc.system, f"m,n,k,b,layout,efficiency\n{half}\n").model_dump(mode="json")
    g = coverage(load_scenario(cfg))["gemm"]
    assert 0 < g["measured"] < 1 and g["default"] == 0 and g["interpolated"] + g["extrapolated"] > 0


def test_collective_fit_counts_for_its_kind_and_tier(validation_dir):
    cfg = _cfg()
    sc = load_scenario(cfg)
    kinds = {k for k in coverage(sc) if k in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")}
    assert kinds, "the small scenario has TP collectives"
    log = (VALIDATION.parents[2] / "tests" / "data" / "calibration" / "nccl_logs" / "xxrjun-c01-n1g8_5coll_8gpu.log")
    cfg["system"] = calibrate(sc.system, None, [log]).model_dump(mode="json")
    cov = coverage(load_scenario(cfg))
    for k in kinds:
        assert cov[k]["default"] == 0 and cov[k]["measured"] + cov[k]["interpolated"] == pytest.approx(1.0)


def test_memory_bound_measured_only_when_named():
    sc = load_scenario(_cfg())
    assert coverage(sc)["memory_bound"]["default"] == 1
    assert coverage(sc, {"efficiency.hbm"})["memory_bound"]["measured"] == 1
