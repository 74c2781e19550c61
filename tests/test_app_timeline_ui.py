"""Timeline page: the schedule switcher remembers vpp per schedule and says what changed; a
peak over the GPU's memory is an alert, with the memory figure's kind named."""

from __future__ import annotations

import numpy as np
import pytest
from app_walk import open_app, open_fold, scenario, texts
from ui.share import encode_token, size_canonical


def test_schedule_switch_remembers_vpp_and_says_so():
    at = open_app("pages/timeline.py", preset="medium")
    assert scenario(at)["strategy"]["vpp"] == 5
    at.button_group[0].set_value("1f1b").run()
    assert not at.exception
    assert scenario(at)["strategy"]["vpp"] == 1
    info = texts(at.info)
    assert "vpp 5 → 1" in info and "restores" in info
    at.button_group[0].set_value("interleaved").run()
    s = scenario(at)["strategy"]
    assert s["schedule"] == "interleaved" and s["vpp"] == 5
    assert "vpp 1 → 5" in texts(at.info)


def test_vpp_memory_is_forgotten_when_the_strategy_is_replaced():
    at = open_app("pages/timeline.py", preset="medium")
    at.button_group[0].set_value("1f1b").run()
    cfg = size_canonical("medium")
    cfg["strategy"].update(schedule="1f1b", vpp=1, global_batch_size=256)
    at.query_params["s"] = encode_token(cfg)  # another scenario arrives by link
    at.run()
    at.button_group[0].set_value("interleaved").run()
    assert scenario(at)["strategy"]["vpp"] == 2  # the default for a fresh strategy, not the old 5


def test_gpipe_peak_over_capacity_is_an_alert():
    cfg = size_canonical("medium")
    cfg["strategy"].update(schedule="gpipe", vpp=1)
    at = open_app("pages/timeline.py", s=encode_token(cfg))
    assert not at.exception, [e.value for e in at.exception]
    peak = next(m for m in at.metric if m.label.startswith("Allocated peak"))
    assert "allocated" in peak.label.lower()
    err = texts(at.error)
    assert "Does not fit" in err and "allocated" in err and "reserved" in err
    memory = next(ex for ex in at.expander if ex.label.startswith("Memory over the step"))
    assert memory.proto.expanded and len(at.get("vega_lite_chart")) == 2  # it shows where the step peaks
    ranks = next(ex for ex in at.expander if ex.label.startswith("Per rank"))
    assert ranks.proto.expanded and len(at.dataframe[0].value) == 4  # which ranks overflow, opened by itself


def test_memory_curves_of_a_fitting_step_are_drawn_on_demand():
    at = open_app("pages/timeline.py", preset="medium")
    memory = next(ex for ex in at.expander if ex.label.startswith("Memory over the step"))
    assert not memory.proto.expanded and len(at.get("vega_lite_chart")) == 1  # the Gantt only: nothing sent
    ranks = next(ex for ex in at.expander if ex.label.startswith("Per rank"))
    assert not ranks.proto.expanded and not at.dataframe  # every rank's figures on demand
    open_fold(at, "tl.memory.fits")
    assert len(at.get("vega_lite_chart")) == 2
    at.switch_page("pages/estimate.py").run()
    at.switch_page("pages/timeline.py").run()
    assert len(at.get("vega_lite_chart")) == 2  # it stays open as the user left it


def test_fitting_timeline_has_no_alert():
    at = open_app("pages/timeline.py", preset="medium")
    assert "Does not fit" not in texts(at.error)


def test_critical_column_is_text_not_none():
    """The per-rank table's critical column is a text column (yes / blank); formatted as a number
    its blank cells showed "None" for every non-critical rank."""
    import json
    at = open_app("pages/timeline.py", preset="medium")
    assert not at.dataframe  # folded while the step fits
    table = open_fold(at, "tl.rankfold.fits").dataframe[0]
    assert set(table.value["critical"]) == {"yes", ""}
    config = json.loads(table.proto.columns)
    assert config.get("critical", {}).get("type_config", {}).get("type") != "number"


