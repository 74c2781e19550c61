"""Engine calls, cached on the scenario's canonical JSON text (``st.cache_data``).

Results are plain data (dicts / DataFrames), never engine objects, and errors come back as
``{"ok": False, "issues": [(field, message), ...]}`` so pages render a message, not a traceback.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pandas as pd
import streamlit as st

from simengine.errors import ConfigError

from .derived import model_figures, scenario_figures, system_figures
from .timeline_data import compact_spans, frame_bytes, timeline_tables

log = logging.getLogger("simengine.studio")

TIMELINE_CACHE_ENTRIES = 6
MAX_CACHED_TIMELINE_BYTES = 48 * 2**20  # per cached timeline (spans, ranks, memory frames)
MAX_TRACE_SPANS = 300_000  # a Chrome trace of more spans is ~100 MB of JSON: not offered


def _fail(e: BaseException) -> dict[str, Any]:
    if isinstance(e, ConfigError):
        return {"ok": False, "issues": list(e.issues)}
    log.exception("engine error")
    return {"ok": False, "issues": [("", f"the engine could not evaluate this scenario ({type(e).__name__}: {e})")]}


def estimate_report(scenario_json: str) -> dict[str, Any]:
    """``{"ok": True, "report": <Report as JSON dict>}`` or ``{"ok": False, "issues": [...]}``.
    Light scenarios inline (cached); heavy ones in a worker process (``ui.heavy``)."""
    from .heavy import heavy, is_heavy

    return heavy("estimate", scenario_json) if is_heavy(scenario_json) else _estimate_inline(scenario_json)


@st.cache_data(max_entries=256, show_spinner=False)
def _estimate_inline(scenario_json: str) -> dict[str, Any]:
    try:
        from simengine.api import estimate_json

        return {"ok": True, "report": estimate_json(scenario_json)}
    except Exception as e:  # noqa: BLE001 — every failure becomes a message on the page
        return _fail(e)


def _simulate(scenario_json: str):
    from simengine import api

    sim = getattr(api, "simulate", None)
    if sim is None:
        raise ConfigError([("", "this engine build has no timeline simulator (simengine.api.simulate)")])
    return sim(json.loads(scenario_json))


def _timeline_compute(scenario_json: str) -> dict[str, Any]:
    try:
        tl = _simulate(scenario_json)
        tables = timeline_tables(tl)
        del tl  # the engine object holds the spans a second time
        tables["spans"] = compact_spans(tables["spans"])
        mem = tables["memory"]
        if len(mem):
            tables["memory"] = mem.assign(rank=pd.to_numeric(mem["rank"], downcast="integer"))
        return {"ok": True, **tables}
    except ImportError as e:
        return {"ok": False, "issues": [("", f"the timeline simulator is not available in this build ({e})")]}
    except Exception as e:  # noqa: BLE001
        return _fail(e)


class _NotCached(Exception):  # noqa: N818 — control flow: st.cache_data keeps no result that raised
    def __init__(self, result: dict[str, Any]):
        super().__init__("timeline too large to cache")
        self.result = result


@st.cache_data(max_entries=TIMELINE_CACHE_ENTRIES, show_spinner=False)
def _timeline_cached(scenario_json: str) -> dict[str, Any]:
    res = _timeline_compute(scenario_json)
    if res["ok"] and frame_bytes(res["spans"], res["ranks"], res["memory"]) > MAX_CACHED_TIMELINE_BYTES:
        raise _NotCached(res)
    return res


def timeline(scenario_json: str) -> dict[str, Any]:
    """``{"ok": True, "spans", "ranks", "memory" (DataFrames), "step_time_s"}`` or issues.

    Cached on the scenario JSON in at most ``TIMELINE_CACHE_ENTRIES`` entries of at most
    ``MAX_CACHED_TIMELINE_BYTES`` each (so the cache stays under ~300 MB); a larger timeline is
    simulated again on each rerun rather than held."""
    from .heavy import heavy, is_heavy

    if is_heavy(scenario_json):
        return heavy("timeline", scenario_json)
    try:
        return _timeline_cached(scenario_json)
    except _NotCached as e:
        return e.result


def chrome_trace(scenario_json: str, name: str) -> bytes:
    """Chrome-trace JSON (Perfetto, chrome://tracing) of the simulated step.

    Not cached and free of session state: a download button calls it lazily, on click, outside
    the script thread (pass the scenario JSON captured while rendering). Refuses a timeline of
    more than ``MAX_TRACE_SPANS`` spans (the page does not offer the download then)."""
    from simengine.api import chrome_trace as to_chrome_trace

    tl = _simulate(scenario_json)
    n = len(getattr(tl, "spans", ()) or ())
    if n > MAX_TRACE_SPANS:
        raise ValueError(f"the timeline has {n:,} spans; a Chrome trace is offered up to {MAX_TRACE_SPANS:,}")
    return json.dumps(to_chrome_trace(tl, name), separators=(",", ":")).encode()


@st.cache_data(max_entries=256, show_spinner=False)
def figures(section: str, section_json: str) -> dict[str, Any]:
    try:
        data = json.loads(section_json)
        fn = {"model": model_figures, "system": system_figures}[section]
        return {"ok": True, "figures": fn(data)}
    except Exception as e:  # noqa: BLE001
        return _fail(e)


@st.cache_data(max_entries=256, show_spinner=False)
def layout_figures(scenario_json: str) -> dict[str, Any]:
    try:
        return {"ok": True, "figures": scenario_figures(json.loads(scenario_json))}
    except Exception as e:  # noqa: BLE001
        return _fail(e)
