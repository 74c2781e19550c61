"""Engine calls, cached on the scenario's canonical JSON text (``st.cache_data``).

Results are plain data (dicts / DataFrames), never engine objects, and errors come back as
``{"ok": False, "issues": [(field, message), ...]}`` so pages render a message, not a traceback.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import streamlit as st

from simengine.errors import ConfigError

from .derived import model_figures, scenario_figures, system_figures
from .timeline_data import timeline_tables

log = logging.getLogger("simengine.studio")


def _fail(e: BaseException) -> dict[str, Any]:
    if isinstance(e, ConfigError):
        return {"ok": False, "issues": list(e.issues)}
    log.exception("engine error")
    return {"ok": False, "issues": [("", f"the engine could not evaluate this scenario ({type(e).__name__}: {e})")]}


@st.cache_data(max_entries=256, show_spinner=False)
def estimate_report(scenario_json: str) -> dict[str, Any]:
    """``{"ok": True, "report": <Report as JSON dict>}`` or ``{"ok": False, "issues": [...]}``."""
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


@st.cache_data(max_entries=32, show_spinner=False)
def timeline(scenario_json: str) -> dict[str, Any]:
    """``{"ok": True, "spans", "ranks", "memory" (DataFrames), "step_time_s"}`` or issues."""
    try:
        tl = _simulate(scenario_json)
        return {"ok": True, **timeline_tables(tl)}
    except ImportError as e:
        return {"ok": False, "issues": [("", f"the timeline simulator is not available in this build ({e})")]}
    except Exception as e:  # noqa: BLE001
        return _fail(e)


def chrome_trace(scenario_json: str, name: str) -> bytes:
    """Chrome-trace JSON (Perfetto, chrome://tracing) of the simulated step.

    Not cached and free of session state: a download button calls it lazily, on click, outside
    the script thread (pass the scenario JSON captured while rendering)."""
    from simengine.sim.trace import to_chrome_trace

    tl = _simulate(scenario_json)
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
