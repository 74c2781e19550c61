"""Engine calls run in a worker process (pure; no Streamlit). Each returns plain data: the
Report as a JSON dict, or the timeline as compact DataFrames (our own child's output, sent back
over a multiprocessing pipe; no user data is unpickled). Failures become ``{"ok": False,
"issues": [...]}`` exactly as ``ui.engine`` returns them."""

from __future__ import annotations

import json
import os
from typing import Any

WORKER_NICE = 10  # heavy work yields the CPU to the server's script threads (light pages)
WORKER_MEMORY_BYTES = 3 * 2**30  # address-space cap of one worker: a runaway scenario fails, the server lives


def _issues(e: BaseException) -> dict[str, Any]:
    from simengine.errors import ConfigError

    if isinstance(e, ConfigError):
        return {"ok": False, "issues": [list(i) for i in e.issues]}
    if isinstance(e, MemoryError):
        return {"ok": False, "issues": [["", "the engine ran out of memory on this scenario (worker limit "
                                              f"{WORKER_MEMORY_BYTES / 2**30:.0f} GiB)"]]}
    return {"ok": False, "issues": [["", f"the engine could not evaluate this scenario ({type(e).__name__}: {e})"]]}


def estimate(scenario_json: str) -> dict[str, Any]:
    try:
        from simengine.api import estimate_json

        return {"ok": True, "report": estimate_json(scenario_json)}
    except Exception as e:  # noqa: BLE001 — every failure becomes a message on the page
        return _issues(e)


def timeline(scenario_json: str) -> dict[str, Any]:
    try:
        import pandas as pd

        from simengine import api

        from .timeline_data import compact_spans, timeline_tables

        tables = timeline_tables(api.simulate(json.loads(scenario_json)))
        tables["spans"] = compact_spans(tables["spans"])
        mem = tables["memory"]
        if len(mem):
            tables["memory"] = mem.assign(rank=pd.to_numeric(mem["rank"], downcast="integer"))
        return {"ok": True, **tables}
    except Exception as e:  # noqa: BLE001
        return _issues(e)


TASKS = {"estimate": estimate, "timeline": timeline}


def child_main(kind: str, scenario_json: str, conn) -> None:
    """Entry point of a worker process: lower priority, cap memory, run, send the result."""
    try:
        os.nice(WORKER_NICE)
    except OSError:
        pass
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    except (ImportError, ValueError, OSError):
        pass
    try:
        conn.send(TASKS[kind](scenario_json))
    except MemoryError as e:
        conn.send(_issues(e))
    finally:
        conn.close()