def test_dualpipe_switch_error_names_the_field():
    """pp=1 cannot run dualpipe: the switcher's error names strategy.pp (the model validator's
    message carries pp=1; the field list maps it), not just the section."""
    cfg = size_canonical("medium")
    cfg["strategy"].update(schedule="1f1b", pp=1, vpp=1, decoder_first_pipeline_num_layers=None,
                           decoder_last_pipeline_num_layers=None, pipeline_layers=None)
    at = open_app("pages/timeline.py", s=encode_token(cfg))
    assert not at.exception, [e.value for e in at.exception]
    at.button_group[0].set_value("dualpipe").run()
    err = texts(at.error)
    assert "dualpipe needs an even pp" in err
    assert "strategy.pp" in err
    assert scenario(at)["strategy"]["schedule"] == "1f1b"


def test_vpp_notice_counts_dualpipe_chunks_from_the_schedule():
    """dualpipe and dualpipev hold two chunks per rank (Schedule.chunks_per_rank); the notice
    after switching from interleaved says so instead of "one chunk per rank"."""
    for name in ("dualpipev", "dualpipe"):
        at = open_app("pages/timeline.py", preset="medium")
        at.button_group[0].set_value(name).run()
        assert not at.exception, [e.value for e in at.exception]
        assert scenario(at)["strategy"]["schedule"] == name, texts(at.error)
        info = texts(at.info)
        assert "vpp 5 → 1" in info and f"{name} runs 2 chunks per rank" in info, info
        assert "one chunk" not in info


def test_memory_curve_reaches_the_step_end_and_keeps_each_peak():
    """The memory-over-the-step chart draws each rank up to the step's end (the binned series
    stopped at its last bin's first time, ~0.2 % short here) and still shows every rank's peak."""
    import json

    from ui.engine import timeline

    at = open_fold(open_app("pages/timeline.py", preset="medium"), "tl.memory.fits")
    assert not at.exception
    import pyarrow as pa

    frames = [pa.ipc.open_stream(d.data.data).read_all().to_pandas()
              for c in at.get("vega_lite_chart") for d in c.proto.datasets]
    shown = next(f for f in frames if {"rank", "t_ms", "GiB"} <= set(f.columns))
    tl = timeline(json.dumps(scenario(at)))
    step_ms = 1e3 * tl["step_time_s"]
    ends = shown.groupby("rank")["t_ms"].max()
    assert (ends >= step_ms - 1e-3).all(), (ends.to_dict(), step_ms)
    peaks = tl["memory"].groupby("rank")["bytes"].max() / 2**30
    assert np.allclose(shown.groupby("rank")["GiB"].max().to_numpy(), peaks.to_numpy(), atol=1e-3)


def test_the_schedule_caption_counts_stages_in_words():
    """It read "pp = 1 stages" for the small preset."""
    assert "pp = 1 stage · vpp = 1" in texts(open_app("pages/timeline.py").caption)
    assert "pp = 4 stages · vpp = 5 · " in texts(open_app("pages/timeline.py", preset="medium").caption)


def test_the_schedule_caption_counts_dualpipes_two_chunks():
    """dualpipe and dualpipev run two chunks per rank at vpp 1 (the Gantt's tooltips show chunk 0
    and 1): the caption read "vpp = 1" alone."""
    at = open_app("pages/timeline.py", preset="medium")
    at.button_group[0].set_value("dualpipev").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "pp = 4 stages · vpp = 1 (dualpipev runs 2 chunks per rank) · " in texts(at.caption)


def test_fsdp2_pools_count_in_the_timelines_fit_verdict():
    """FSDP2's all-gather buffers sit in another stream's pool: reserved beside the peak, not
    allocated (StageMemory.pools_gib). On a GPU with room for the peak but not for the pools too,
    the Timeline says what the Estimate page says: it does not fit, and its limit line leaves them out."""
    from ui.config_io import dumps
    from ui.engine import estimate_report

    cfg = size_canonical("small")
    cfg["strategy"].update(framework="torch-compile", zero_stage=3)
    stage = estimate_report(dumps(cfg))["report"]["memory_by_stage"][0]
    gpu = cfg["system"]["gpu"]
    gpu["memory_gib"] = stage["reserved_gib"] + float(gpu.get("non_torch_gib", 0.0)) - stage["pools_gib"] / 2
    assert not estimate_report(dumps(cfg))["report"]["fits"]
    at = open_app("pages/timeline.py", s=encode_token(cfg))
    assert not at.exception, [e.value for e in at.exception]
    err = texts(at.error)
    assert "Does not fit" in err and "reserved" in err


