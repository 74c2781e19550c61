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
(``timed_streamlit.py``), a steadier figure on a loaded machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_studio_server import CHROME_ARGS, RunWatcher, StudioServer, chromium_path, wait_idle  # noqa: E402


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


def run(repeats: int, profile_dir: Path | None = None) -> dict[str, tuple[float, float]]:
    """{interaction: (median input-to-idle s, median server script CPU s)}."""
    from playwright.sync_api import sync_playwright

    out: dict[str, list[tuple[float, float]]] = {}
    exe = chromium_path()
    with tempfile.TemporaryDirectory() as tmp, StudioServer(run_log=Path(tmp) / "runs.jsonl",
                                                             profile_dir=profile_dir) as server, \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROME_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        runs = RunWatcher(page)
        page.goto(f"{server.url}/strategy?preset=medium")
        page.get_by_role("spinbutton", name="global_batch_size [sequences]").wait_for(timeout=60_000)
        wait_idle(page)
        for i in range(repeats):  # warm-up pass included in neither figure
            for label in ("Model", "Estimate", "Timeline", "Strategy"):
                k = len(server.runs())
                t = _nav(page, runs, label)
                (out.setdefault(f"open {label}", []) if i else []).append((t, _cpu_since(server, k)))
            k = len(server.runs())
            t = _edit(page, runs, 64 + 8 * i)
            out.setdefault("Strategy edit", []).append((t, _cpu_since(server, k)))
        browser.close()
    return {k: (statistics.median(x for x, _ in v), statistics.median(c for _, c in v)) for k, v in out.items() if v}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--profile", type=Path, help="write each script run's cProfile stats into this folder")
    args = ap.parse_args()
    for label, (s, cpu) in run(max(2, min(args.repeats, 20)), args.profile).items():
        print(f"{label:>16}: {s * 1e3:7.0f} ms input-to-idle, {cpu * 1e3:5.0f} ms script CPU (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
