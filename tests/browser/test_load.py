"""Bounded version of benchmarks/load_studio.py: while sessions keep computing heavy links, other
users' light page keeps rendering. Asserts a ratio with generous slack (never an absolute time):
on a loaded 2-core machine the median light render with heavy sessions stays within 3× of idle.

Not the p95 ≤ 2× the benchmark reports: with 4 loads a phase the p95 is the slowest load, and on
a shared 2-core runner one stall from another tenant (a light load takes ~3 s of browser CPU)
decides it; measured here with the same code, the 8-load p95 ratio ran 1.5–2.1× and the
median ratio 1.6–2.5×."""

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
        return asyncio.run(measure(server.url, light_loads=4, heavy=2, time_limit_s=180, exe=chromium_path))

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        res = pool.submit(run).result(timeout=600)
    assert res["light_loads"] >= 2
    assert res["loaded_median_s"] <= 3.0 * res["idle_median_s"], res
