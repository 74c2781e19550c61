"""Headless Chromium against a real studio server: deep links on a fresh server for every page,
an estimate, the timeline, the GEMM grid, inline errors, a share link typed into a new tab.
Screenshots land in tests/.artifacts/screenshots/ (git-ignored; ``tools/refresh_screenshots.py``
copies the README's into assets/screenshots/), so running the tests leaves the checkout clean."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ui.share import decode_token, encode_token, size_canonical
from ui.timeline_data import MAX_EXACT_SPANS

SHOTS = Path(__file__).resolve().parents[1] / ".artifacts" / "screenshots"  # git-ignored

pytestmark = pytest.mark.browser

PAGES = {"": "Home", "model": "Model", "system": "System", "strategy": "Strategy", "estimate": "Estimate", "timeline": "Timeline"}


def settle(page, ready: str = "[data-testid=stMain] h1", extra_ms: int = 400) -> None:
    """Wait until the script run finished and the page's key element is drawn."""
    page.wait_for_selector(ready, state="visible")
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stStatusWidget]') && !document.querySelector('[data-testid=stSkeleton]')",
        timeout=30_000)
    page.wait_for_timeout(extra_ms)


def charts_drawn(page, n: int) -> None:
    page.wait_for_function(f"() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= {n}", timeout=30_000)


def shot(page, name: str, width: int = 1600, height: int = 1000) -> None:
    """Full-content screenshot: Streamlit scrolls inside its main block, so grow the viewport."""
    h = page.evaluate("() => Math.max(...[...document.querySelectorAll('[data-testid=stMain] *')].slice(0, 5000)"
                      ".map(e => e.getBoundingClientRect().bottom))")
    page.set_viewport_size({"width": width, "height": min(int(h) + 40, 6000)})
    page.wait_for_timeout(700)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.set_viewport_size({"width": width, "height": height})


def nav(page, label: str) -> None:
    page.locator("[data-testid=stSidebar]").get_by_role("link", name=label, exact=True).click()


def no_exceptions(page) -> None:
    assert page.locator("[data-testid=stException]").count() == 0, page.locator("[data-testid=stException]").first.inner_text()
    assert not page.page_errors, page.page_errors


def edited_token() -> tuple[str, dict]:
    cfg = size_canonical("medium")
    cfg["strategy"]["global_batch_size"] = 256
    cfg["model"]["name"] = "deep-link probe"
    return encode_token(cfg), cfg


@pytest.mark.parametrize("path", list(PAGES))
def test_deep_link_on_a_fresh_server(fresh_server, page, path):
    """The very first request after a server start lands on any page with an edited scenario."""
    token, cfg = edited_token()
    page.goto(f"{fresh_server.url}/{path}?s={token}")
    settle(page)
    no_exceptions(page)
    assert page.locator("[data-testid=stMain] h1").first.inner_text().strip() in (PAGES[path], "simengine studio")
    side = page.locator("[data-testid=stSidebar]")
    assert "deep-link probe" in side.inner_text()  # the scenario came from the link
    for label in PAGES.values():  # our own navigation, in both navigation modes
        assert side.get_by_role("link", name=label).count() == 1
    assert page.locator("[data-testid=stSidebarNav]").count() == 0
    assert decode_token(re.search(r"[?&]s=([^&]+)", page.url).group(1))[0] == cfg
    # navigate on: the scenario follows and the address bar keeps the link
    nav(page, "Estimate")
    settle(page, "[data-testid=stMetric]")
    no_exceptions(page)
    assert page.url.split("?")[1] == f"s={token}"
    nav(page, "Home")
    settle(page, "[data-testid=stMetric]")
    assert page.locator("[data-testid=stMain] h1").first.inner_text().strip() == "simengine studio"
    assert page.url.split("?")[1] == f"s={token}"
    no_exceptions(page)


def test_home_and_size_presets(server, page):
    page.goto(f"{server.url}/?preset=small")
    settle(page, "[data-testid=stMetric]")
    page.get_by_role("button", name="Medium").click()
    page.wait_for_url(re.compile(r"preset=medium"))
    settle(page, "[data-testid=stMetric]")
    assert "Llama-3-70B" in page.locator("[data-testid=stMain]").inner_text()
    no_exceptions(page)
    shot(page, "home")


