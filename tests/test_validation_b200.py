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
