"""The measured B200 Megatron-LM runs (simengine/validation/data/b200_megatron_runs.csv): every row
runs, through the CLI too, and the error stays within today's bounds (a regression guard: the
README's table is produced by tools/readme_tables.py from ``simengine validate --json``)."""

import json

import pytest

from simengine.api import estimate
from simengine.cli import main
from simengine.validation import b200_runs
from simengine.validation.data import read_text
from simengine.validation.run import b200_system_for


@pytest.fixture(scope="module")
def data():
    csv_text = read_text("b200_megatron_runs.csv")  # bundled: a missing file fails here, never skips
    return b200_runs(csv_text, b200_system_for(False)), b200_runs(csv_text, b200_system_for(True))


def errors(runs):
    t, m = [], []
    for r in runs:
        rep = estimate(r.config)
        t.append(rep.step_time_s * 1e3 / r.real_ms - 1)
        m.append(rep.peak_memory_gib / r.real_alloc_gib - 1)
    return t, m


def test_all_rows_map_and_cover_the_families(data):
    plain, _ = data
    assert len(plain) == 20
    assert {r.family for r in plain} == {"llama3_70b", "deepseekv2", "llama3_70b_cp"}


def test_time_and_memory_error_bounds(data):
    plain, calibrated = data
    for runs, bound in ((plain, 0.04), (calibrated, 0.055)):
        t, m = errors(runs)
        assert sum(map(abs, t)) / len(t) < bound          # time MAPE (peer SimuMax: 7.1 %)
        assert max(map(abs, t)) < 0.18
        assert sum(map(abs, m)) / len(m) < 0.005          # memory MAPE (peer: 0.4 %)
        assert max(map(abs, m)) < 0.01


def test_beats_the_peer_on_these_rows(data):
    plain, _ = data
    t, m = errors(plain)
    peer_t = [r.peer_ms / r.real_ms - 1 for r in plain]
    peer_m = [r.peer_alloc_gib / r.real_alloc_gib - 1 for r in plain]
    assert sum(map(abs, t)) < sum(map(abs, peer_t))
    assert sum(map(abs, m)) < sum(map(abs, peer_m))


@pytest.mark.parametrize("family", ["llama3_70b", "deepseekv2", "llama3_70b_cp"])
def test_rows_run_through_the_cli(data, family, tmp_path, capsys):
    plain, _ = data
    run = next(r for r in plain if r.family == family)
    paths = {}
    for section in ("model", "system", "strategy"):
        p = tmp_path / f"{section}.json"
        p.write_text(json.dumps(run.config[section]))
        paths[section] = str(p)
    code = main(["estimate", "--model", paths["model"], "--system", paths["system"], "--strategy", paths["strategy"], "--json"])
    out = capsys.readouterr().out
    assert code == 0
    rep = json.loads(out)
    assert rep["step_time_s"] * 1e3 == pytest.approx(run.real_ms, rel=0.2)
    assert rep["peak_memory_gib"] == pytest.approx(run.real_alloc_gib, rel=0.01)


def test_uncertainty_band_covers_most_measured_runs(data):
    """The band is a claim about accuracy: it must hold on measured runs (today 18/20 and 16/20)."""
    for runs in data:
        inside = 0
        for r in runs:
            rep = estimate(r.config)
            lo, hi = rep.uncertainty["step_time_s"]
            assert lo < rep.step_time_s < hi
            inside += lo * 1e3 <= r.real_ms <= hi * 1e3
        assert inside >= 0.75 * len(runs)


def test_validation_rows_carry_the_estimates_band():
    """``validate --json`` rows carry the band the README's coverage table counts: a step time's is
    the report's step-time band in the row's unit, a memory row's ±MEMORY_REL, a rate's the inverse
    of the step-time band (a faster step raises it) and a per-layer time none."""
    from types import SimpleNamespace

    from simengine.uncertainty import MEMORY_REL
    from simengine.validation.bands import metric_band
    from simengine.validation.run import b200_rows

    rows = b200_rows()
    for r in rows:
        rep = estimate(r.scenario)
        lo, hi = r.band
        if r.metric == "step_time":
            assert (lo, hi) == pytest.approx(tuple(x * 1e3 for x in rep.uncertainty["step_time_s"]), rel=1e-12)
        else:
            assert (lo, hi) == pytest.approx((r.predicted * (1 - MEMORY_REL), r.predicted * (1 + MEMORY_REL)), rel=1e-12)
        assert lo <= r.predicted <= hi
    rep = SimpleNamespace(step_time_s=2.0, uncertainty={"step_time_s": (1.6, 2.5), "peak_memory_gib": (9.9, 10.1)},
                          peak_memory_gib=10.0)
    assert metric_band("peak_memory", 20.0, rep) == pytest.approx((19.8, 20.2))   # a reserved figure: the same width
    assert metric_band("tokens_per_sec_per_gpu", 1000.0, rep) == pytest.approx((800.0, 1250.0))
    assert metric_band("iteration_time", 2.0, rep) == pytest.approx((1.6, 2.5))
    assert metric_band("layer_forward_time", 5.0, rep) is None
