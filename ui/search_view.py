"""Search page helpers: the cached search call, the ranked table and the Pareto chart. Plain data
in and out; the search itself runs in a worker process (``ui.worker_tasks.search``, over
``simengine.api.search``), the inputs and the link token live in ``ui.search_inputs``."""

from __future__ import annotations

import hashlib
import threading
import json
import math
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from simengine.api import search_fixed_fields, time_and_cost_to_train
from simengine.api import SEARCH_FLAG_LABELS as FLAG_LABELS
from simengine.api import SEARCH_TIE_ON

from .search_inputs import (INPUT_KEYS, INPUT_RANGES, LINK_PARAM, MAX_TOKEN_CHARS, decode_inputs,  # noqa: F401 — re-exported
                            encode_inputs, parse_counts, parse_restrict)
from .text import csv_text

# the strategy fields the table shows as they are (after the GPU count, before the overlap flags)
STRATEGY_COLUMNS = ["tp", "pp", "vpp", "cp", "ep", "micro_batch_size", "zero_stage", "recompute", "cpu_offload_layers",
                    "schedule"]
LAYOUT_COLUMNS = ["gpus", *STRATEGY_COLUMNS, "overlap"]
# the grid's order (grid_options): the result first, the detail after
TABLE_COLUMNS = ["rank", "layout", "tokens_per_s", "mfu", "tie", "what_if", "headroom_gib", "band_lo", "band_hi", "us_per_launch",
                 "cost_per_million_tokens_usd", "peak_memory_gib", *LAYOUT_COLUMNS]


CACHE_ENTRIES = 16
_STORE_LOCK = threading.Lock()


@st.cache_resource(show_spinner=False)
def _store() -> dict[str, dict[str, Any]]:
    """Search results by their inputs, shared by the sessions of this server (plain JSON data).
    Not ``st.cache_data``: the search drives a progress bar created outside it."""
    return {}


def empty_reason(res: dict[str, Any]) -> str:
    """Why a search returned no candidate, as plain text for the page's banner: memory when some
    valid layout was rejected for it (``oom:``), else — when every rejection is an invalid layout —
    the most common reason with its example (more GPUs cannot help a space where the batch or the
    model cannot be split), else the rejections in general."""
    rejected: dict[str, int] = res.get("rejected", {})
    if any(k.startswith("oom") for k in rejected):
        return ("Nothing in this space fits in memory. Widen the space (more GPUs, fewer pins) or see "
                "the reasons below.")
    if rejected and all(k.startswith("invalid") for k in rejected):
        top = max(rejected, key=lambda k: (rejected[k], k))
        example = res.get("rejected_examples", {}).get(top, {}).get("reason", top)
        return (f"No layout in this space is valid for this model, batch and GPU count: the most common "
                f"reason ({rejected[top]:,} of {sum(rejected.values()):,} candidates) is \"{example}\". "
                "See every reason below.")
    return "No candidate in this space was kept: see the reasons below."


