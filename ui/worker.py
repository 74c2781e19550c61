"""Heavy engine calls off the script thread, bounded per server and per session.

A scenario's work is estimated before running it (``work_units``: simulated tasks per pipeline,
pp · vpp · micro-batches, measured at ~30 µs each on this machine: ``medium`` = 1,280 units,
35 ms; 1,024 layers at pp 8 · vpp 128 = 131,072 units, 4.4 s and ~530 MB). Light work
(≤ ``LIGHT_UNITS``) runs inline: a process round trip would cost more than it saves. Heavy work
runs in a child process forked from a ``forkserver`` (started once per server, engine
pre-imported), at most ``MAX_WORKERS`` at a time for the whole server, at most one per session
(a new call of a session waits for the one it supersedes to let go: ``SUPERSEDED_WAIT_S``),
under a per-call timeout and a per-session budget of worker seconds. The child runs niced with a
memory cap. The Search page's searches always run there (``kind = "search"``: a search's cost
depends on its space, not on one pipeline's size), under their own longer timeout, reporting
their progress down the pipe (``worker_tasks._reporter``). (A forkserver child would import the server's ``__main__``, the page
being run, as ``__mp_main__``: ``_no_main_in_children`` leaves it out.) While it runs the script thread polls, drawing the elapsed time: any interaction
(the Cancel button, another page) stops the script run, and the ``finally`` kills the child.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from typing import Any

LIGHT_UNITS = 8_192           # ≲ 0.25 s of engine time: inline
MAX_WORKERS = 2               # heavy engine calls running at once, whole server
TIMEOUT_S = 90.0              # per call
SEARCH_TIMEOUT_S = 180.0      # per search (deepseek-v3 on 16,384 GPUs, every dimension: ~75 s alone on this machine)
QUEUE_WAIT_S = 30.0           # waiting for a free worker before saying "busy"
# waiting for the session's superseded call to let go: with ``runner.fastReruns`` (Streamlit's
# default) a new run of the page starts on a new thread at once (AppSession.request_rerun stops
# the old ScriptRunner and makes another), while the old run is still unwinding — it stops at its
# next poll (``POLL_S``) and kills its child (ui/worker ``_run_child``)
SUPERSEDED_WAIT_S = 10.0
SESSION_BUDGET_S = 240.0      # worker seconds per session per window
BUDGET_WINDOW_S = 600.0
POLL_S = 0.2

_SLOTS = threading.BoundedSemaphore(MAX_WORKERS)
_INFLIGHT: set[str] = set()
_LOCK = threading.Lock()
_FREED = threading.Condition(_LOCK)  # a session's call let go of ``_INFLIGHT``
_CTX: Any = None


def work_units(pp: int, vpp: int, num_microbatches: int) -> int:
    return int(pp) * int(vpp) * int(num_microbatches)


def _context():
    global _CTX
    with _LOCK:
        if _CTX is None:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["simengine.api", "ui.worker_tasks", "ui.timeline_data"])
            _no_main_in_children()
            _CTX = ctx
        return _CTX


def _no_main_in_children() -> None:
    """Start worker children without re-running the server's ``__main__``. multiprocessing hands
    each child the parent's main module to import as ``__mp_main__`` (spawn.py
    ``get_preparation_data`` → ``prepare``); in a Streamlit server that is the page script being
    run (Streamlit runs each page as ``__main__``), so every worker first ran the whole Search or
    Estimate page in bare mode — 15 "missing ScriptRunContext" warnings a search, and the page's
    work — before its task. The tasks are ``ui.worker_tasks`` functions, imported by name: the
    main module is not needed."""
    from multiprocessing import spawn

    get = spawn.get_preparation_data
    if getattr(get, "_simengine_no_main", False):
        return

    def prep(name):
        data = get(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    prep._simengine_no_main = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = prep


class Busy(Exception):  # noqa: N818 — a message for the user, not a failure
    pass


def run(kind: str, scenario_json: str, session: str, spent: dict[str, Any], tick=None, progress=None) -> dict[str, Any]:
    """Run task ``kind`` in a worker; ``spent`` is the session's budget record (mutated);
    ``tick(elapsed_s)`` is called every ``POLL_S`` while waiting and ``progress(done, total,
    elapsed_s)`` for each progress message of the task (either may raise to cancel)."""
    now = time.monotonic()
    if now - spent.get("since", 0.0) > BUDGET_WINDOW_S:
        spent.update(since=now, seconds=0.0)
    if spent.get("seconds", 0.0) >= SESSION_BUDGET_S:
        wait = BUDGET_WINDOW_S - (now - spent["since"])
        raise Busy(f"this session used its {SESSION_BUDGET_S:.0f} s of heavy computation for now; "
                   f"try again in {wait / 60:.0f} min (light estimates and timelines are not limited)")
    _enter(session, tick)
    try:
        _acquire_slot(tick)
        try:
            return _run_child(kind, scenario_json, spent, tick, progress)
        finally:
            _SLOTS.release()
    finally:
        with _FREED:
            _INFLIGHT.discard(session)
            _FREED.notify_all()


def _enter(session: str, tick) -> None:
    """Hold the session's one place in flight. A call of the same session already there is one the
    user has moved on from (a new press of Search, another page: ``SUPERSEDED_WAIT_S``), so this
    waits for it to let go — polling ``tick`` meanwhile, so that this call too stops when the user
    moves on — and says "busy" only if it does not."""
    t0 = time.monotonic()
    while True:
        with _FREED:
            if session not in _INFLIGHT:
                _INFLIGHT.add(session)
                return
            left = SUPERSEDED_WAIT_S - (time.monotonic() - t0)
            if left <= 0:
                raise Busy("another heavy computation of this session is still running; wait for it or cancel it")
            _FREED.wait(min(POLL_S, left))
        if tick is not None:
            tick(time.monotonic() - t0)


def _acquire_slot(tick) -> None:
    """One of the server's ``MAX_WORKERS`` slots, waiting up to ``QUEUE_WAIT_S`` and polling
    ``tick`` meanwhile (a call waiting in the queue stops as soon as its user moves on)."""
    t0 = time.monotonic()
    while not _SLOTS.acquire(timeout=POLL_S):
        if time.monotonic() - t0 >= QUEUE_WAIT_S:
            raise Busy(f"the server is busy with other heavy scenarios ({MAX_WORKERS} at a time); try again shortly")
        if tick is not None:
            tick(time.monotonic() - t0)


_TOO_LONG = {
    "search": "this search took more than {s:.0f} s and was stopped; pin or restrict dimensions (e.g. tp=8, pp=8,16) "
              "or search fewer GPU counts to make it faster",
}
_TOO_LONG_DEFAULT = "this scenario took more than {s:.0f} s and was stopped; fewer layers, micro-batches or virtual stages make it faster"


def _limit(kind: str) -> float:
    return SEARCH_TIMEOUT_S if kind == "search" else TIMEOUT_S


def _run_child(kind: str, scenario_json: str, spent: dict[str, Any], tick, progress=None) -> dict[str, Any]:
    from .worker_tasks import child_main

    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=child_main, args=(kind, scenario_json, send), daemon=True)
    t0 = time.monotonic()
    proc.start()
    send.close()
    try:
        return _answer(kind, recv, proc, t0, tick, progress)
    finally:
        spent["seconds"] = spent.get("seconds", 0.0) + (time.monotonic() - t0)
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)


def _answer(kind: str, recv, proc, t0: float, tick, progress, clock=time.monotonic) -> dict[str, Any]:
    """Read the child's messages until its answer: ``("progress", done, total)`` goes to
    ``progress``, ``("best", result)`` is kept (a search's best so far), the final dict is the
    answer. Past the kind's time limit: the latest best so far as a partial answer
    (``"partial"``: why it stopped), else the limit's message; a child that died: its message."""
    limit = _limit(kind)
    best = None
    while True:
        ready = recv.poll(POLL_S)
        elapsed = clock() - t0
        if elapsed > limit:
            too_long = _TOO_LONG.get(kind, _TOO_LONG_DEFAULT).format(s=limit)
            if best is not None:
                return {"ok": True, "partial": too_long, "result": best, "issues": []}
            return {"ok": False, "issues": [("", too_long)]}
        if not ready:
            if not proc.is_alive() and not recv.poll(0):
                return {"ok": False, "issues": [("", f"the engine worker stopped (exit code {proc.exitcode}) on this "
                                                     "scenario, probably out of memory")]}
            if tick is not None:
                tick(elapsed)
            continue
        try:
            msg = recv.recv()
        except (EOFError, OSError):  # the child died before answering (killed, out of memory, bad start)
            proc.join(1)
            return {"ok": False, "issues": [("", f"the engine worker stopped (exit code {proc.exitcode}) before "
                                                 "answering, probably out of memory")]}
        if isinstance(msg, tuple):  # ("progress", done, total) or ("best", result): our own child's messages
            if msg[0] == "best":
                best = msg[1]
            elif progress is not None:
                progress(msg[1], msg[2], elapsed)
            continue
        msg["issues"] = [tuple(i) for i in msg.get("issues", [])]
        return msg
