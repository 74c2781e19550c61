"""Search page helpers: inputs ⇄ link token, the cached search call, the ranked table and the
Pareto chart. Plain data in and out; the engine call is ``simengine.api.search``."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from simengine.errors import ConfigError
from simengine.api import SEARCH_OBJECTIVES as OBJECTIVES
from simengine.api import SEARCH_DIMS as DIMS

LINK_PARAM = "search"
MAX_TOKEN_CHARS = 4000
INPUT_KEYS = ("gpus", "global_batch", "seq_len", "objective", "top", "restrict")
# the Search page's number inputs take these ranges (pages/search.py); a link outside them is refused
INPUT_RANGES = {"global_batch": (1, 100_000_000), "seq_len": (1, 16_777_216), "top": (1, 500)}
TABLE_COLUMNS = ["rank", "layout", "tokens_per_s", "band_lo", "band_hi", "tie", "mfu", "cost_per_million_tokens_usd",
                 "peak_memory_gib", "headroom_gib", "gpus", "tp", "pp", "vpp", "cp", "ep", "micro_batch_size", "zero_stage",
                 "recompute", "schedule"]


def parse_counts(text: str) -> list[int]:
    """"64" or "64,128" or "64..512" (doubling) → GPU counts; ConfigError naming the field."""
    text = (text or "").strip()
    try:
        if ".." in text:
            a, b = (int(x) for x in text.split("..", 1))
            out = []
            while 1 <= a <= b and len(out) < 64:
                out.append(a)
                a *= 2
        else:
            out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError([("search.gpus", f"'{text[:40]}' is not a GPU count list such as 64 or 64,128 or 64..512")]) from None
    if not out or any(g < 1 or g > 1_000_000 for g in out) or len(out) > 64:
        raise ConfigError([("search.gpus", "give 1 to 64 GPU counts between 1 and 1,000,000")])
    return out


def parse_restrict(text: str) -> dict[str, list[Any]]:
    """One restriction per line or ';': ``tp=4,8`` / ``recompute=none,full``; ConfigError naming the line."""
    out: dict[str, list[Any]] = {}
    for part in (text or "").replace("\n", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        name, eq, vals = part.partition("=")
        name = name.strip().removeprefix("strategy.")
        if not eq or name not in DIMS:
            raise ConfigError([("search.restrict", f"'{part[:60]}' is not DIMENSION=V1,V2 with a dimension among {', '.join(DIMS)}")])
        out[name] = [_value(v.strip()) for v in vals.split(",") if v.strip()]
        if not out[name]:
            raise ConfigError([("search.restrict", f"'{part[:60]}' lists no value")])
    return out


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def encode_inputs(inputs: dict[str, Any]) -> str:
    raw = json.dumps({k: inputs[k] for k in INPUT_KEYS}, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_inputs(token: str) -> dict[str, Any]:
    """Inputs of a search link; ConfigError for anything that is not one."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise ConfigError([("search", "the search link is too long or not text")])
    try:
        raw = zlib.decompressobj().decompress(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)), 20_000)
        data = json.loads(raw)
    except (ValueError, zlib.error, TypeError):
        raise ConfigError([("search", "the search link is damaged")]) from None
    if not isinstance(data, dict) or set(data) != set(INPUT_KEYS):
        raise ConfigError([("search", "the search link does not hold search inputs")])
    if data["objective"] not in OBJECTIVES or not all(isinstance(data[k], int) and not isinstance(data[k], bool)
                                                      and lo <= data[k] <= hi for k, (lo, hi) in INPUT_RANGES.items()):
        raise ConfigError([("search", "the search link holds invalid values")])
    if not isinstance(data["gpus"], str) or not isinstance(data["restrict"], str):
        raise ConfigError([("search", "the search link holds invalid values")])
    return data


CACHE_ENTRIES = 16


@st.cache_resource(show_spinner=False)
def _store() -> dict[str, dict[str, Any]]:
    """Search results by their inputs, shared by the sessions of this server (plain JSON data).
    Not ``st.cache_data``: the search drives a progress bar created outside it."""
    return {}


def cached_search(model_json: str, system_json: str, base_json: str, inputs_json: str, progress=None) -> dict[str, Any]:
    """``{"ok": True, "result": SearchResult JSON}`` or ``{"ok": False, "issues": [...]}``, cached on the inputs."""
    key = "\n".join((model_json, system_json, base_json, inputs_json))
    store = _store()
    if key not in store:
        out = _run(model_json, system_json, base_json, inputs_json, progress)
        while len(store) >= CACHE_ENTRIES:
            store.pop(next(iter(store)))
        store[key] = out
    return store[key]


