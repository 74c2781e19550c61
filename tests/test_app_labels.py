"""One memory figure with its label (allocated peak, reserved shown as such) and the MFU
convention stated wherever MFU is shown."""

from __future__ import annotations

import pytest

from app_walk import open_app, open_fold, texts
from ui.engine import estimate_report
from ui.labels import fits
from ui.share import size_canonical


def _metric(at, prefix):
    return next(m for m in at.metric if m.label.startswith(prefix))


@pytest.mark.parametrize("path", ["pages/home.py", "pages/estimate.py"])
def test_memory_headline_is_the_allocated_peak_and_says_so(path):
    from ui.config_io import dumps

    at = open_app(path, preset="medium")
    r = estimate_report(dumps(size_canonical("medium")))["report"]
    m = _metric(at, "Allocated peak")
    assert m.label == "Allocated peak"
    assert f"{r['peak_memory_gib']:,.1f}" in m.value and f"{r['reserved_memory_gib']:,.1f}" not in m.value
    assert "Reserved" in m.proto.help and f"{r['reserved_memory_gib']:,.1f}" in m.proto.help
    # the GPU memory left free: the engine's figure, the one the Search page's "free GiB" shows
    assert f"Left free on the GPU: {r['free_memory_gib']:,.1f} GiB" in m.proto.help
    assert "BF16 peak" in _metric(at, "MFU").proto.help and "6·N_active" in _metric(at, "MFU").proto.help


def test_uncertainty_band_names_the_same_memory_figure():
    at = open_app("pages/estimate.py", preset="medium")
    cap = texts(at.caption)
    assert "allocated peak memory" in cap
    assert "allocated peak" in texts(at.success) and "reserved" in texts(at.success)


def test_fit_rule_matches_the_engine():
    from ui.config_io import dumps

    seen = set()
    for size in ("small", "medium", "large"):
        cfg = size_canonical(size)
        r = estimate_report(dumps(cfg))["report"]
        worst = max(r["memory_by_stage"], key=lambda x: x["reserved_gib"])
        need = worst["reserved_gib"] + float(cfg["system"]["gpu"].get("non_torch_gib", 0.0))
        # each side of the boundary: a GPU just too small, and just large enough
        for cap in (need * (1 - 1e-3), need * (1 + 1e-3), float(cfg["system"]["gpu"]["memory_gib"])):
            cfg["system"]["gpu"]["memory_gib"] = cap
            r = estimate_report(dumps(cfg))["report"]
            worst = max(r["memory_by_stage"], key=lambda x: x["reserved_gib"])
            assert fits(worst["peak_gib"], cfg["strategy"], cfg["system"]) == r["fits"], (size, cap)
            seen.add(r["fits"])
    assert seen == {True, False}


def test_the_headline_limit_agrees_with_the_fit_verdict():
    """"77.9 / 79.1 GiB" beside "does not fit" (reserved 81.8 + 2.5 GiB outside PyTorch) read as
    fitting: the headline's figure after the slash is the allocated limit, so the peak is over it
    exactly when the stage does not fit (the Timeline's dashed line is the same limit)."""
    from ui.config_io import dumps
    from ui.labels import allocated_limit_gib

    for size in ("small", "medium", "large"):
        cfg = size_canonical(size)
        r = estimate_report(dumps(cfg))["report"]
        worst = max(r["memory_by_stage"], key=lambda x: x["reserved_gib"])
        for cap in (worst["reserved_gib"] * 1.02, float(cfg["system"]["gpu"]["memory_gib"]) * 1.5):
            cfg["system"]["gpu"]["memory_gib"] = cap
            limit = allocated_limit_gib(cfg["strategy"], cfg["system"])
            assert (worst["peak_gib"] <= limit) == fits(worst["peak_gib"], cfg["strategy"], cfg["system"])
    at = open_app("pages/estimate.py", preset="medium")
    cfg = size_canonical("medium")
    m = _metric(at, "Allocated peak")
    assert m.value.endswith(f" / {allocated_limit_gib(cfg['strategy'], cfg['system']):,.1f} GiB")
    assert "most a stage may allocate and still fit" in m.proto.help
    open_fold(at, "est.memory.fits")
    table = at.dataframe[0].value
    assert list(table["free"]) == [s["free_gib"] for s in estimate_report(dumps(cfg))["report"]["memory_by_stage"]]


