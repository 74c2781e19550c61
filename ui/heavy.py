"""The session side of ``ui.worker``: decide light or heavy, show progress with a Cancel button,
keep finished heavy results in a small server-wide cache (they are expensive to recompute)."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import streamlit as st

from . import worker
from .timeline_data import frame_bytes

CACHE_ENTRIES = 6
MAX_CACHED_BYTES = 64 * 2**20  # per cached heavy timeline
_CACHE: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
LABELS = {"estimate": "Estimating", "timeline": "Simulating the timeline of", "fit": "Looking for the smallest change that fits"}


def work(scenario_json: str) -> int:
    """``worker.work_units`` of a scenario (0 when it is not consistent: the engine then fails fast)."""
    from .engine import layout_figures

    f = layout_figures(scenario_json)
    if not f["ok"]:
        return 0
    s = json.loads(scenario_json)["strategy"]
    return worker.work_units(s["pp"], s["vpp"], f["figures"]["num_microbatches"])


def is_heavy(scenario_json: str) -> bool:
    return work(scenario_json) > worker.LIGHT_UNITS


def _cached(key: tuple[str, str]) -> dict[str, Any] | None:
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    return None


def _store(key: tuple[str, str], result: dict[str, Any]) -> None:
    if not result.get("ok"):
        return
    if key[0] == "timeline" and frame_bytes(result["spans"], result["ranks"], result["memory"]) > MAX_CACHED_BYTES:
        return
    with _CACHE_LOCK:
        _CACHE[key] = result
        while len(_CACHE) > CACHE_ENTRIES:
            _CACHE.popitem(last=False)


def _cancel(key: tuple[str, str]) -> None:
    st.session_state["worker.cancelled"] = list(key)


def _resume() -> None:
    st.session_state.pop("worker.cancelled", None)


def _session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def heavy(kind: str, scenario_json: str) -> dict[str, Any]:
    """Result of task ``kind`` for a heavy scenario: from the cache, else from a worker while a
    progress line and a Cancel button show; cancelled, busy or over budget → a message."""
    key = (kind, scenario_json)
    hit = _cached(key)
    if hit is not None:
        return hit
    if st.session_state.get("worker.cancelled") == list(key):
        st.button("Run it after all", key=f"worker.resume.{kind}", on_click=_resume, icon=":material/play_arrow:")
        return {"ok": False, "issues": [("", "Cancelled: this scenario is heavy (its pipeline has "
                                             f"{work(scenario_json):,} tasks to simulate), so it was stopped.")]}
    box = st.empty()
    with box.container():
        line = st.empty()
        line.info(f"{LABELS[kind]} a large scenario ({work(scenario_json):,} pipeline tasks) in a worker process…",
                  icon="⏳")
        st.button("Cancel", key=f"worker.cancel.{kind}", on_click=_cancel, args=(key,), icon=":material/stop:")

    def tick(elapsed: float) -> None:  # each update passes through Streamlit, which stops the run on any input
        line.info(f"{LABELS[kind]} a large scenario in a worker process… {elapsed:.0f} s", icon="⏳")

    spent = st.session_state.setdefault("worker.spent", {})
    try:
        result = worker.run(kind, scenario_json, _session_id(), spent, tick)
    except worker.Busy as e:
        result = {"ok": False, "issues": [("", str(e))]}
    box.empty()
    _store(key, result)
    return result


def run_search(payload: str, tick=None, progress=None) -> dict[str, Any]:
    """A Search page search (``ui.worker_tasks.search``) in a bounded worker process: niced, memory-
    and CPU-capped, its own timeout (``worker.SEARCH_TIMEOUT_S``), one heavy call per session and
    the session's budget of worker seconds; ``progress(done, total, elapsed_s)`` follows it and
    ``tick(elapsed_s)`` between its reports (either may raise: Streamlit stops the run on any input,
    and the child is killed). Busy or over budget → a message."""
    return run_task("search", payload, tick, progress)


def run_task(kind: str, payload: str, tick=None, progress=None) -> dict[str, Any]:
    """Worker task ``kind`` (``ui.worker_tasks.TASKS``) on ``payload`` in a bounded worker process,
    on this session's budget (``run_search``); busy or over budget → a message."""
    spent = st.session_state.setdefault("worker.spent", {})
    try:
        return worker.run(kind, payload, _session_id(), spent, tick, progress)
    except worker.Busy as e:
        return {"ok": False, "issues": [("", str(e))]}
