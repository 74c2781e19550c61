"""A studio server on 127.0.0.1 and headless Chromium, for the studio benchmarks (loopback only).

Used by benchmarks/bench_studio.py (input-to-idle) and benchmarks/load_studio.py (shared-server
load). Each server is its own process group, stopped on exit.
"""

from __future__ import annotations

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
IDLE_JS = """() => !document.querySelector('[data-testid=stStatusWidget]')
    && !document.querySelector('[data-testid=stSkeleton]') && !document.querySelector('[data-stale=true]')"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StudioServer:
    def __init__(self, extra_args: list[str] | None = None, start_timeout_s: float = 60) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(self.port), "--server.headless",
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


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Until the script run finished and nothing on the page is stale, then two animation frames
    (the browser painted) and the same check again (a rerun that starts late is not missed)."""
    page.wait_for_function(IDLE_JS, timeout=timeout_ms)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.wait_for_function(IDLE_JS, timeout=timeout_ms)
