"""Shared-server load: do heavy links opened by some sessions slow down other users' light pages?

Run: python benchmarks/load_studio.py [--light-loads 8] [--heavy 3] [--time-limit 300] [--same-priority]
Loopback only (a studio server on 127.0.0.1 started here), bounded in counts and time, stops by
itself. Headless Chromium, every session its own browser context; the heavy sessions have a
browser of their own at the lowest priority (see ``measure``; ``--same-priority``: not).

1. idle: ``--light-loads`` fresh sessions open the Home page (``?preset=small``) one after the
   other; each render time is goto → the headline metric drawn → the page idle.
2. loaded: ``--heavy`` sessions keep opening heavy links (1,024 layers, pp 8 · vpp 128:
   Estimate, then Timeline, a new scenario each round so no cache answers) while the same light
   loads are measured again, from the moment every heavy session computes.
Prints the p95 render time of the light page in both phases and their ratio (the studio aims
for ≤ 2×: heavy work runs in niced worker processes, see ui/worker.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_studio_server import (CHROME_ARGS, IDLE_JS, StudioServer, chromium_path, descendants,  # noqa: E402
                                 is_chromium, lower_priority_of)


HEAVY_BROWSER_NICE = 19  # the heavy sessions' browser: see ``measure``
HEAVY_GBS = 128  # the heavy link's global batch: 128 micro-batches of 8 stages · 128 chunks


def heavy_token(variant: int = 0) -> str:
    """A heavy link (1,024 layers, pp 8 · vpp 128: ~131k pipeline tasks); each ``variant`` has 4
    sequences less in the batch, so it is a new scenario that no cache holds."""
    from ui.config_io import apply_diff
    from ui.share import encode_token, size_canonical

    gbs = max(16, HEAVY_GBS - 4 * variant)
    return encode_token(apply_diff(size_canonical("medium"), {"model": {"num_layers": 1024},
                                                              "strategy": {"pp": 8, "vpp": 128, "global_batch_size": gbs}}))


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(0.95 * (len(xs) - 1))))]


async def _idle(page, timeout_ms: int) -> None:
    await page.wait_for_function(IDLE_JS, timeout=timeout_ms)
    await page.wait_for_timeout(100)
    await page.wait_for_function(IDLE_JS, timeout=timeout_ms)


async def light_load(browser, url: str, timeout_ms: int) -> float:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    try:
        t0 = time.perf_counter()
        await page.goto(f"{url}/?preset=small")
        await page.wait_for_selector("[data-testid=stMetric]", timeout=timeout_ms)
        await _idle(page, timeout_ms)
        return time.perf_counter() - t0
    finally:
        await ctx.close()


async def heavy_session(browser, url: str, index: int, sessions: int, computing: asyncio.Event,
                        stop: asyncio.Event, deadline: float) -> None:
    """Open heavy links (Estimate, then Timeline) one after the other, a new scenario each time,
    until ``stop``; ``computing`` is set once this session's first heavy page is on screen (its
    worker runs, or it already answered)."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    try:
        for round_ in range(40):
            token = heavy_token(round_ * sessions + index)
            for path in ("estimate", "timeline"):
                if stop.is_set() or time.monotonic() > deadline:
                    return
                await page.goto(f"{url}/{path}?s={token}")  # a pasted deep link
                left_ms = max(1000, int((deadline - time.monotonic()) * 1e3))
                try:
                    await page.wait_for_selector("[data-testid=stMetric], [data-testid=stAlert]", timeout=left_ms)
                    computing.set()
                    idle = asyncio.ensure_future(_idle(page, left_ms))
                    await asyncio.wait([idle, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
                    idle.cancel()
                except Exception:  # noqa: BLE001 — a heavy page still running at the deadline is fine
                    return
    finally:
        await ctx.close()


async def _launch(pw, exe: str | None, nice: int | None):
    """A Chromium; with ``nice``, all its processes (and the renderers they fork later) at that
    priority."""
    before = {p for p in descendants(os.getpid()) if is_chromium(p)}
    browser = await pw.chromium.launch(executable_path=exe, args=CHROME_ARGS, headless=True)
    if nice is not None:
        lower_priority_of([p for p in descendants(os.getpid()) if is_chromium(p) and p not in before], nice)
    return browser


async def measure(url: str, light_loads: int, heavy: int, time_limit_s: float, exe: str | None,
                  stagger_s: float = 0.5, heavy_browser_nice: int | None = HEAVY_BROWSER_NICE) -> dict:
    """Light loads on an idle server, then the same number while ``heavy`` sessions keep opening
    heavy links. The loaded phase starts once every heavy session computes (its page is on
    screen): what is measured is heavy *work* on the server, not several browsers starting up.

    The heavy sessions have a browser of their own, at ``heavy_browser_nice``: a studio's users
    each have their own machine, while here every browser shares the server's cores, and drawing
    the heavy pages (a deep pipeline's Gantt and memory curves) costs Chromium ~10× the CPU the
    server and its workers spend (measured: ~110 s against ~12 s over one loaded phase). At
    normal priority (``None``, ``--same-priority``) that client work, not the server, is what
    slows the light page down."""
    from playwright.async_api import async_playwright

    deadline = time.monotonic() + time_limit_s
    timeout_ms = int(time_limit_s * 1e3)
    async with async_playwright() as pw:
        browser = await _launch(pw, exe, None)
        heavy_browser = await _launch(pw, exe, heavy_browser_nice) if heavy else browser
        await light_load(browser, url, timeout_ms)  # warm-up: imports, caches, the small estimate
        idle = [await light_load(browser, url, timeout_ms) for _ in range(light_loads)]
        stop = asyncio.Event()
        computing = [asyncio.Event() for _ in range(heavy)]
        heavies = [asyncio.create_task(heavy_session(heavy_browser, url, i, heavy, computing[i], stop, deadline))
                   for i in range(heavy)]
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in computing)), timeout=max(1.0, time_limit_s / 4))
        await asyncio.sleep(1.0)  # the heavy scenarios are being computed now
        loaded = []
        for _ in range(light_loads):
            if time.monotonic() > deadline:
                break
            loaded.append(await light_load(browser, url, timeout_ms))
            await asyncio.sleep(stagger_s)
        stop.set()
        await asyncio.gather(*heavies, return_exceptions=True)
        if heavy_browser is not browser:
            await heavy_browser.close()
        await browser.close()
    return {"idle_p95_s": p95(idle), "loaded_p95_s": p95(loaded) if loaded else float("nan"),
            "idle_median_s": statistics.median(idle), "loaded_median_s": statistics.median(loaded) if loaded else float("nan"),
            "ratio": (p95(loaded) / p95(idle)) if loaded else float("nan"), "light_loads": len(loaded), "heavy": heavy}


def run(light_loads: int = 8, heavy: int = 3, time_limit_s: float = 300.0,
        heavy_browser_nice: int | None = HEAVY_BROWSER_NICE) -> dict:
    exe = chromium_path()
    with StudioServer() as server:
        return asyncio.run(measure(server.url, light_loads, heavy, time_limit_s, exe,
                                   heavy_browser_nice=heavy_browser_nice))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--light-loads", type=int, default=8)
    ap.add_argument("--heavy", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--same-priority", action="store_true",
                    help="the heavy sessions' browser at normal priority (their drawing then competes with the light page's)")
    a = ap.parse_args()
    res = run(max(2, min(a.light_loads, 50)), max(0, min(a.heavy, 8)), max(30.0, min(a.time_limit, 900.0)),
              None if a.same_priority else HEAVY_BROWSER_NICE)
    print(f"light page (Home, small) p95: idle {res['idle_p95_s'] * 1e3:.0f} ms, with {res['heavy']} heavy sessions "
          f"{res['loaded_p95_s'] * 1e3:.0f} ms → ratio {res['ratio']:.2f} (median {res['idle_median_s'] * 1e3:.0f} → "
          f"{res['loaded_median_s'] * 1e3:.0f} ms, {res['light_loads']} loads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
