"""Engine calls run in a worker process (pure; no Streamlit). Each returns plain data: the
Report as a JSON dict, the timeline as compact DataFrames, or a search result as JSON (our own
child's output, sent back over a multiprocessing pipe; no user data is unpickled). Failures
become ``{"ok": False, "issues": [...]}`` exactly as ``ui.engine`` returns them. A task may
report progress: ``report(done, total)`` sends ``("progress", done, total)`` down the same pipe,
at most every ``PROGRESS_S`` (the server draws it; ``ui.worker``)."""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

# The lowest priority: a busy nice-0 thread of the server (a light page's script, the websocket
# and static-file thread) gets ~98 % of a core against a worker (CFS weights 1024 : 15; at nice 10
# it was 1024 : 110, ~90 %). Nice ranks processes within one autogroup (man 7 sched): the worker
# stays in the server's session, so the server's group as a whole keeps its fair share of a busy
# machine and heavy work is not starved by unrelated processes.
WORKER_NICE = 19
WORKER_MEMORY_BYTES = 3 * 2**30  # address-space cap of one worker: a runaway scenario fails, the server lives
WORKER_CPU_S = 150  # CPU-seconds cap (SIGXCPU): a backstop behind the server's 90 s wall-clock timeout
SEARCH_CPU_S = 200  # the same for a search (its wall-clock timeout: ui.worker.SEARCH_TIMEOUT_S)
PROGRESS_S = 0.2    # at most one progress message per this many seconds
BEST_S = 2.0        # at most one best-so-far search result per this many seconds


def _issues(e: BaseException) -> dict[str, Any]:
    from simengine.errors import ConfigError

    if isinstance(e, ConfigError):
        return {"ok": False, "issues": [list(i) for i in e.issues]}
    if isinstance(e, MemoryError):
        return {"ok": False, "issues": [["", "the engine ran out of memory on this scenario (worker limit "
                                              f"{WORKER_MEMORY_BYTES / 2**30:.0f} GiB)"]]}
    return {"ok": False, "issues": [["", f"the engine could not evaluate this scenario ({type(e).__name__}: {e})"]]}


def estimate(scenario_json: str, report=None) -> dict[str, Any]:
    try:
        from simengine.api import estimate_json

        return {"ok": True, "report": estimate_json(scenario_json)}
    except Exception as e:  # noqa: BLE001 — every failure becomes a message on the page
        return _issues(e)


def timeline(scenario_json: str, report=None) -> dict[str, Any]:
    try:
        import pandas as pd

        from simengine import api

        from .timeline_data import compact_spans, timeline_tables

        tables = timeline_tables(api.simulate(json.loads(scenario_json)))
        tables["spans"] = compact_spans(tables["spans"])
        mem = tables["memory"]
        if len(mem):
            tables["memory"] = _thin_memory(mem.assign(rank=pd.to_numeric(mem["rank"], downcast="integer")))
        tables["gantt_full"] = full_view(tables)
        return {"ok": True, **tables}
    except Exception as e:  # noqa: BLE001
        return _issues(e)


def full_view(tables: dict[str, Any]) -> tuple[Any, ...]:
    """The Gantt frame of the page's first view (whole step, default ranks), computed here so a
    heavy timeline costs the server's script thread nothing but drawing it; keyed as the page's
    ``ui.chart_cache.gantt_view`` asks for it."""
    from .timeline_data import MAX_GANTT_RANKS, gantt_frame, representative_ranks

    n = len(tables["ranks"])
    ranks = tuple(representative_ranks(tables["ranks"], n)) if n > MAX_GANTT_RANKS else None
    t1_ms = float(round(max(tables["step_time_s"] * 1e3, 1e-6), 3))
    return ((0.0, t1_ms), ranks, gantt_frame(tables["spans"], 0.0, t1_ms / 1e3, ranks=list(ranks) if ranks else None))


def _thin_memory(mem):
    """Each rank's memory series binned to ``MEMORY_POINTS`` (peaks kept, as the page draws it),
    in the input's columns: the pipe carries ~100× fewer rows for a deep pipeline, and the page's
    own ``memory_frame`` gives the same curve (max of bin maxima) from it."""
    import pandas as pd

    from .timeline_data import MEMORY_POINTS, memory_frame

    n = int(mem["rank"].nunique())
    thin = memory_frame(mem, max_points=MEMORY_POINTS, max_total=MEMORY_POINTS * max(n, 1))
    return pd.DataFrame({"rank": pd.to_numeric(thin["rank"], downcast="integer"), "t_s": thin["t_ms"] / 1e3,
                         "bytes": thin["GiB"] * 2**30})


