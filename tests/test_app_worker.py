"""Heavy engine calls run in a bounded worker process: light scenarios stay inline, heavy ones
are computed off the script thread, cancellable (the child is killed), with a per-call timeout,
one in flight per session and a per-session budget."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from app_walk import assert_workers_killed, open_page, texts
from ui import heavy, worker
from ui.config_io import apply_diff, dumps
from ui.share import encode_token, size_canonical
from ui.timeline_data import MAX_EXACT_SPANS

# 1,024 layers at pp 8 · vpp 128: 131,072 pipeline tasks (seconds of engine time, ~0.5 GB)
HEAVY = apply_diff(size_canonical("medium"), {"model": {"num_layers": 1024}, "strategy": {"pp": 8, "vpp": 128}})


def test_work_units_split_light_from_heavy():
    for size in ("small", "medium", "large"):
        assert not heavy.is_heavy(dumps(size_canonical(size)))
    assert heavy.work(dumps(HEAVY)) == 8 * 128 * 128 and heavy.is_heavy(dumps(HEAVY))


def test_light_scenarios_never_start_a_worker(monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("a light scenario went to a worker")

    monkeypatch.setattr(worker, "run", boom)
    at = open_page("pages/estimate.py", preset="medium")
    assert not at.exception and "Fits in memory" in texts(at.success)


def test_heavy_estimate_runs_in_a_worker_and_is_kept():
    heavy._CACHE.clear()
    at = open_page("pages/estimate.py", s=encode_token(HEAVY))
    assert not at.exception, [e.value for e in at.exception]
    assert ("estimate", dumps(HEAVY)) in heavy._CACHE  # computed by the worker path, then cached
    assert "Does not fit" in texts(at.error)
    spent = at.session_state["worker.spent"]
    assert spent["seconds"] > 0
    assert not [p for p in mp.active_children() if p.name.startswith("Process")]  # the child is gone


class Stop(Exception):
    pass


def test_cancel_kills_the_child():
    spent: dict = {}
    ticks = []

    def tick(elapsed):
        ticks.append(elapsed)
        raise Stop  # what Streamlit does to a script run when the user clicks Cancel or moves on

    with pytest.raises(Stop):
        worker.run("timeline", dumps(HEAVY), "s-cancel", spent, tick)
    assert ticks and "s-cancel" not in worker._INFLIGHT
    assert_workers_killed()


def test_timeout_stops_the_call(monkeypatch):
    monkeypatch.setattr(worker, "TIMEOUT_S", 0.3)
    res = worker.run("timeline", dumps(HEAVY), "s-timeout", {})
    assert not res["ok"] and "took more than" in res["issues"][0][1]


def test_one_heavy_call_per_session_and_a_budget(monkeypatch):
    monkeypatch.setattr(worker, "SUPERSEDED_WAIT_S", 0.3)
    worker._INFLIGHT.add("s-busy")
    try:
        with pytest.raises(worker.Busy, match="still running"):
            worker.run("estimate", dumps(HEAVY), "s-busy", {})
    finally:
        worker._INFLIGHT.discard("s-busy")
    spent = {"since": time.monotonic(), "seconds": worker.SESSION_BUDGET_S}
    with pytest.raises(worker.Busy, match="heavy computation for now"):
        worker.run("estimate", dumps(HEAVY), "s-budget", spent)
    assert worker._SLOTS._value == worker.MAX_WORKERS  # every slot was given back


def _let_go(session: str) -> None:
    """The superseded run of ``session`` letting go of its place, as ``worker.run``'s finally does."""
    with worker._FREED:
        worker._INFLIGHT.discard(session)
        worker._FREED.notify_all()


def test_a_new_call_waits_for_the_call_it_supersedes(monkeypatch):
    # Streamlit's fast reruns start the page's next run on a new thread while the old one still
    # unwinds (it kills its child first): pressing Search again must not answer "busy"
    events: list = []
    monkeypatch.setattr(worker, "_run_child", lambda *a, **k: events.append("ran") or {"ok": True, "issues": []})
    worker._INFLIGHT.add("s-again")

    def tick(elapsed):   # each progress tick says whether the superseded call still held its place
        events.append("waiting" if "s-again" in worker._INFLIGHT else "free")
        if events.count("waiting") == 2:   # the superseded call lets go while this one waits: no timer
            _let_go("s-again")             # racing the wait on a loaded machine
    try:
        res = worker.run("search", "{}", "s-again", {}, tick)
    finally:
        worker._INFLIGHT.discard("s-again")
    # it waited, drawing its progress meanwhile, and started only once the other had let go (the
    # order of events, not a clock reading: a loaded machine only makes the wait longer)
    assert res["ok"] and "waiting" in events and events[-1] == "ran" and "ran" not in events[:-1]
    assert "s-again" not in worker._INFLIGHT and worker._SLOTS._value == worker.MAX_WORKERS


def test_a_waiting_call_stops_when_its_user_moves_on(monkeypatch):
    monkeypatch.setattr(worker, "_run_child", lambda *a, **k: pytest.fail("a stopped call started a worker"))
    worker._INFLIGHT.add("s-wait")

    def tick(elapsed):
        raise Stop

    try:
        with pytest.raises(Stop):
            worker.run("search", "{}", "s-wait", {}, tick)
        assert "s-wait" in worker._INFLIGHT   # the call it waited for keeps its place
    finally:
        worker._INFLIGHT.discard("s-wait")
    assert worker._SLOTS._value == worker.MAX_WORKERS


