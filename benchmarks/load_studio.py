"""Shared-server load: do heavy links opened by some sessions slow down other users' light pages?

Run: python benchmarks/load_studio.py [--light-loads 8] [--heavy 3] [--time-limit 300]
Loopback only (a studio server on 127.0.0.1 started here), bounded in counts and time, stops by
itself. One headless Chromium; every session is its own browser context.

1. idle: ``--light-loads`` fresh sessions open the Home page (``?preset=small``) one after the
   other; each render time is goto → the headline metric drawn → the page idle.
2. loaded: ``--heavy`` sessions open a heavy link (1,024 layers, pp 8 · vpp 128: Estimate, then
   Timeline) while the same light loads are measured again.
Prints the p95 render time of the light page in both phases and their ratio (the studio aims
for ≤ 2×: heavy work runs in niced worker processes, see ui/worker.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_studio_server import CHROME_ARGS, IDLE_JS, StudioServer, chromium_path  # noqa: E402


def heavy_token() -> str:
    from ui.config_io import apply_diff
    from ui.share import encode_token, size_canonical

    return encode_token(apply_diff(size_canonical("medium"), {"model": {"num_layers": 1024},
                                                              "strategy": {"pp": 8, "vpp": 128}}))


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


async def heavy_session(browser, url: str, token: str, deadline: float) -> None:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    try:
        for path in ("estimate", "timeline"):
            if time.monotonic() > deadline:
                return
            await page.goto(f"{url}/{path}?s={token}")  # a pasted deep link
            left_ms = max(1000, int((deadline - time.monotonic()) * 1e3))
            try:
                await page.wait_for_selector("[data-testid=stMetric], [data-testid=stAlert]", timeout=left_ms)
                await _idle(page, left_ms)
            except Exception:  # noqa: BLE001 — a heavy page still running at the deadline is fine
                return
    finally:
        await ctx.close()


async def measure(url: str, light_loads: int, heavy: int, time_limit_s: float, exe: str | None,
                  stagger_s: float = 0.5) -> dict:
    from playwright.async_api import async_playwright

    deadline = time.monotonic() + time_limit_s
    timeout_ms = int(time_limit_s * 1e3)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=exe, args=CHROME_ARGS, headless=True)
        await light_load(browser, url, timeout_ms)  # warm-up: imports, caches, the small estimate
        idle = [await light_load(browser, url, timeout_ms) for _ in range(light_loads)]
        token = heavy_token()
        heavies = [asyncio.create_task(heavy_session(browser, url, token, deadline)) for _ in range(heavy)]
        await asyncio.sleep(2.0)  # the heavy scenarios are being computed now
        loaded = []
        for _ in range(light_loads):
            if time.monotonic() > deadline:
                break
            loaded.append(await light_load(browser, url, timeout_ms))
            await asyncio.sleep(stagger_s)
        for t in heavies:
            t.cancel()
        await asyncio.gather(*heavies, return_exceptions=True)
        await browser.close()
    return {"idle_p95_s": p95(idle), "loaded_p95_s": p95(loaded) if loaded else float("nan"),
            "idle_median_s": statistics.median(idle), "loaded_median_s": statistics.median(loaded) if loaded else float("nan"),
            "ratio": (p95(loaded) / p95(idle)) if loaded else float("nan"), "light_loads": len(loaded), "heavy": heavy}


def run(light_loads: int = 8, heavy: int = 3, time_limit_s: float = 300.0) -> dict:
    exe = chromium_path()
    with StudioServer() as server:
        return asyncio.run(measure(server.url, light_loads, heavy, time_limit_s, exe))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--light-loads", type=int, default=8)
    ap.add_argument("--heavy", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=300.0)
    a = ap.parse_args()
    res = run(max(2, min(a.light_loads, 50)), max(0, min(a.heavy, 8)), max(30.0, min(a.time_limit, 900.0)))
    print(f"light page (Home, small) p95: idle {res['idle_p95_s'] * 1e3:.0f} ms, with {res['heavy']} heavy sessions "
          f"{res['loaded_p95_s'] * 1e3:.0f} ms → ratio {res['ratio']:.2f} (median {res['idle_median_s'] * 1e3:.0f} → "
          f"{res['loaded_median_s'] * 1e3:.0f} ms, {res['light_loads']} loads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
