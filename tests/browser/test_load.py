"""Bounded version of benchmarks/load_studio.py: while sessions keep computing heavy links, other
users' light page keeps rendering. Asserts ratios with generous slack (never an absolute time):
on a loaded 2-core machine the light render with heavy sessions stays within 3× of idle, median
and p95 of 8 loads a phase.

The heavy sessions are protocol-level clients on the server's websocket (no browser draws their
pages, as in a deployment); the light user is headless Chromium. The benchmark reports the
p95 ≤ 2× target; the slack here is for a shared CI runner, where one stall from another tenant
decides the p95 of 8 loads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

pytestmark = pytest.mark.browser


def test_heavy_links_do_not_starve_a_light_page(server, chromium_path):
    from load_studio import measure

    def run():  # its own thread and event loop: the sync Playwright fixtures of this session hold one here
        return asyncio.run(measure(server.url, light_loads=8, heavy=2, time_limit_s=150, exe=chromium_path))

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        res = pool.submit(run).result(timeout=400)
    assert res["light_loads"] >= 6, res
    assert res["heavy_to_the_end"], res  # the heavy users kept the server busy for the whole loaded phase
    assert res["heavy_computing"], res  # every heavy user's page ran on the server before the loaded phase
    assert not set(res["heavy_loads"]) - {"finished", "stopped"}, res  # no refused or dropped connection
    assert res["loaded_median_s"] <= 3.0 * res["idle_median_s"], res
    assert res["loaded_p95_s"] <= 3.0 * res["idle_p95_s"], res
