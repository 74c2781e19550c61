"""Studio layout helpers (pure): what the Search grid shows first, the sidebar's strategy line,
readable per-rank headers, the per-stage memory table's columns, side-stream legend colours."""

from __future__ import annotations

import pytest

import colorsys

import pandas as pd

from simengine.api import SEARCH_FLAG_LABELS
from ui.labels import STAGE_MEMORY_COLUMNS, stage_memory_fields
from ui.layout import OVERLAP_FLAGS, memory_knobs
from ui.search_view import TABLE_COLUMNS, candidates_frame, grid_options
from ui.theme import OFF_STREAM, TIME_COLORS, color_of, scale, tint
from ui.timeline_data import per_rank_view, rank_column_name

GRID_PX_AT_1280 = 820   # the main column of a 1,280 px window with the sidebar open


def _cand(i: int) -> dict:
    s = {"tp": 2, "pp": 1, "vpp": 1, "cp": 1, "ep": 1, "micro_batch_size": 1, "zero_stage": 1, "recompute": "none",
         "cpu_offload_layers": 0, "schedule": "1f1b"}
    return {"label": f"layout {i}", "tokens_per_s": 1000.0 - i, "band": {"tokens_per_s": [900.0, 1100.0]}, "mfu": 0.5,
            "cost_per_million_tokens_usd": 1.0, "peak_memory_gib": 180.0, "headroom_gib": 3.9, "gpus": 8, "strategy": s,
            "time_to_train_s": 86400.0, "cost_to_train_usd": 10.0}


def test_search_grid_shows_speed_tie_and_memory_headroom_beside_the_layout():
    """tokens/s, MFU, tie with #1, what-if (a schedule its stack does not ship) and free GiB come right after the pinned rank and layout and fit
    an 820 px grid (a #1 with 3.9 GiB free of 184 was out of view at 1,280 px); the rest follows."""
    df = candidates_frame([_cand(0), _cand(1)], [0, 1])
    defs = grid_options(df)["columnDefs"]
    pinned = [d for d in defs if d.get("pinned") == "left"]
    groups = {d["headerName"]: [c["field"] for c in d["children"]] for d in defs if "children" in d}
    assert [d["field"] for d in pinned] == ["rank", "layout"]
    assert list(groups) == ["result", "detail", "layout"]
    assert groups["result"] == ["tokens_per_s", "mfu", "tie", "what_if", "headroom_gib"]
    assert {"band_lo", "band_hi", "us_per_launch", "cost_per_million_tokens_usd", "peak_memory_gib",
            "days_to_train", "usd_to_train"} <= set(groups["detail"])
    first = next(d for d in defs if d.get("headerName") == "result")["children"]
    assert sum(d["width"] for d in pinned + first) <= GRID_PX_AT_1280
    # every column of the frame is in the grid once, sortable and filterable
    fields = [d["field"] for d in pinned] + [f for g in groups.values() for f in g]
    assert sorted(fields) == sorted(df.columns) and len(set(fields)) == len(fields)
    assert list(df.columns[:7]) == TABLE_COLUMNS[:7] == ["rank", "layout", "tokens_per_s", "mfu", "tie", "what_if", "headroom_gib"]
    assert all(c["sortable"] and c["filter"] for d in defs for c in d.get("children", [d]))


@pytest.mark.parametrize("objective,band", [("tokens_per_s", "tokens/s"), ("memory_headroom", "free memory"),
                                            ("mfu", "MFU"), ("cost_to_train", "cost per token")])
def test_the_tie_column_and_banner_name_the_band_the_tie_is_read_on(objective, band):
    """A memory-headroom search reads its ties on the free-memory band (rank._band): its tie column
    said "tokens/s band" beside the tokens/s band columns, so a tie that was slower than #1 on
    tokens/s looked like a wrong number."""
    from simengine.api import SEARCH_OBJECTIVES, SEARCH_TIE_ON
    from ui.search_view import tie_banner

    assert set(SEARCH_TIE_ON) == set(SEARCH_OBJECTIVES)
    tie = next(c for d in grid_options(candidates_frame([_cand(0)], [0]), objective)["columnDefs"]
               for c in d.get("children", []) if c["field"] == "tie")
    assert f"Its {band} uncertainty band" in tie["headerTooltip"]
    assert f"have a {band} uncertainty band" in tie_banner(3, objective)


