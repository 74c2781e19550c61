"""Studio responsiveness: input-to-idle in headless Chromium against a local server (loopback).

Run: python benchmarks/bench_studio.py [--repeats N]
Measures, on the ``medium`` preset: a Strategy field edit (type a new global_batch_size, Enter,
until the page is idle again), opening Model, Strategy, Estimate and Timeline from the sidebar,
and a Timeline schedule switch. Each figure is the median of N tries (each edit uses a value not
seen before, so no cached result is reused). Input-to-idle is measured from the input to the
moment the server finished the script run (its ``script_finished`` message on the websocket,
``bench_studio_server.RunWatcher``) and the page has no running script, no stale element and
every chart drawn (``wait_idle``); the checks poll every few ms and animation frame, so figures
carry ~±20 ms. Next to it: the CPU time of the script runs the interaction made on the server
(``timed_streamlit.py``: the script thread), of the whole server process (script, websocket
and serialisation threads) and of the Chromium processes (``/proc``, Linux): CPU figures stay
steady on a loaded machine, where wall time does not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_studio_server import (CHROME_ARGS, RunWatcher, StudioServer, chromium_path, descendants,  # noqa: E402
                                 is_chromium, wait_idle)


def _nav(page, runs: RunWatcher, label: str) -> float:
    since = runs.finished
    t0 = time.perf_counter()
    page.locator("[data-testid=stSidebar]").get_by_role("link", name=label, exact=True).click()
    page.wait_for_function(f"() => [...document.querySelectorAll('[data-testid=stMain] h1')].some(h => h.innerText.trim() === '{label}')",
                           timeout=60_000)
    runs.wait(page, since)
    return time.perf_counter() - t0


def _edit(page, runs: RunWatcher, value: int) -> float:
    box = page.get_by_role("spinbutton", name="global_batch_size [sequences]")
    box.fill(str(value))
    since = runs.finished
    t0 = time.perf_counter()
    box.press("Enter")
    page.wait_for_function("v => location.search.length > 0 && document.querySelector('[data-testid=stSidebar]')"
                           ".innerText.includes('gbs ' + v)", arg=f"{value:,}", timeout=60_000)
    runs.wait(page, since)
    return time.perf_counter() - t0


def _cpu_since(server: StudioServer, k: int) -> float:
    """CPU seconds of the script runs logged after the first ``k`` (the log line lands just after
    the run's last message)."""
    deadline = time.monotonic() + 5
    while len(server.runs()) <= k and time.monotonic() < deadline:
        time.sleep(0.01)
    return sum(r["cpu_ms"] for r in server.runs()[k:]) / 1e3


def _process_cpu_s(pid: int) -> float:
    """CPU time of a process including its ended threads (``/proc/PID/stat`` utime + stime, in
    clock ticks: 10 ms steps). The server starts a thread per script run, so it needs this."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _threads_cpu_s(pid: int) -> float:
    """CPU time of a process's live threads (``/proc/PID/task/*/schedstat``: ns on a CPU): exact
    for Chromium, whose threads outlive an interaction."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(task.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total / 1e9


class BrowserCPU:
    """CPU seconds used by this process's Chromium processes (browser, renderers, GPU/compositor;
    Linux ``/proc``): the browser's share of an interaction, which on a loaded machine is far
    steadier than wall time (NaN where ``/proc`` is missing)."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid

    def now(self) -> float:
        if not Path("/proc/self/schedstat").exists():
            return float("nan")
        server = {self.server_pid, *descendants(self.server_pid)}
        return sum(_threads_cpu_s(p) for p in descendants(os.getpid()) if p not in server and is_chromium(p))


def run(repeats: int, profile_dir: Path | None = None) -> dict[str, tuple[float, ...]]:
    """{interaction: (median input-to-idle s, median server script CPU s, median server process CPU s,
    median browser CPU s)}."""
    from playwright.sync_api import sync_playwright

    out: dict[str, list[tuple[float, ...]]] = {}
    exe = chromium_path()
    with tempfile.TemporaryDirectory() as tmp, StudioServer(run_log=Path(tmp) / "runs.jsonl",
                                                             profile_dir=profile_dir) as server, \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROME_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        runs = RunWatcher(page)
        browser_cpu = BrowserCPU(server.proc.pid)

        def cpu() -> tuple[float, float]:
            return _process_cpu_s(server.proc.pid), browser_cpu.now()

        page.goto(f"{server.url}/strategy?preset=medium")
        page.get_by_role("spinbutton", name="global_batch_size [sequences]").wait_for(timeout=60_000)
        wait_idle(page)
        for i in range(repeats):  # warm-up pass included in neither figure
            for label in ("Model", "Estimate", "Timeline", "Strategy"):
                k, c0 = len(server.runs()), cpu()
                t = _nav(page, runs, label)
                c1 = cpu()
                (out.setdefault(f"open {label}", []) if i else []).append(
                    (t, _cpu_since(server, k), c1[0] - c0[0], c1[1] - c0[1]))
            k, c0 = len(server.runs()), cpu()
            t = _edit(page, runs, 64 + 8 * i)
            c1 = cpu()
            out.setdefault("Strategy edit", []).append((t, _cpu_since(server, k), c1[0] - c0[0], c1[1] - c0[1]))
        browser.close()
    return {k: tuple(statistics.median(x[j] for x in v) for j in range(4)) for k, v in out.items() if v}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--profile", type=Path, help="write each script run's cProfile stats into this folder")
    args = ap.parse_args()
    print(f"{'':>16}  input-to-idle  script CPU  server CPU  browser CPU   (medians, ms)")
    for label, (s, script, server, browser) in run(max(2, min(args.repeats, 20)), args.profile).items():
        print(f"{label:>16}: {s * 1e3:13.0f}  {script * 1e3:10.0f}  {server * 1e3:10.0f}  {browser * 1e3:11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