def search(payload_json: str, report=None) -> dict[str, Any]:
    """A strategy search of the Search page: ``payload_json`` holds the scenario's model, system
    and fixed strategy fields (``base``) and the page's inputs (``ui.search_view``); the result
    as ``SearchResult.to_json()``. ``report(done, total)`` follows the search's progress."""
    try:
        from simengine import api
        from simengine.api import make_search_space

        from .search_inputs import parse_counts, parse_restrict

        p = json.loads(payload_json)
        inp = p["inputs"]
        space = make_search_space(p["model"], p["system"], global_batch=inp["global_batch"], seq_len=inp["seq_len"],
                                  gpus=parse_counts(inp["gpus"]), choices=parse_restrict(inp["restrict"]), base=p["base"])
        res = api.search(space, objective=inp["objective"], top=inp["top"], progress=report,
                         best_so_far=getattr(report, "best_so_far", None))
        return {"ok": True, "result": res.to_json()}
    except Exception as e:  # noqa: BLE001 — every failure becomes a message on the page
        return _issues(e)


def fit(scenario_json: str, report=None) -> dict[str, Any]:
    """The Search page's "smallest changes to make the current scenario fit" (``ui.search_fit``)."""
    try:
        from simengine import api
        from simengine.api import search_fit_changes

        cfg = json.loads(scenario_json)
        if api.estimate(cfg).fits:
            return {"ok": True, "fits": True, "changes": []}
        return {"ok": True, "fits": False, "changes": search_fit_changes(cfg)}
    except Exception as e:  # noqa: BLE001 — every failure becomes a message on the page
        return _issues(e)


def check_run(payload_json: str, report=None) -> dict[str, Any]:
    """The Calibration page's training-log check (``ui.calibration_log``): ``payload_json`` holds
    the scenario, the log's text, the warm-up and whether to refit (``api.check_run``)."""
    try:
        from simengine import api

        p = json.loads(payload_json)
        return {"ok": True, "result": api.check_run(p["scenario"], p["log"], p["warmup"], p["refit"])}
    except Exception as e:  # noqa: BLE001 — every failure becomes a message on the page
        return _issues(e)


TASKS = {"estimate": estimate, "timeline": timeline, "search": search, "fit": fit, "check_run": check_run}
CPU_S = {"search": SEARCH_CPU_S}  # per kind, else WORKER_CPU_S


def lower_priority() -> None:
    """This process to ``WORKER_NICE`` (never raises: best effort where nice is unavailable)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, 0, max(WORKER_NICE, os.getpriority(os.PRIO_PROCESS, 0)))


def _reporter(conn):
    """``report(done, total)`` for a task: a ``("progress", done, total)`` message at most every
    ``PROGRESS_S``, and always the last one (done == total); never asks the search to stop (the
    server stops a search by killing this process). ``report.best_so_far(result)``: a search's
    ``("best", result JSON)`` at most every ``BEST_S`` — what the server shows if it has to stop
    the search at its time limit."""
    import time

    last = [0.0, 0.0]

    def report(done: int, total: int) -> bool:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_S or done >= total:
            last[0] = now
            conn.send(("progress", int(done), int(total)))
        return False

    def best_so_far(result) -> None:
        now = time.monotonic()
        if now - last[1] >= BEST_S and result.candidates:
            last[1] = now
            conn.send(("best", result.to_json()))

    report.best_so_far = best_so_far  # type: ignore[attr-defined]
    return report


def child_main(kind: str, scenario_json: str, conn) -> None:
    """Entry point of a worker process: lower priority, cap memory and CPU time, run, send the result."""
    lower_priority()
    cpu = CPU_S.get(kind, WORKER_CPU_S)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    except (ImportError, ValueError, OSError):
        pass
    try:
        conn.send(TASKS[kind](scenario_json, _reporter(conn)))
    except MemoryError as e:
        conn.send(_issues(e))
    finally:
        conn.close()