def test_estimate_page(server, page):
    page.goto(f"{server.url}/estimate?preset=medium")
    settle(page, "[data-testid=stMetric]")
    charts_drawn(page, 2)
    page.get_by_text("Memory per pipeline stage").click()  # a fitting step's per-stage memory: on demand
    settle(page, "[data-testid=stMetric]")
    charts_drawn(page, 3)
    main = page.locator("[data-testid=stMain]").inner_text()
    for text in ("Step time", "Throughput", "MFU", "HFU", "Allocated peak", "Cost / 1M tokens", "Fits in memory",
                 "Step time breakdown", "MFU loss waterfall", "Memory per pipeline stage", "Time to train"):
        assert text in main, text
    page.get_by_text("Compare pinned scenarios").click()  # folded until something is pinned
    page.get_by_role("button", name="Pin this scenario").click()
    settle(page, "[data-testid=stMetric]")
    nav(page, "Home")
    settle(page, "[data-testid=stMetric]")
    page.get_by_role("button", name="Large").click()
    page.wait_for_url(re.compile(r"preset=large"))
    settle(page, "[data-testid=stMetric]")
    nav(page, "Estimate")
    settle(page, "[data-testid=stMetric]")
    charts_drawn(page, 4)
    assert "current (unpinned)" in page.locator("[data-testid=stMain]").inner_text() or \
        page.locator("[data-testid=stDataFrame]").count() >= 2
    no_exceptions(page)
    shot(page, "estimate")


def scenario_token(**strategy) -> str:
    cfg = size_canonical("medium")
    cfg["strategy"].update(strategy)
    return encode_token(cfg)


def test_timeline_page(server, page):
    # medium as plain 1F1B (pp 4) with 8 micro-batches: every span drawn and labelled
    first = scenario_token(global_batch_size=16, schedule="1f1b", vpp=1)
    page.goto(f"{server.url}/timeline?s={first}")
    settle(page, "[data-testid=stMetric]")
    charts_drawn(page, 1)
    assert "spans shown" in page.locator("[data-testid=stMain]").inner_text()
    page.get_by_text("Memory over the step").click()  # the memory curves of a fitting step: on demand
    settle(page, "[data-testid=stMetric]")
    charts_drawn(page, 2)
    page.get_by_text("Micro-batch labels").click()
    settle(page, "[data-testid=stMetric]")
    charts_drawn(page, 2)
    no_exceptions(page)
    shot(page, "timeline")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Chrome trace").click()
    trace = json.loads(Path(dl.value.path()).read_text())
    assert {e["ph"] for e in trace["traceEvents"]} >= {"M", "X"} and trace["otherData"]["step_time_s"] > 0
    # schedule switcher: the scenario and its link change
    page.locator("[data-testid=stMain]").get_by_text("zb-h1", exact=True).click()
    page.wait_for_function(f"() => !location.search.includes('{first}')")
    settle(page, "[data-testid=stMetric]")
    token = re.search(r"[?&]s=([^&]+)", page.url).group(1)
    assert decode_token(token)[0]["strategy"]["schedule"] == "zb-h1"
    shot(page, "timeline-zb-h1")
    no_exceptions(page)


def test_large_timeline_is_aggregated(server, page):
    # 512 sequences = 256 micro-batches through 4 stages × 5 chunks: tens of thousands of spans
    page.goto(f"{server.url}/timeline?s={scenario_token(global_batch_size=512)}")
    settle(page, "[data-testid=stMetric]")
    charts_drawn(page, 1)
    assert f"more than {MAX_EXACT_SPANS:,}" in page.locator("[data-testid=stMain]").inner_text()
    no_exceptions(page)
    shot(page, "timeline-aggregated")


def test_system_grid_and_model_errors(server, page):
    page.goto(f"{server.url}/system?preset=small")
    settle(page)
    page.get_by_text("Measured GEMM efficiencies").click()
    page.get_by_role("button", name="Add row").click()
    page.wait_for_url(re.compile(r"[?&]s=v1\."))
    settle(page)
    frame = page.frame_locator("iframe[title*='aggrid'], iframe[title*='agGrid'], iframe").first
    frame.locator(".ag-row").first.wait_for(timeout=30_000)
    assert frame.locator(".ag-header-cell-text", has_text="efficiency").count() >= 1
    page.wait_for_timeout(800)
    no_exceptions(page)
    shot(page, "system")
    # inline validation on the Model page, next to the field it names
    nav(page, "Model")
    settle(page)
    box = page.get_by_role("spinbutton", name="num_kv_heads [heads]")
    box.fill("5")
    box.press("Enter")
    page.get_by_text("is not a multiple of num_kv_heads=5").first.wait_for()
    no_exceptions(page)
    shot(page, "model-validation")


