"""Headless Chromium on the Calibration page: upload a GEMM sweep and two nccl-tests logs, see the
plots and the coverage, save the system by name, pick it on the System page, estimate.
Screenshot: tests/.artifacts/screenshots/calibration.png (tools/refresh_screenshots.py copies it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_studio_browser import shot

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NCCL = ROOT / "tests" / "data" / "calibration" / "nccl_logs"


@pytest.fixture
def systems_dir(tmp_path, monkeypatch):
    """Set before the server starts (the fixture order below), so the studio saves here."""
    d = tmp_path / "systems"
    monkeypatch.setenv("SIMENGINE_SYSTEMS_DIR", str(d))
    return d


def settle(page, ready: str = "[data-testid=stMain] h1") -> None:
    page.wait_for_selector(ready, state="visible")
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=60_000)
    page.wait_for_timeout(400)


def no_exceptions(page) -> None:
    assert page.locator("[data-testid=stException]").count() == 0, page.locator("[data-testid=stException]").first.inner_text()
    assert not page.page_errors, page.page_errors


def upload(page, label: str, files) -> None:
    page.get_by_role("region", name=label).get_by_test_id("stFileUploaderDropzoneInput").set_input_files(files)
    page.wait_for_timeout(500)




def test_calibrate_save_pick_estimate(systems_dir, fresh_server, page, tmp_path):
    sweep = tmp_path / "gemm_sweep.csv"
    sweep.write_text("m,n,k,dtype,efficiency\n" + "\n".join(
        f"{256 * (1 + i % 6)},{1024 * (1 + i % 4)},{512 * (1 + i % 5)},bf16,{0.35 + 0.01 * i:.3f}" for i in range(30)) + "\n")
    page.goto(f"{fresh_server.url}/calibration?preset=small")
    settle(page)
    upload(page, "GEMM sweep CSV (m,n,k", str(sweep))
    upload(page, "nccl-tests logs", [str(NCCL / "xxrjun-c01-n1g8_5coll_8gpu.log"),
                                     str(NCCL / "dstack-a3mega-c0_all_gather_16gpu.log")])
    settle(page)
    page.get_by_role("button", name="Calibrate the scenario's system").click()
    settle(page, "[data-testid=stMetric]")
    page.wait_for_function("() => document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 2",
                           timeout=60_000)
    main = page.locator("[data-testid=stMain]")
    text = main.inner_text()
    for want in ("GEMM points", "Collective fits used", "Coverage of the current scenario", "Fits and where they came from"):
        assert want in text, want
    # the result is on screen, not above the fold
    top = page.locator("[data-testid=stMetric]").first.bounding_box()
    assert top is not None and 0 <= top["y"] < 1000
    no_exceptions(page)
    page.get_by_label("Save as (name)").fill("lab-h100")
    page.get_by_label("Save as (name)").press("Enter")
    settle(page)
    page.get_by_role("button", name="Save as a named system").click()
    settle(page)
    assert (systems_dir / "lab-h100.json").is_file()
    assert "Saved as" in main.inner_text()
    shot(page, "calibration")
    page.locator("[data-testid=stSidebar]").get_by_role("link", name="System", exact=True).click()
    settle(page, "[data-testid=stSelectbox]")
    page.locator("[data-testid=stSelectbox]").first.click()
    page.get_by_role("option", name="user: lab-h100").click()
    page.get_by_role("button", name="Load preset").click()
    settle(page)
    assert "lab-h100" in page.locator("[data-testid=stSidebar]").inner_text() or \
        "lab-h100" in page.locator("[data-testid=stMain]").inner_text()
    page.locator("[data-testid=stSidebar]").get_by_role("link", name="Estimate", exact=True).click()
    page.wait_for_url("**/estimate**")
    settle(page, "[data-testid=stMetric]")
    page.get_by_text("Step time").first.wait_for(timeout=60_000)
    assert "Step time" in page.locator("[data-testid=stMain]").inner_text()
    no_exceptions(page)
