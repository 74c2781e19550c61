"""Fixtures for the browser tests: a studio server on 127.0.0.1 and headless Chromium.

Chromium: Playwright's own build when ``python -m playwright install --with-deps chromium`` ran,
else a system Chromium (Debian's ``chromium`` package, /usr/bin/chromium); without either the
tests skip with that reason.
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
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "tests" / ".artifacts" / "screenshots"  # git-ignored: tests leave the checkout clean
CHROME_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium_executable() -> tuple[str | None, str]:
    """(executable path or None for Playwright's own, reason to skip or '')."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None, "playwright is not installed (pip install playwright)"
    with sync_playwright() as pw:
        own = pw.chromium.executable_path
    if own and Path(own).exists():
        return None, ""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path, ""
    return None, ("playwright's chromium is not installed: run `python -m playwright install --with-deps chromium` "
                  "(or install a system chromium)")


@pytest.fixture(scope="session")
def chromium_path() -> str | None:
    path, reason = _chromium_executable()
    if reason:
        pytest.skip(reason)
    return path


class Server:
    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(self.port),
             "--server.headless", "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 60
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
        raise RuntimeError("streamlit did not become healthy within 60 s")

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


@pytest.fixture(scope="session")
def server(chromium_path) -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def fresh_server(chromium_path) -> Iterator[Server]:
    """A server that has served nothing yet (the first request runs a page without app.py)."""
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, args=CHROME_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    p = ctx.new_page()
    p.set_default_timeout(30_000)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.page_errors = errors  # type: ignore[attr-defined]
    yield p
    ctx.close()