def _run(model_json: str, system_json: str, base_json: str, inputs_json: str, progress) -> dict[str, Any]:
    from simengine import api
    from simengine.api import make_search_space as make_space

    inp = json.loads(inputs_json)
    try:
        space = make_space(json.loads(model_json), json.loads(system_json), global_batch=inp["global_batch"],
                           seq_len=inp["seq_len"], gpus=parse_counts(inp["gpus"]), choices=parse_restrict(inp["restrict"]),
                           base=json.loads(base_json))
        res = api.search(space, objective=inp["objective"], top=inp["top"], progress=progress)
    except ConfigError as e:
        return {"ok": False, "issues": list(e.issues)}
    return {"ok": True, "result": res.to_json()}


def candidates_frame(cands: list[dict[str, Any]], ties: list[int]) -> pd.DataFrame:
    rows = []
    for i, c in enumerate(cands):
        s = c["strategy"]
        lo, hi = c["band"].get("tokens_per_s", [c["tokens_per_s"]] * 2)
        rows.append({"rank": i + 1, "layout": c["label"], "tokens_per_s": round(c["tokens_per_s"]), "band_lo": round(lo),
                     "band_hi": round(hi), "tie": i in ties, "mfu": round(c["mfu"] * 100, 2),
                     "cost_per_million_tokens_usd": round(c["cost_per_million_tokens_usd"], 4),
                     "peak_memory_gib": round(c["peak_memory_gib"], 2), "headroom_gib": round(c["headroom_gib"], 2),
                     "gpus": c["gpus"], **{k: s.get(k) for k in TABLE_COLUMNS[11:]}})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def points_frame(cands: list[dict[str, Any]], pareto: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The ranked candidates followed by the Pareto points not among them; ``id`` = 1-based
    position in the returned list (the chart's selection key)."""
    seen = {(c["label"], c["order"]) for c in cands}
    items = list(cands) + [p for p in pareto if (p["label"], p["order"]) not in seen]
    df = candidates_frame(items, [])
    df.insert(0, "id", range(1, len(items) + 1))
    df["pareto"] = [any((c["label"], c["order"]) == (p["label"], p["order"]) for p in pareto) for c in items]
    return df, items


def grid_options(df: pd.DataFrame) -> dict[str, Any]:
    """AgGrid options: sortable, filterable, columns grouped into result / memory / layout."""
    def col(name, header, **kw):
        return {"field": name, "headerName": header, "sortable": True, "filter": True, "resizable": True, **kw}

    return {"columnDefs": [
        col("rank", "#", width=70, pinned="left"), col("layout", "layout", width=430, pinned="left"),
        {"headerName": "throughput", "children": [col("tokens_per_s", "tokens/s"), col("band_lo", "band low"),
                                                  col("band_hi", "band high"), col("tie", "tie with #1"), col("mfu", "MFU %")]},
        {"headerName": "cost & memory", "children": [col("cost_per_million_tokens_usd", "$ / 1M tokens"),
                                                     col("peak_memory_gib", "peak GiB"), col("headroom_gib", "free GiB")]},
        {"headerName": "layout", "children": [col(k, k) for k in TABLE_COLUMNS[10:]]},
    ], "defaultColDef": {"sortable": True, "filter": True}, "rowSelection": "single"}


def pareto_chart(front: pd.DataFrame) -> alt.Chart:
    """tokens/s vs cost per million tokens, colour = memory headroom; hover shows the layout,
    a click selects the point (selection parameter ``pick``)."""
    pick = alt.selection_point(name="pick", fields=["id"], on="click")
    return alt.Chart(front).mark_circle(size=110).encode(
        x=alt.X("cost_per_million_tokens_usd:Q", title="USD per 1M tokens", scale=alt.Scale(zero=False)),
        y=alt.Y("tokens_per_s:Q", title="tokens/s", scale=alt.Scale(zero=False)),
        color=alt.Color("headroom_gib:Q", title="free GiB", scale=alt.Scale(scheme="viridis")),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
        tooltip=["id:Q", "layout:N", alt.Tooltip("tokens_per_s:Q", format=",.0f"), "cost_per_million_tokens_usd:Q", "headroom_gib:Q"],
    ).add_params(pick).properties(height=340)