def test_strategy_edit_link_opens_in_a_new_tab(server, page, browser):
    page.goto(f"{server.url}/strategy?preset=small")
    settle(page)
    box = page.get_by_role("spinbutton", name="global_batch_size [sequences]")
    box.fill("128")
    box.press("Enter")
    page.wait_for_url(re.compile(r"[?&]s=v1\."))
    settle(page)
    url = page.url
    assert "Tokens / step" in page.locator("[data-testid=stMain]").inner_text()
    shot(page, "strategy")
    other = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    other.goto(url)
    settle(other)
    assert other.get_by_role("spinbutton", name="global_batch_size [sequences]").input_value() == "128"
    other.context.close()


def test_hostile_link_in_the_browser(server, page):
    page.goto(f"{server.url}/estimate?s=v1.%3Cscript%3Ealert(1)%3C%2Fscript%3E&preset=../../etc")
    settle(page, "[data-testid=stAlert]")
    assert "Could not open the link" in page.locator("[data-testid=stMain]").inner_text()
    no_exceptions(page)
    page.wait_for_timeout(500)
    assert "preset=small" not in page.url and "preset=../../etc" in page.url  # the pasted link stays


def test_model_page_screenshot(server, page):
    page.goto(f"{server.url}/model?preset=large")
    settle(page, "[data-testid=stMetric]")
    no_exceptions(page)
    shot(page, "model")


EVIL_NAME = "[Session expired, sign in](https://evil.example/login) ![t](https://evil.example/p.png)"


def test_names_from_a_link_render_as_plain_text(server, page):
    """Markdown, HTML, autolinks and Streamlit directives in names stay literal text."""
    cfg = size_canonical("small")
    cfg["model"]["name"] = EVIL_NAME
    cfg["system"]["gpu"]["name"] = "www.evil.example a@evil.example :red[GPU] <b>x</b> $x^2$ :material/warning:"
    page.goto(f"{server.url}/model?s={encode_token(cfg)}")
    settle(page, "[data-testid=stMetric]")
    no_exceptions(page)
    side = page.locator("[data-testid=stSidebar]").inner_text().replace("\u2060", "")  # invisible word joiners
    assert EVIL_NAME in side and cfg["system"]["gpu"]["name"] in side
    assert EVIL_NAME in page.locator("[data-testid=stMain]").inner_text().replace("\u2060", "")  # the editor's caption
    assert page.locator("a[href*='evil.example'], img[src*='evil.example'], [data-testid=stSidebar] b").count() == 0
    assert page.locator("[data-testid=stSidebar] .katex").count() == 0
    assert page.locator("[data-testid=stSidebar] [data-testid=stIconMaterial]", has_text="warning").count() == 0


def test_long_and_repeated_links_open(server, page):
    """A ~40k-character link (a calibrated system) opens; a repeated parameter ends canonical."""
    import random

    rng = random.Random(5)
    cfg = size_canonical("small")
    cfg["system"]["efficiency"]["gemm_table"] = [
        {"m": rng.randint(1, 10**6), "n": rng.randint(1, 10**6), "k": rng.randint(1, 10**6), "b": 1, "dtype": "bf16",
         "layout": None, "efficiency": rng.uniform(0.05, 0.95)} for _ in range(1300)]
    token = encode_token(cfg)
    assert 30_000 < len(token) < 64_000
    page.goto(f"{server.url}/estimate?s=garbage&s={token}")
    settle(page, "[data-testid=stMetric]")
    no_exceptions(page)
    assert "Could not open the link" not in page.locator("[data-testid=stMain]").inner_text()
    page.wait_for_function("() => location.search.split('s=').length === 2")
    assert page.url.split("?")[1] == f"s={token}"
    assert "long link" in page.locator("[data-testid=stSidebar]").inner_text().lower()