def _fsdp2(size="small"):
    """A torch-native FSDP2 scenario: its all-gather buffers sit in another stream's pool
    (StageMemory.pools_gib > 0), reserved beside the peak but not allocated."""
    cfg = size_canonical(size)
    cfg["strategy"].update(framework="torch-compile", zero_stage=3)
    return cfg


def test_fit_rule_counts_other_streams_pools_as_the_engine_does():
    """FSDP2's pools are reserved, not allocated: the studio's fit rule and allocated limit take
    them from the report (StageMemory.pools_gib) and agree with the engine on each side of the
    boundary; the engine's own limit (StageMemory.allocated_limit_gib) is the same number."""
    from ui.config_io import dumps
    from ui.labels import allocated_limit_gib, headline_limit_gib, stage_pools_gib

    cfg = _fsdp2()
    r = estimate_report(dumps(cfg))["report"]
    stage = r["memory_by_stage"][0]
    assert stage["pools_gib"] > 0 and stage_pools_gib(r) == {0: stage["pools_gib"]}
    need = stage["reserved_gib"] + float(cfg["system"]["gpu"].get("non_torch_gib", 0.0))
    seen = set()
    for cap in (need * (1 - 1e-3), need * (1 + 1e-3)):
        cfg["system"]["gpu"]["memory_gib"] = cap
        r = estimate_report(dumps(cfg))["report"]
        stage = r["memory_by_stage"][0]
        assert fits(stage["peak_gib"], cfg["strategy"], cfg["system"], stage["pools_gib"]) == r["fits"]
        limit = allocated_limit_gib(cfg["strategy"], cfg["system"], stage["pools_gib"])
        assert limit == pytest.approx(stage["allocated_limit_gib"], rel=1e-12) == headline_limit_gib(r)
        assert (stage["peak_gib"] <= limit) == r["fits"]
        # without the pools the studio would call the tight GPU a fit
        assert fits(stage["peak_gib"], cfg["strategy"], cfg["system"]) or not r["fits"]
        seen.add(r["fits"])
    assert seen == {True, False}


def test_a_message_opening_with_a_field_name_keeps_its_case():
    """'Num_layers=32 is not divisible…' named no field: a sentence that opens with a field name or
    a value keeps it as written; plain words get their capital."""
    from ui.text import sentence_start

    assert sentence_start("num_layers=32 is not divisible by pp=3") == "num_layers=32 is not divisible by pp=3"
    assert sentence_start("seq_len/cp = 8192/2 is not divisible") == "seq_len/cp = 8192/2 is not divisible"
    assert sentence_start("this search took more than 180 s") == "This search took more than 180 s"
    assert sentence_start("") == ""


def test_the_estimate_says_when_another_rank_waits_longer_than_the_critical_one():
    """On `medium` the headline bubble (the critical rank's, 0.6 %) read as the pipeline's while
    three of four ranks wait 4.4-4.6 %: the report carries the largest, and the page says it."""
    from simengine import api
    from ui.labels import bubble_others
    from ui.share import size_canonical

    r = api.estimate(size_canonical("medium"))
    per_rank = r.bubble_fraction_max
    assert r.bubble_fraction < 0.01 < 0.04 < per_rank < 0.05
    assert bubble_others(r.model_dump()) == f" (up to {100 * per_rank:.1f} % on another rank)"
    assert bubble_others({"bubble_fraction": 0.02, "bubble_fraction_max": 0.0205}) == ""