def search_base(strategy: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The scenario's strategy fields a search keeps fixed, and whether an explicit layer split was
    left out (``simengine.search.make.fixed_fields``: the CLI's ``--strategy`` reads the same)."""
    return search_fixed_fields(strategy)


def search_payload(model_json: str, system_json: str, base_json: str, inputs_json: str) -> str:
    """The worker's input (``ui.worker_tasks.search``): one canonical JSON text, also the cache key."""
    return json.dumps({"model": json.loads(model_json), "system": json.loads(system_json), "base": json.loads(base_json),
                       "inputs": json.loads(inputs_json)}, sort_keys=True, separators=(",", ":"))


def search_id(payload: str) -> str:
    """A short name of one search (its payload: the scenario and the inputs) for the widgets that
    hold a pick of its results (the grid, the Pareto chart, the Layout picker): keyed by it, a new
    search starts with nothing picked. Under one key a selection outlived its search (Streamlit
    keys a chart's selection and a selectbox's value on the key alone), so after another search
    the picker still named the old search's 3rd layout or chart point, and "Use this layout"
    loaded that row of the new search instead of #1."""
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def cached_result(payload: str) -> dict[str, Any] | None:
    """A finished search of these inputs on this server, or None."""
    return _store().get(payload)


def cached_search(payload: str, runner) -> dict[str, Any]:
    """``{"ok": True, "result": SearchResult JSON}`` (with ``"partial": why`` when the search was
    stopped at its time limit: the best timed so far) or ``{"ok": False, "issues": [...]}``, cached
    on the payload when it finished (a timeout or a busy server is worth trying again).
    ``runner(payload)`` runs the search (``ui.heavy.run_search``: in a bounded worker process)."""
    store = _store()
    hit = store.get(payload)
    if hit is not None:
        return hit
    out = runner(payload)
    if out.get("ok") and not out.get("partial"):  # a search stopped at its time limit is not kept
        # the sessions' threads share the store: the oldest entry is evicted under a lock, and one
        # another session took first is no KeyError (ui/heavy.py keeps its cache the same way)
        with _STORE_LOCK:
            while len(store) >= CACHE_ENTRIES:
                store.pop(next(iter(store)), None)
            store[payload] = out
    return out


def with_budget(cands: list[dict[str, Any]], tokens: float) -> list[dict[str, Any]]:
    """The candidates with the time and cost to train ``tokens`` (``simengine.api``'s one rule, as
    ``search --token-budget`` and the Estimate page compute them), for the table and the CSV."""
    out = []
    for c in cands:
        seconds, usd = time_and_cost_to_train(tokens, c["tokens_per_s"], c["cost_per_million_tokens_usd"])
        out.append({**c, "time_to_train_s": seconds, "cost_to_train_usd": usd})
    return out


def candidates_frame(cands: list[dict[str, Any]], ties: list[int]) -> pd.DataFrame:
    rows = []
    for i, c in enumerate(cands):
        s = c["strategy"]
        lo, hi = c["band"].get("tokens_per_s", [c["tokens_per_s"]] * 2)
        rows.append({"rank": i + 1, "layout": c["label"], "tokens_per_s": round(c["tokens_per_s"]), "band_lo": round(lo),
                     "band_hi": round(hi), "tie": i in ties, "what_if": bool(c.get("what_if")), "mfu": round(c["mfu"] * 100, 2),
                     "us_per_launch": round(c.get("gpu_us_per_launch", 0.0), 1),
                     "cost_per_million_tokens_usd": round(c["cost_per_million_tokens_usd"], 4),
                     "peak_memory_gib": round(c["peak_memory_gib"], 2), "headroom_gib": round(c["headroom_gib"], 2),
                     "gpus": c["gpus"], **{k: s.get(k) for k in STRATEGY_COLUMNS},
                     "overlap": "+".join(n for f, n in FLAG_LABELS if s.get(f)) or "none"})
        if "time_to_train_s" in c:   # a token budget was given (SearchResult.to_json)
            rows[-1].update(days_to_train=round(c["time_to_train_s"] / 86400, 2), usd_to_train=round(c["cost_to_train_usd"]))
    budget = any("time_to_train_s" in c for c in cands)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS + (BUDGET_COLUMNS if budget else []))


BUDGET_COLUMNS = ["days_to_train", "usd_to_train"]


# the CSV download: every number of a candidate unrounded, its band, then its whole strategy
RESULT_FIELDS = ["gpus", "tokens_per_s", "step_time_s", "mfu", "cost_per_million_tokens_usd", "cost_per_step_usd",
                 "peak_memory_gib", "reserved_memory_gib", "headroom_gib", "tight_stage", "gpu_us_per_launch", "what_if"]
BAND_FIELDS = ["tokens_per_s", "step_time_s", "mfu", "peak_memory_gib"]


def results_csv(cands: list[dict[str, Any]], ties: list[int]) -> str:
    """The ranked candidates as CSV (the page's download): rank, layout, tie with #1, every
    result field, each band's low and high, then every strategy field (lists joined by "+")."""
    keys = sorted({k for c in cands for k in c["strategy"]})
    fields = RESULT_FIELDS + (["time_to_train_s", "cost_to_train_usd"] if any("time_to_train_s" in c for c in cands) else [])
    head = ["rank", "layout", "tie", *fields, *(f"{b}.{e}" for b in BAND_FIELDS for e in ("low", "high")),
            *(f"strategy.{k}" for k in keys)]
    rows: list[list[Any]] = [head]
    for i, c in enumerate(cands):
        band = [x for b in BAND_FIELDS for x in (c.get("band", {}).get(b) or [None, None])]
        strat = ["+".join(map(str, v)) if isinstance(v, list) else v for v in (c["strategy"].get(k) for k in keys)]
        rows.append([i + 1, c["label"], i in ties, *(c.get(k) for k in fields), *band, *strat])
    return csv_text(rows)


def points_frame(cands: list[dict[str, Any]], pareto: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The ranked candidates followed by the Pareto points not among them; ``id`` = 1-based
    position in the returned list (the chart's selection key)."""
    seen = {(c["label"], c["order"]) for c in cands}
    items = list(cands) + [p for p in pareto if (p["label"], p["order"]) not in seen]
    df = candidates_frame(items, [])
    df.insert(0, "id", range(1, len(items) + 1))
    df["pareto"] = [any((c["label"], c["order"]) == (p["label"], p["order"]) for p in pareto) for c in items]
    df["place"] = [place(i, len(cands)) for i in range(len(items))]
    return df, items


PARETO_ONLY = "on the Pareto front, not in the ranking shown"


def place(i: int, ranked: int) -> str:
    """Where item i of ``points_frame`` stands: its rank among the ``ranked`` candidates shown, or
    that it is a Pareto point beyond them (its rank in the whole space is not known)."""
    return f"#{i + 1}" if i < ranked else PARETO_ONLY


def item_labels(items: list[dict[str, Any]], ranked: int) -> list[str]:
    """The Layout picker's labels: "#rank layout", or "(Pareto) layout" past the ranked ones."""
    return [f"#{i + 1} {c['label']}" if i < ranked else f"(Pareto) {c['label']}" for i, c in enumerate(items)]


GRID_MAX_PX = 460
LABEL_CHARS_PER_LINE = 40   # of a layout label in its 270 px column (a 56-character label wraps once)


def grid_height(labels: list[str]) -> int:
    """The ranked grid's height in px: its two header rows and each row as tall as its wrapped
    layout label (26 px a line), at most ``GRID_MAX_PX`` (then it scrolls). ``70 + 30·rows``
    assumed one-line rows: with four two-line rows only two were in view."""
    rows = sum(8 + 26 * max(1, math.ceil(len(s) / LABEL_CHARS_PER_LINE)) for s in labels)
    return min(GRID_MAX_PX, 125 + rows)


# AG Grid's value-formatter expression (its expression service: a string, not JsCode, so no
# unsafe JavaScript is enabled; our own text, no user data): thousands separators on whole
# numbers, the sort and the filter still on the number
GROUPED = "value == null ? '' : Number(value).toLocaleString('en-US')"
GROUPED_COLUMNS = ("tokens_per_s", "band_lo", "band_hi", "usd_to_train", "gpus")


def tie_on(objective: str) -> str:
    """The band a search's ties are read on (the engine's ``rank.TIE_ON``): tokens/s for the
    throughput objectives, free memory for the headroom one, …"""
    return SEARCH_TIE_ON.get(objective, "tokens/s")


def tie_banner(n: int, objective: str, top: int | None = None) -> str:
    """The note over a ranking whose best ``n`` tie (``rank.ties``: read over the ranking shown,
    at most ``top`` rows). When all ``top`` rows tie, the count is the Top field's, not the
    space's: "25 candidates have …" read as the whole tie with Top = 25, and as 5 with Top = 5."""
    if top is not None and n >= top:
        return (f"All {n} candidates shown have a {tie_on(objective)} uncertainty band that reaches the best one's "
                "('tie with #1'): a tie, not a winner; more past them may tie too (a larger Top shows them).")
    return (f"{n} candidates have a {tie_on(objective)} uncertainty band that reaches the best one's "
            "('tie with #1'): a tie, not a winner.")


def grid_options(df: pd.DataFrame, objective: str = "tokens_per_s") -> dict[str, Any]:
    """AgGrid options: sortable, filterable, columns grouped into result / detail / layout."""
    def col(name, header, **kw):
        # 98 px and wrapping headers: in the 820 px grid of a 1,280 px window the result group
        # (tokens/s, MFU, tie, free memory) stays beside the pinned rank and layout; at AgGrid's
        # 200 px default only two of its columns did
        fmt = {"valueFormatter": GROUPED} if name in GROUPED_COLUMNS else {}
        return {"field": name, "headerName": header, "sortable": True, "filter": True, "resizable": True,
                "width": 98, "wrapHeaderText": True, "autoHeaderHeight": True, **fmt, **kw}

    return {"columnDefs": [
        # 270 px keeps the result group in view at 1,280 px; a longer label (a 16,384-GPU layout
        # with its split, cp and every flag, ~90 characters) wraps onto a second line, so rows that
        # differ only in their overlap flags never read alike; whole on hover too
        col("rank", "#", width=56, pinned="left", headerTooltip="Rank on the objective, best first; a rank whose band reaches "
            "#1's is ticked in 'tie with #1' (the CLI prints it '2 (tie)')"),
        col("layout", "layout", width=270, pinned="left", tooltipField="layout", wrapText=True, autoHeight=True),
        # what decides between layouts first: speed, whether it is a tie, and how close it runs to
        # the memory limit (a #1 with a few GiB free is a risk)
        {"headerName": "result", "children": [
            col("tokens_per_s", "tokens/s"), col("mfu", "MFU %"),
            col("tie", "tie with #1", headerTooltip=f"Its {tie_on(objective)} uncertainty band reaches the best one's: "
                "not clearly worse than #1 on the objective"),
            col("what_if", "what-if", width=74, headerTooltip="Its stack does not ship its pipeline schedule: priced with the stack's "
                "kernels as a what-if (the note above the table)"),
            col("headroom_gib", "free GiB", headerTooltip="GPU memory left free on the fullest stage: capacity − PyTorch's reserved pool − the memory outside PyTorch (the Estimate page's stage table)")]},
        {"headerName": "detail", "children": [
            col("band_lo", "band low", headerTooltip="tokens/s at the low end of the uncertainty band"),
            col("band_hi", "band high", headerTooltip="tokens/s at the high end of the uncertainty band"),
            # below ~50 µs the run risks waiting on the host (cost/launch.py)
            col("us_per_launch", "µs / kernel", headerTooltip=(
                "GPU work per kernel launch; below ~50 µs eager training risks waiting on the host (not modelled)")),
            col("cost_per_million_tokens_usd", "$ / 1M tokens"),
            *([col("days_to_train", "days to train"), col("usd_to_train", "$ to train")] if "days_to_train" in df.columns else []),
            col("peak_memory_gib", "peak GiB", headerTooltip="Allocated peak memory of the tightest stage")]},
        {"headerName": "layout", "children": [col(k, k) for k in LAYOUT_COLUMNS]},
    ], "defaultColDef": {"sortable": True, "filter": True}, "rowSelection": "single"}


def tick_decimals(values: pd.Series, ticks: int = 5) -> int:
    """Decimals that tell ``ticks`` evenly spaced ticks over ``values`` apart (at least 2, at most
    8): costs of near-equal layouts span a few hundredths of a cent, where 4 decimals printed one
    value under several ticks."""
    span = float(values.max() - values.min()) if len(values) else 0.0
    if not math.isfinite(span) or span <= 0:   # one value (a degenerate domain): its own 3 significant digits
        v = abs(float(values.iloc[0])) if len(values) else 0.0
        return min(max(2, 2 - math.floor(math.log10(v))), 8) if math.isfinite(v) and v > 0 else 2
    return min(max(2, -math.floor(math.log10(span / ticks))), 8)


def pareto_chart(front: pd.DataFrame) -> alt.Chart:
    """tokens/s vs cost per million tokens, colour = memory headroom; with one GPU count (cost per
    token then follows throughput: price × GPUs / tokens/s) tokens/s vs memory headroom instead.
    Hover shows the layout, a click selects the point (selection parameter ``pick``)."""
    pick = alt.selection_point(name="pick", fields=["id"], on="click")
    one_count = front["gpus"].nunique() <= 1
    # padded scales: the extreme points (the best one among them) sit inside the axes, not on
    # them; a grey rim keeps viridis' dark end visible on a dark background
    cost = alt.X("cost_per_million_tokens_usd:Q", title="USD per 1M tokens", scale=alt.Scale(zero=False, padding=16),
                 # formats on the axes and legend: one point (a degenerate domain) drew "82,994.000000"
                 axis=alt.Axis(format=f"$,.{tick_decimals(front['cost_per_million_tokens_usd'])}~f", tickCount=5))
    free = alt.X("headroom_gib:Q", title="free GiB on the fullest stage", scale=alt.Scale(zero=False, padding=16),
                 axis=alt.Axis(format=",.1f", tickCount=5))
    enc = {"x": free if one_count else cost,
           "y": alt.Y("tokens_per_s:Q", title="tokens/s", scale=alt.Scale(zero=False, padding=16), axis=alt.Axis(format=",.0f"))}
    if not one_count:
        enc["color"] = alt.Color("headroom_gib:Q", title="free GiB", scale=alt.Scale(scheme="viridis"), legend=alt.Legend(format=",.1f"))
    return alt.Chart(front).mark_circle(size=110, stroke="#9a9a9a", strokeWidth=1, **({"color": "#4c78a8"} if one_count else {})).encode(
        **enc,
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
        tooltip=[alt.Tooltip("place:N", title="rank"), alt.Tooltip("layout:N", title="layout"),
                 alt.Tooltip("tokens_per_s:Q", title="tokens/s", format=",.0f"),
                 alt.Tooltip("cost_per_million_tokens_usd:Q", title="USD per 1M tokens", format=",.4f"),
                 alt.Tooltip("headroom_gib:Q", title="free GiB", format=",.1f")],
    ).add_params(pick).properties(height=340)


def pareto_caption(front: pd.DataFrame, searched_counts: int = 1) -> str:
    """What the Pareto chart's axes hold and how far apart its points are: the axes start at the
    points, so a spread of a few tenths of a percent fills the plot. ``searched_counts``: how many
    GPU counts the search tried (a front of one count out of several says so: "One GPU count"
    read as if only one had been searched)."""
    if front.empty:
        return ""
    lo, hi = float(front["tokens_per_s"].min()), float(front["tokens_per_s"].max())
    spread = f"tokens/s from {lo:,.0f} to {hi:,.0f} ({(hi / lo - 1) * 100 if lo > 0 else 0:.1f} % apart; the axes start at the points)"
    if front["gpus"].nunique() <= 1:
        why = ("the cost per token follows the throughput (GPU price × GPUs / tokens/s), so the front trades "
               f"throughput against free memory. {spread[0].upper()}{spread[1:]}.")
        if searched_counts > 1:
            return (f"The front holds one GPU count ({int(front['gpus'].iloc[0]):,}) of the {searched_counts:,} searched: "
                    f"no layout of the other counts is on it. At one count {why}")
        return f"One GPU count: {why}"
    return f"Colour: free GiB on the fullest stage. {spread[0].upper()}{spread[1:]}."


def what_if_text(res: dict[str, Any]) -> str:
    """The note over a result with what-if rows (``SearchResult.what_if``'s sentence), '' when no
    row is a what-if; plain text (the page escapes it)."""
    said = res.get("what_if_summary", "")
    return f"Rows marked what-if: {said}" if said else ""


def latest_pick(saved: tuple | None, search: Any, grid: int | None, chart: int | None) -> tuple[tuple, int | None]:
    """(what to keep, the candidate index picked) from the table's and the chart's selections:
    each keeps its selection across reruns, so the one that changed since ``saved`` wins (the
    chart's used to override every later table click); ``saved`` from another search
    (``search``, its token) counts as nothing picked."""
    g0, c0, last = saved[1:] if saved and saved[0] == search else (None, None, None)
    if chart is not None and chart != c0:
        last = chart
    elif grid is not None and grid != g0:
        last = grid
    return (search, grid, chart, last), last