def test_studio_works_offline_with_no_404(server, browser):
    """Every request goes to the studio's own server and none is a 404: links the studio hands
    out are root-based (``/?page=…``), no page icon fetches a favicon from fonts.gstatic.com."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    seen: list[tuple[str, object]] = []
    page.on("response", lambda r: seen.append((r.url, r.status)))
    page.on("requestfailed", lambda r: seen.append((r.url, f"failed: {r.failure}")))
    page.goto(f"{server.url}/?page=estimate&preset=medium")
    settle(page, "[data-testid=stMetric]")
    assert page.locator("[data-testid=stMain] h1").first.inner_text().strip() == "Estimate"
    assert "page=estimate" in page.url   # the page drawn at the root keeps its name: a reload opens it again
    page.reload()
    settle(page, "[data-testid=stMetric]")
    assert page.locator("[data-testid=stMain] h1").first.inner_text().strip() == "Estimate"
    for label in ("Timeline", "System", "Model", "Home"):
        nav(page, label)
        settle(page)
    share = page.locator("[data-testid=stSidebar] [data-testid=stCode]").first.inner_text().strip()
    assert share.startswith(server.url + "/?")
    page.goto(share)
    settle(page)
    outside = [u for u, _ in seen if not u.startswith(server.url + "/") and not u.startswith(("data:", "blob:"))]
    bad = [(u, s) for u, s in seen if s == 404 or isinstance(s, str)]
    ctx.close()
    assert not outside, outside[:5]
    assert not bad, bad[:5]


def _covered_fraction(page) -> float:
    """Share of the main title's box hidden under another element (the sidebar on a phone)."""
    return page.evaluate("""() => {
        const h = document.querySelector('[data-testid=stMain] h1'); const r = h.getBoundingClientRect();
        let hidden = 0, n = 0;
        for (let x = r.left + 4; x < Math.min(r.right, innerWidth) - 4; x += 12) {
            n++; const e = document.elementFromPoint(x, r.top + r.height / 2);
            if (!e || !h.contains(e) && !e.contains(h)) hidden++; }
        return n ? hidden / n : 1; }""")


def test_phone_and_dark_mode(server, browser):
    """On a 390×844 phone the sidebar starts folded and the page is readable; a dark colour
    scheme gives a dark studio (no forced light theme). Screenshots at both sizes."""
    for scheme, size, name in (("dark", (1600, 1000), "estimate-dark"), ("light", (390, 844), "phone-home"),
                               ("dark", (390, 844), "phone-estimate-dark")):
        ctx = browser.new_context(viewport={"width": size[0], "height": size[1]}, color_scheme=scheme,
                                  is_mobile=size[0] < 500, has_touch=size[0] < 500)
        page = ctx.new_page()
        page.goto(f"{server.url}/?page={'home' if 'home' in name else 'estimate'}&preset=medium")
        settle(page, "[data-testid=stMetric]")
        bg = page.evaluate("() => getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor")
        rgb = [int(v) for v in re.findall(r"\d+", bg)[:3]]
        assert (sum(rgb) / 3 < 80) == (scheme == "dark"), (scheme, bg)
        if size[0] < 500:
            assert _covered_fraction(page) < 0.2
        shot(page, name, *size)
        ctx.close()


def test_tables_fit_a_1440_window(server, browser):
    """The pinned comparison and the per-stage memory table show every column at 1440 px."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    cfg = size_canonical("medium")
    from ui.config_io import dumps
    from ui.pins import encode_pins

    pins = encode_pins([{"label": "medium as shipped", "json": dumps(cfg)},
                        {"label": "medium, gbs 256", "json": dumps({**cfg, "strategy": {**cfg["strategy"], "global_batch_size": 256}})}])
    page.goto(f"{server.url}/?page=estimate&preset=large&pins={pins}")
    settle(page, "[data-testid=stMetric]")
    if page.locator("[data-testid=stDataFrame]").count() < 2:  # a fitting step: its per-stage memory on demand
        page.get_by_text("Memory per pipeline stage").click()
        settle(page, "[data-testid=stMetric]")
    page.locator("[data-testid=stDataFrame]").nth(1).wait_for()
    page.wait_for_timeout(800)
    cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stDataFrame]')].map(d => {
        const s = d.querySelector('.dvn-scroller'); return s ? s.scrollWidth - s.clientWidth : -1; })""")
    ctx.close()
    assert len(cut) >= 2 and all(c <= 2 for c in cut), cut


def test_integer_fields_read_scientific_notation(server, page):
    """Streamlit's integer widget parses what is typed with parseInt: "1e2" became 1 layer and
    "3.2e1" 3, silently. The editors' integer fields are float widgets (ui/form.py ``_widget``)
    whose value is handed on as an integer: 1e2 is 100 layers."""
    page.goto(f"{server.url}/model?preset=small")
    settle(page)
    box = page.get_by_role("spinbutton", name=re.compile(r"^num_layers"))
    box.fill("1e2")
    box.press("Enter")
    page.wait_for_url(re.compile(r"[?&]s=v1\."))
    settle(page)
    box = page.get_by_role("spinbutton", name=re.compile(r"^num_layers"))
    assert box.input_value() == "100"   # was "1"
    box.fill("3.5")
    box.press("Enter")
    page.get_by_text("should be a whole number, not 3.5").first.wait_for()   # a fraction is refused next to the field
    no_exceptions(page)
