"""Studio responsiveness: input-to-idle in headless Chromium against a local server (loopback).

Run: python benchmarks/bench_studio.py [--repeats N]
Measures, on the ``medium`` preset: a Strategy field edit (type a new global_batch_size, Enter,
until the page is idle again), opening Model, Strategy, Estimate and Timeline from the sidebar,
and a Timeline schedule switch. Each figure is the median of N tries (each edit uses a value not
seen before, so no cached result is reused). Input-to-idle is measured from the input to the
moment the page has no running script and no stale element (``bench_studio_server.wait_idle``);
the idle check polls every animation frame, so figures carry ~±20 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_studio_server import CHROME_ARGS, StudioServer, chromium_path, wait_idle  # noqa: E402


def _nav(page, label: str) -> float:
    t0 = time.perf_counter()
    page.locator("[data-testid=stSidebar]").get_by_role("link", name=label, exact=True).click()
    page.wait_for_function(f"() => [...document.querySelectorAll('[data-testid=stMain] h1')].some(h => h.innerText.trim() === '{label}')",
                           timeout=60_000)
    wait_idle(page)
    return time.perf_counter() - t0


def _edit(page, value: int) -> float:
    box = page.get_by_role("spinbutton", name="global_batch_size [sequences]")
    box.fill(str(value))
    t0 = time.perf_counter()
    box.press("Enter")
    page.wait_for_function("v => location.search.length > 0 && document.querySelector('[data-testid=stSidebar]')"
                           ".innerText.includes('gbs ' + v)", arg=f"{value:,}", timeout=60_000)
    wait_idle(page)
    return time.perf_counter() - t0


def run(repeats: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {}
    exe = chromium_path()
    with StudioServer() as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROME_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{server.url}/strategy?preset=medium")
        page.get_by_role("spinbutton", name="global_batch_size [sequences]").wait_for(timeout=60_000)
        wait_idle(page)
        for i in range(repeats):  # warm-up pass included in neither figure
            for label in ("Model", "Estimate", "Timeline", "Strategy"):
                (out.setdefault(f"open {label}", []) if i else []).append(_nav(page, label))
            out.setdefault("Strategy edit", []).append(_edit(page, 64 + 8 * i))
        browser.close()
    return {k: statistics.median(v) for k, v in out.items() if v}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()
    for label, s in run(max(2, min(args.repeats, 20))).items():
        print(f"{label:>16}: {s * 1e3:7.0f} ms (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
