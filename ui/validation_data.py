"""The Validation page's data: ``simengine.api.validate`` once per source and flag per server.

All sources together take tens of seconds, so each (source, calibrated) result is cached with
``st.cache_data`` as plain JSON data; the calibrated flag changes only the B200 rows
(``simengine/validation/result.py``, ``ValidationResult.calibrated``: "b200 rows used the
measured op table + NCCL fits"), so toggling it recomputes only those.
"""

from __future__ import annotations

import logging
from typing import Any

import streamlit as st

from simengine.errors import ConfigError

log = logging.getLogger("simengine.studio")

CALIBRATED_SOURCES = ("b200",)  # the sources the calibrated flag changes (see above)


def sources() -> tuple[str, ...]:
    from simengine import api

    return tuple(api.validation_sources())


@st.cache_data(max_entries=32, show_spinner=False)
def source_result(source: str, calibrated: bool) -> dict[str, Any]:
    """``{"ok": True, "result": <ValidationResult JSON>}`` or ``{"ok": False, "issues": [...]}``."""
    try:
        from simengine import api

        return {"ok": True, "result": api.validate(source, calibrated=calibrated).model_dump(mode="json")}
    except ConfigError as e:
        return {"ok": False, "issues": list(e.issues)}
    except Exception as e:  # noqa: BLE001 — a failing source becomes a message on the page
        log.exception("validation of %s failed", source)
        return {"ok": False, "issues": [("", f"the engine could not validate {source} ({type(e).__name__}: {e})")]}


def collect(calibrated: bool) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """(the result of every source that worked, [(source, field, message)] of those that failed)."""
    results, failures = [], []
    for s in sources():
        res = source_result(s, bool(calibrated) and s in CALIBRATED_SOURCES)
        if res["ok"]:
            results.append(res["result"])
        else:
            failures += [(s, f, m) for f, m in res["issues"]]
    return results, failures


def clear() -> None:
    """Forget every cached result (tests; a server keeps them for its lifetime)."""
    source_result.clear()