def test_a_call_waiting_for_a_slot_polls_its_user(monkeypatch):
    monkeypatch.setattr(worker, "_run_child", lambda *a, **k: pytest.fail("no slot was free"))
    taken = [worker._SLOTS.acquire(timeout=1) for _ in range(worker.MAX_WORKERS)]
    ticks: list = []

    def tick(elapsed):
        ticks.append(elapsed)
        if len(ticks) > 2:
            raise Stop

    try:
        with pytest.raises(Stop):
            worker.run("search", "{}", "s-queue", {}, tick)
    finally:
        for ok in taken:
            if ok:
                worker._SLOTS.release()
    assert len(ticks) == 3 and "s-queue" not in worker._INFLIGHT
    assert worker._SLOTS._value == worker.MAX_WORKERS


def test_worker_thins_memory_series_and_keeps_every_ranks_peak():
    import numpy as np
    import pandas as pd

    from ui.timeline_data import MEMORY_POINTS, memory_frame
    from ui.worker_tasks import _thin_memory

    rng = np.random.default_rng(3)
    n = 40_000
    full = pd.DataFrame({"rank": np.repeat(np.arange(4), n), "t_s": np.tile(np.linspace(0, 2.0, n), 4),
                         "bytes": rng.uniform(1e9, 5e10, 4 * n)})
    thin = _thin_memory(full)
    assert list(thin.columns) == ["rank", "t_s", "bytes"] and len(thin) <= 4 * MEMORY_POINTS
    a, b = memory_frame(full), memory_frame(thin)
    assert np.allclose(a.groupby("rank")["GiB"].max(), b.groupby("rank")["GiB"].max())


def test_heavy_timeline_first_view_is_computed_by_the_worker(monkeypatch):
    import ui.chart_cache as cc

    def boom(*_a, **_k):
        raise AssertionError("the script thread aggregated a heavy timeline")

    monkeypatch.setattr(cc, "gantt_frame", boom)
    at = open_page("pages/timeline.py", s=encode_token(HEAVY))
    assert not at.exception, [e.value for e in at.exception]
    assert f"more than {MAX_EXACT_SPANS:,}" in texts(at.caption) and "Does not fit" in texts(at.error)
    assert len(at.get("vega_lite_chart")) >= 2


def _probe_priority(q) -> None:
    import os

    from ui.worker_tasks import lower_priority

    lower_priority()
    q.put(os.getpriority(os.PRIO_PROCESS, 0))


def test_a_worker_runs_at_the_lowest_priority():
    from ui.worker_tasks import WORKER_NICE

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_probe_priority, args=(q,))
    p.start()
    nice = q.get(timeout=30)
    p.join(10)
    assert nice == WORKER_NICE == 19


class _Pipe:
    """A worker's end of the pipe: the messages it sends, then nothing more."""

    def __init__(self, msgs):
        self.msgs = list(msgs)

    def poll(self, _timeout=0):
        return bool(self.msgs)

    def recv(self):
        return self.msgs.pop(0)


class _Alive:
    exitcode = None

    def is_alive(self):
        return True


def _clock(times):
    it = iter(times)
    return lambda: next(it)


def test_a_search_stopped_at_its_limit_answers_with_its_best_so_far(monkeypatch):
    """Past the search's time limit the server answers with the best result the worker sent so far
    (marked partial, with why), else with the limit's message; progress goes to the page."""
    monkeypatch.setattr(worker, "SEARCH_TIMEOUT_S", 10.0)
    best = {"candidates": [{"label": "x"}], "evaluated": 7}
    seen = []
    msgs = [("progress", 3, 9), ("best", {"candidates": [], "evaluated": 1}), ("best", best)]
    out = worker._answer("search", _Pipe(msgs), _Alive(), 0.0, None, lambda d, n, t: seen.append((d, n)),
                         clock=_clock([1.0, 2.0, 3.0, 11.0]))
    assert out["ok"] and out["result"] == best and "search took more than 10 s" in out["partial"]
    assert seen == [(3, 9)]
    out = worker._answer("search", _Pipe([("progress", 1, 2)]), _Alive(), 0.0, None, None, clock=_clock([1.0, 11.0]))
    assert not out["ok"] and "search took more than" in out["issues"][0][1]
    done = {"ok": True, "result": best, "issues": []}
    out = worker._answer("search", _Pipe([("best", best), done]), _Alive(), 0.0, None, None, clock=_clock([1.0, 2.0]))
    assert out is done and "partial" not in out   # a search that finishes answers with its result


_MAIN_CHECK = """
import json, os, sys, types
repo, marker = sys.argv[1], sys.argv[2]
sys.path.insert(0, repo)
os.chdir(repo)
page = os.path.join(os.path.dirname(marker), "page.py")
with open(page, "w") as f:
    f.write(f"open({marker!r}, 'a').write('ran')\\n")
m = types.ModuleType("__main__")
m.__file__, m.__spec__ = page, None
sys.modules["__main__"] = m  # what Streamlit does while it runs a page script
from ui import worker
from simengine import presets
res = worker.run("estimate", json.dumps(presets.size_scenario("small")), "s", {})
print(json.dumps({"ok": res.get("ok"), "main_ran": os.path.exists(marker)}))
"""


def test_a_worker_child_does_not_run_the_page_being_run(tmp_path):
    """multiprocessing hands a child the parent's ``__main__`` to import; in the server that is the
    page script Streamlit is running, which every worker re-ran in bare mode (the audit's 15
    "missing ScriptRunContext" warnings a search). A fresh interpreter, a page as ``__main__``
    that leaves a mark when run, one heavy-path estimate: done, and no mark."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "check.py"
    script.write_text(_MAIN_CHECK)
    out = subprocess.run([sys.executable, str(script), str(Path(__file__).resolve().parents[1]), str(tmp_path / "marker")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"ok": True, "main_ran": False}
