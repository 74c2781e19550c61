"""The studio server does not walk its whole heap after every script run (ui/heap.py)."""

from __future__ import annotations

import gc
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_full_collection_after_each_script_run():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["runner"]["postScriptGC"] is False


def test_the_first_page_run_freezes_the_heap_once():
    from app_walk import open_app
    from ui import heap

    gc.unfreeze()  # as in a fresh server process
    heap._DONE.clear()
    open_app("pages/strategy.py")
    assert gc.get_freeze_count() > 0  # ui.layout.boot froze what the first run left alive
    assert heap.freeze_startup_heap() is False  # and never again: later objects stay collectable
