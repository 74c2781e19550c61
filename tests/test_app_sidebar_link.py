"""The sidebar stays compact with a long share link (a calibrated or catalogue system), and the
link the studio hands out points at the root with ``page=`` (no page path: see app.py)."""

from __future__ import annotations

from app_walk import open_app, scenario
from ui.config_io import apply_diff
from ui.share import encode_token, size_canonical


def _catalogue_system_link() -> str:
    rows = [{"m": 512 * (i + 1), "n": 4096, "k": 1024 + 7 * i, "b": 1, "dtype": "bf16", "layout": None,
             "efficiency": round(0.3 + 0.004 * i, 4)} for i in range(120)]
    cfg = apply_diff(size_canonical("small"), {"system": {"efficiency": {"gemm_table": rows}}})
    return encode_token(cfg)


def test_long_link_folds_into_an_expander():
    tok = _catalogue_system_link()
    assert len(tok) > 1000
    at = open_app("pages/model.py", s=tok)
    assert not at.exception
    side = at.sidebar
    assert len(side.code) == 1
    box = next(ex for ex in side.expander if ex.label.startswith("Show or copy"))
    assert tok in box.code[0].value  # the full link, with its copy button, one click away
    visible = "".join(str(m.value) for m in side.markdown) + "".join(str(c.value) for c in side.caption)
    assert len(visible) < 800 and tok not in visible


def test_short_link_is_shown_directly():
    at = open_app("pages/strategy.py")
    assert len(at.sidebar.code) == 1 and not [ex for ex in at.sidebar.expander if ex.label.startswith("Show or copy")]


def test_share_link_names_the_page_and_opens_it():
    at = open_app("pages/estimate.py", preset="medium")
    link = at.sidebar.code[0].value
    assert link.startswith("?page=estimate&preset=medium")
    fresh = open_app("pages/home.py", page="estimate", preset="medium")  # the link opened at the root
    assert not fresh.exception
    assert fresh.title[0].value == "Estimate"
    assert scenario(fresh) == size_canonical("medium")
    assert dict(fresh.query_params) == {"page": "estimate", "preset": "medium"}  # the page kept: a reload opens it again
    assert not fresh.info