def test_a_what_if_schedule_is_said_as_on_the_estimate_page():
    """Switching to a schedule the stack does not ship (zb-h2 on Megatron-Core) showed its timeline
    without a word; the Estimate page says it is a what-if. The Timeline shows the estimate's
    warnings too (the fit ones it words itself)."""
    at = open_app("pages/timeline.py", preset="medium")
    assert "what-if" not in texts(at.warning)
    at.button_group[0].set_value("zb-h2").run()
    assert not at.exception, [e.value for e in at.exception]
    warned = texts(at.warning).replace("\\", "")   # md() escapes the colon
    assert "a what-if: Megatron-Core does not ship 'zb-h2'" in warned
    assert "does not fit" not in warned   # the fit verdict stays the page's own alert
    est = at.switch_page("pages/estimate.py").run()
    assert "a what-if: Megatron-Core does not ship 'zb-h2'" in texts(est.warning).replace("\\", "")


def _chart_frames(at) -> list:
    import pyarrow as pa

    return [pa.ipc.open_stream(d.data.data).read_all().to_pandas()
            for c in at.get("vega_lite_chart") for d in c.proto.datasets]


def test_memory_chart_draws_each_ranks_own_limit():
    """FSDP2's all-gather buffers sit in another stream's pool whose size differs by stage, so each
    stage may allocate a different amount (StageMemory.allocated_limit_gib): the chart drew one line,
    the strictest stage's, for every rank. Now one line per rank at its stage's limit, said so."""
    from ui.config_io import dumps
    from ui.engine import estimate_report

    cfg = size_canonical("medium")
    cfg["strategy"].update(framework="torch-compile", zero_stage=3)
    stages = estimate_report(dumps(cfg))["report"]["memory_by_stage"]
    want = {m["stage"]: m["allocated_limit_gib"] for m in stages}
    assert max(want.values()) - min(want.values()) > 0.01  # the stages' limits differ here
    at = open_fold(open_app("pages/timeline.py", s=encode_token(cfg)), "tl.memory.fits")
    assert not at.exception, [e.value for e in at.exception]
    rules = next(f for f in _chart_frames(at) if "limit" in f.columns)
    assert dict(zip(rules["rank"].astype(int), rules["limit"])) == pytest.approx(want, abs=1e-9)
    caption = texts(at.caption)
    assert "one per rank in its curve's colour" in caption
    assert ", ".join(f"rank {r} {v:,.2f}" for r, v in sorted(want.items())) + " GiB" in caption


def test_memory_chart_draws_one_labelled_limit_when_the_ranks_share_it():
    from ui.config_io import dumps
    from ui.engine import estimate_report

    stages = estimate_report(dumps(size_canonical("medium")))["report"]["memory_by_stage"]
    at = open_fold(open_app("pages/timeline.py", preset="medium"), "tl.memory.fits")
    rules = next(f for f in _chart_frames(at) if "limit" in f.columns)
    assert list(rules.columns) == ["limit"] and rules["limit"].tolist() == pytest.approx([stages[0]["allocated_limit_gib"]])
    assert "the same on every rank shown" in texts(at.caption)


def test_binned_caption_states_the_exposed_communication_the_estimate_reports():
    """The binned view's caption says what short exposed collectives between kernels add up to:
    the critical rank's exposed communication by kind and its share of the step, the figures of the
    Estimate page's breakdown (sim/metrics.py), not the bins' own sums."""
    from ui.config_io import dumps
    from ui.engine import estimate_report
    from ui.units import fmt_pct, fmt_time

    r = estimate_report(dumps(size_canonical("medium")))["report"]
    at = open_app("pages/timeline.py", preset="medium")
    assert not at.exception, [e.value for e in at.exception]
    caption = texts(at.caption)
    assert "each bar split by phase" in caption
    comm = {k: v for k, v in r["breakdown_s"].items() if k.endswith("_comm") and v > 0}
    assert f"exposed communication is TP comm {fmt_time(comm['tp_comm'])}, " in caption
    assert f"DP comm {fmt_time(comm['dp_comm'])}" in caption
    assert f"({fmt_pct(sum(comm.values()) / r['step_time_s'])} of the step)" in caption