def test_a_tie_of_every_row_shown_says_it_is_counted_over_the_rows_shown():
    """Ties are read over the ranking shown (rank.ties): with all Top rows a tie, "25 candidates
    tie" was the Top field's count (5 with Top = 5), not the space's; fewer rows than Top are the
    whole space's fitting layouts, and their count stands."""
    from ui.search_view import tie_banner

    assert tie_banner(3, "tokens_per_s", 10).startswith("3 candidates have a tokens/s")
    every = tie_banner(25, "tokens_per_s", 25)
    assert every.startswith("All 25 candidates shown have a tokens/s") and "more past them may tie too" in every


def test_sidebar_strategy_line_names_what_use_this_layout_changes():
    s = {"micro_batch_size": 2, "zero_stage": 3, "recompute": "full", "recompute_num_layers": 4, "cpu_offload_layers": 0,
         "overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": False}
    assert memory_knobs(s) == "mbs2 zero3 rc-full4 overlap grad+param"
    s.update(recompute="none", recompute_num_layers=None, cpu_offload_layers=6, overlap_grad_reduce=False,
             overlap_param_gather=False)
    assert memory_knobs(s) == "mbs2 zero3 rc-none offload6 no overlap"
    assert OVERLAP_FLAGS == SEARCH_FLAG_LABELS   # the Search page's layout labels' words


def test_per_rank_headers_are_words_with_units():
    ranks = pd.DataFrame({"rank": [0, 1], "critical": [True, False], "bubble_fraction": [0.1, 0.2],
                          "compute_s": [1.0, 1.0], "exposed_comm_s": [0.5, 0.4], "hidden_comm_s": [0.2, 0.1],
                          "peak_gib": [50.0, 40.0], "exposed:dp_comm": [0.3, 0.2], "exposed:tp_comm": [0.2, 0.2],
                          "exposed:pp_comm": [0.0, 0.0]})
    view = per_rank_view(ranks)
    assert list(view.columns) == ["rank", "critical", "bubble [%]", "compute [ms]", "exposed comm [ms]", "hidden comm [ms]",
                                  "peak [GiB]", "exposed DP comm [ms]", "exposed TP comm [ms]", "exposed PP p2p [ms]"]
    assert not any("_" in c or ":" in c for c in view.columns)
    assert view["exposed DP comm [ms]"].tolist() == [300.0, 200.0] and view["bubble [%]"].tolist() == [10.0, 20.0]
    assert view["critical"].tolist() == ["yes", ""]
    assert rank_column_name("exposed:new_comm") == "exposed new comm [ms]"


def test_stage_memory_table_shows_host_offload_only_when_used():
    stages = [{"stage": 0, "peak_gib": 50.0, "reserved_gib": 52.0, "activations_gib": 30.0, "inflight_microbatches": 4,
               "host_offload_gib": 0.0}]
    assert "host_offload_gib" not in stage_memory_fields(stages)
    assert "host_offload_gib" in stage_memory_fields([*stages, {**stages[0], "host_offload_gib": 2.5}])
    heads = [h for h, _ in STAGE_MEMORY_COLUMNS.values()]
    assert all(len(h) <= 11 and "[" not in h for h in heads) and all(tip for _, tip in STAGE_MEMORY_COLUMNS.values())


def _hue(color: str) -> float:
    return colorsys.rgb_to_hls(*(int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)))[0]


def _lightness(color: str) -> float:
    return colorsys.rgb_to_hls(*(int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)))[1]


def test_side_stream_communication_is_a_lighter_shade_of_its_kind():
    comm = [k for k in TIME_COLORS if k.endswith("_comm")]
    cats = comm + [k + OFF_STREAM for k in comm]
    domain, rng = scale(cats)
    colours = dict(zip(domain, rng))
    assert len(set(rng)) == len(rng)   # every legend entry its own colour
    for k in comm:
        base, side = colours[k], colours[k + OFF_STREAM]
        assert side == color_of(k + OFF_STREAM) == tint(base)
        assert _lightness(side) - _lightness(base) > 0.12 and abs(_hue(side) - _hue(base)) < 0.02
    assert tint("#000000", 0.5) == "#808080" and tint("#ef8a3c", 0.0) == "#ef8a3c"
