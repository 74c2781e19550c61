"""Headless Chromium: the Search page runs a search from its link (progress bar to done), the
ranked grid sorts, the Pareto chart is drawn, a layout loads into the Strategy editor, and the
share link reproduces the search in a new tab. Screenshot: tests/.artifacts/screenshots/search.png (tools/refresh_screenshots.py copies it)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from test_studio_browser import charts_drawn, nav, no_exceptions, settle, shot
from ui.search_view import encode_inputs

pytestmark = pytest.mark.browser

RESTRICT = "tp=1,2\npp=1,2\ncp=1\nzero_stage=1,3\noverlap_grad_reduce=true\noverlap_param_gather=true\ntp_comm_overlap=false"
INPUTS = {"gpus": "8", "global_batch": 64, "seq_len": 8192, "objective": "tokens_per_s", "top": 12, "restrict": RESTRICT}


def test_search_page_end_to_end(server, page, browser):
    page.goto(f"{server.url}/search?preset=small&search={encode_inputs(INPUTS)}")
    settle(page)
    page.get_by_text("done").first.wait_for(timeout=120_000)
    main = page.locator("[data-testid=stMain]")
    main.get_by_text(re.compile(r"candidates in the space")).first.wait_for()
    frame = page.frame_locator("iframe[title*='aggrid'], iframe[title*='agGrid'], iframe").first
    frame.locator(".ag-row").first.wait_for(timeout=30_000)
    first_before = frame.locator(".ag-row[row-index='0'] [col-id='layout']").inner_text()
    frame.locator(".ag-header-cell[col-id='tokens_per_s']").click()  # ranked best first; a click sorts ascending
    page.wait_for_timeout(800)
    cells = [frame.locator(f".ag-row[row-index='{i}'] .ag-cell[col-id='tokens_per_s']").inner_text() for i in range(4)]
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})+", c) for c in cells), cells   # thousands separators (grid_options)
    values = [float(c.replace(",", "")) for c in cells]
    assert len(values) >= 2 and values == sorted(values)
    assert frame.locator(".ag-row[row-index='0'] [col-id='layout']").inner_text() != first_before
    charts_drawn(page, 1)
    no_exceptions(page)
    shot(page, "search")
    url = page.url
    # the share link reproduces the search in a new tab
    other = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    other.goto(url)
    settle(other)
    other.get_by_text("done").first.wait_for(timeout=120_000)
    f2 = other.frame_locator("iframe[title*='aggrid'], iframe[title*='agGrid'], iframe").first
    f2.locator(".ag-row").first.wait_for(timeout=30_000)
    assert f2.locator(".ag-row[row-index='0'] [col-id='layout']").inner_text() == first_before
    other.context.close()
    # back from another page, the result is still shown and the address carries its search again
    token = url.split("search=")[1].split("&")[0]
    nav(page, "Estimate")
    settle(page, "[data-testid=stMetric]")
    nav(page, "Search")
    settle(page)
    page.get_by_text("done").first.wait_for(timeout=120_000)
    page.wait_for_function("() => location.search.includes('search=')", timeout=30_000)
    assert page.url.split("search=")[1].split("&")[0] == token
    # load the best layout into the Strategy editor
    page.get_by_role("button", name="Use this layout").click()
    page.wait_for_url(re.compile(r"/strategy"), timeout=60_000)
    settle(page)
    assert page.get_by_role("textbox", name=re.compile("name")).first.input_value().startswith("search:")
    no_exceptions(page)


WHAT_IF = {"gpus": "8", "global_batch": 64, "seq_len": 2048, "objective": "tokens_per_s", "top": 6,
           "restrict": "tp=1\npp=4\ncp=1\ntp_comm_overlap=false"}


def test_what_if_schedules_are_marked_and_one_click_keeps_the_stacks_own(server, page):
    """At pp 4 and 2,048 tokens the small model's best layouts are DualPipe ones, which Megatron-Core
    does not ship: the page says so above the grid, the grid's what-if column marks them, and the
    button searches again with only 1F1B and interleaved (the restriction box and the link follow).
    Screenshot: search-what-if.png."""
    page.goto(f"{server.url}/search?preset=small&search={encode_inputs(WHAT_IF)}")
    settle(page)
    page.get_by_text("done").first.wait_for(timeout=120_000)
    main = page.locator("[data-testid=stMain]")
    main.get_by_text(re.compile(r"Megatron-Core does not ship")).first.wait_for(timeout=30_000)
    frame = page.frame_locator("iframe[title*='aggrid'], iframe[title*='agGrid'], iframe").first
    frame.locator(".ag-row").first.wait_for(timeout=30_000)
    assert "dualpipe" in frame.locator(".ag-row[row-index='0'] [col-id='layout']").inner_text()
    assert frame.locator(".ag-row[row-index='0'] [col-id='what_if'] input[type=checkbox]").is_checked()   # a boolean cell
    no_exceptions(page)
    shot(page, "search-what-if")
    page.get_by_role("button", name=re.compile("Search only the schedules this stack runs")).click()
    # the old result stays on the page until the new search is drawn: wait for the new one (a loaded
    # machine takes seconds), not for the "done" of the old
    expect(main.locator("textarea").first).to_have_value(re.compile("schedule=1f1b,interleaved"), timeout=120_000)
    expect(main.get_by_text(re.compile(r"Megatron-Core does not ship"))).to_have_count(0, timeout=120_000)
    settle(page)
    page.get_by_text("done").first.wait_for(timeout=120_000)
    main.get_by_text(re.compile(r"candidates in the space")).first.wait_for()
    frame = page.frame_locator("iframe[title*='aggrid'], iframe[title*='agGrid'], iframe").first
    expect(frame.locator(".ag-row[row-index='0'] [col-id='layout']")).not_to_contain_text("dualpipe", timeout=60_000)
    no_exceptions(page)
