"""A studio server on 127.0.0.1 and headless Chromium, for the studio benchmarks (loopback only).

Used by benchmarks/bench_studio.py (input-to-idle) and benchmarks/load_studio.py (shared-server
load). Each server is its own process group, stopped on exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROME_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
# The status widget shows a running script only 500 ms after the run started (frontend StatusWidget,
# ``IO=500`` in streamlit 1.67's bundle), so "no status widget" alone passes during a short run's
# first half second; ``RunWatcher`` reads the end of the run from the websocket instead.
IDLE_JS = """() => !document.querySelector('[data-testid=stStatusWidget]')
    && !document.querySelector('[data-testid=stSkeleton]') && !document.querySelector('[data-stale=true]')
    && [...document.querySelectorAll('[data-testid=stVegaLiteChart]')].every(c => c.querySelector('svg, canvas'))"""
FINISHED = (0, 3)  # ForwardMsg.script_finished: FINISHED_SUCCESSFULLY, FINISHED_FRAGMENT_RUN_SUCCESSFULLY


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StudioServer:
    """``run_log``: log each script run's CPU time there (JSON lines, ``timed_streamlit.py``);
    ``profile_dir``: also its cProfile stats."""

    def __init__(self, extra_args: list[str] | None = None, start_timeout_s: float = 60,
                 run_log: Path | None = None, profile_dir: Path | None = None) -> None:
        self.port = free_port()
        self.run_log = run_log
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        launcher = ["-m", "streamlit"]
        if run_log is not None:
            launcher = [str(ROOT / "benchmarks" / "timed_streamlit.py"), str(run_log),
                        *(["--profile", str(profile_dir)] if profile_dir else [])]
        self.proc = subprocess.Popen(
            [sys.executable, *launcher, "run", "app.py", "--server.port", str(self.port), "--server.headless",
             "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none", *(extra_args or [])],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
            start_new_session=True)
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early: {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("streamlit did not become healthy")

    def runs(self) -> list[dict]:
        """The script runs logged so far (``run_log``), oldest first."""
        if self.run_log is None or not self.run_log.exists():
            return []
        return [json.loads(line) for line in self.run_log.read_text().splitlines() if line.strip()]

    def tail(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()

    def __enter__(self) -> StudioServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def chromium_path() -> str | None:
    """None for Playwright's own build, else a system Chromium; raises when there is neither."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        own = pw.chromium.executable_path
    if own and Path(own).exists():
        return None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    raise RuntimeError("no Chromium: run `python -m playwright install chromium`")


def on_forward_msg(page, handler) -> None:
    """Call ``handler(msg)`` with every ``ForwardMsg`` the page's server sends on its websocket."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    def frame(payload) -> None:
        if isinstance(payload, str):
            return
        msg = ForwardMsg()
        msg.ParseFromString(payload)
        handler(msg)

    page.on("websocket", lambda ws: ws.on("framereceived", frame))


class RunWatcher:
    """Counts the script runs a page's server finished, from the ForwardMsgs on its websocket
    (``script_finished``; a run stopped for a rerun does not count)."""

    def __init__(self, page) -> None:
        self.finished = 0
        on_forward_msg(page, self._msg)

    def _msg(self, msg) -> None:
        if msg.WhichOneof("type") == "script_finished" and msg.script_finished in FINISHED:
            self.finished += 1

    def wait(self, page, since: int, timeout_ms: int = 60_000) -> None:
        """Until a run after ``since`` finished on the server, then ``wait_idle`` (the browser drew it)."""
        deadline = time.monotonic() + timeout_ms / 1e3
        while self.finished <= since:
            if time.monotonic() > deadline:
                raise TimeoutError("no script run finished")
            page.wait_for_timeout(5)  # lets Playwright dispatch the websocket events
        wait_idle(page, timeout_ms)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux ``/proc``; [] elsewhere)."""
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def is_chromium(pid: int) -> bool:
    try:
        exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return b"chrom" in exe or b"headless_shell" in exe


def lower_priority_of(pids, nice: int = 19) -> None:
    """Renice processes (best effort); the children they start later inherit it."""
    for pid in pids:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, pid, nice)


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Until the script run finished and nothing on the page is stale, then two animation frames
    (the browser painted) and the same check again (a rerun that starts late is not missed)."""
    page.wait_for_function(IDLE_JS, timeout=timeout_ms)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.wait_for_function(IDLE_JS, timeout=timeout_ms)
