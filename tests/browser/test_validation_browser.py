"""Headless Chromium on the Validation page: the chart and tables are drawn, a measured run is
picked and loaded, and the Estimate page opens with that run's scenario (and its share link).
Saves tests/.artifacts/screenshots/validation.png (tools/refresh_screenshots.py copies it).

On a fresh server (the first request runs pages/validation.py without app.py, Streamlit's
pages-folder mode), so "load this run" is shown to switch pages there too; AppTest covers the
st.navigation mode (tests/test_app_validation.py)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from test_studio_browser import shot

from simengine import api
from ui.config_io import validate_scenario
from ui.share import decode_token
from ui.validation_frames import run_key

FIRST_RUN_MS = 300_000  # the first visit on a server validates every source (tens of seconds on a busy machine)

pytestmark = pytest.mark.browser


def settle(page, ready: str, timeout_ms: int = 30_000) -> None:
    """Wait until the script run finished and the page's key element is drawn."""
    page.wait_for_selector(ready, state="visible", timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]') && !document.querySelector('[data-testid=stSkeleton]')",
        timeout=timeout_ms)
    page.wait_for_timeout(400)




def no_exceptions(page) -> None:
    assert page.locator("[data-testid=stException]").count() == 0, page.locator("[data-testid=stException]").first.inner_text()
    assert not page.page_errors, page.page_errors


def test_validation_page_loads_a_run_onto_estimate(fresh_server, page):
    page.goto(f"{fresh_server.url}/validation?preset=small")
    settle(page, ".vega-embed canvas, .vega-embed svg", FIRST_RUN_MS)
    settle(page, "[data-testid=stDataFrame]")
    no_exceptions(page)
    main = page.locator("[data-testid=stMain]")
    text = main.inner_text()
    for needle in ("What the data are", "Error by source and metric", "Predicted vs measured", "Open a measured run",
                   "Runs that could not be expressed"):
        assert needle in text, needle
    assert page.locator("[data-testid=stDataFrame]").count() >= 2  # summary and skipped (every row: in an expander)
    chips = page.locator("[data-testid=stMultiSelect]").inner_text()
    assert all(s in chips for s in api.validation_sources())
    shot(page, "validation")
    # pick a published run by typing into the run picker, then load it
    want = api.validate("megatron-readme").rows[-1]
    key = run_key(want.source, want.run)
    picker = page.locator("[data-testid=stSelectbox]").filter(has_text="Measured run")
    picker.locator("input").click()
    page.keyboard.type(want.run)
    page.get_by_role("option", name=key, exact=True).click()
    # the rerun after the pick replaces the previous run's lines: wait for this run's own line (a
    # Playwright auto-retrying expectation, not a timed assert; it fails if the line never comes)
    from ui.units import fmt_sig   # the page's own figure format (plain, with its unit)

    expect(main).to_contain_text(f"{want.metric}: measured {fmt_sig(want.measured)} {want.unit}")
    page.get_by_role("button", name="Load this run").click()
    page.wait_for_url(re.compile(r"/estimate\?s=v1\."))
    settle(page, "[data-testid=stMetric]")
    no_exceptions(page)
    assert page.locator("[data-testid=stMain] h1").first.inner_text().strip() == "Estimate"
    assert "Opened the measured run" in main.inner_text()
    expected = validate_scenario(want.scenario)[0]
    assert decode_token(re.search(r"[?&]s=([^&]+)", page.url).group(1))[0] == expected
    assert expected["model"]["name"] in page.locator("[data-testid=stSidebar]").inner_text()
