"""The server's heap and Python's cycle collector: no full collection on every script run.

Streamlit's ``runner.postScriptGC`` (off in .streamlit/config.toml) runs ``gc.collect(2)`` after
each script run: a walk over every tracked object of the server (pandas, Altair, Streamlit and
the engine: ~135k objects, ~100 ms of one core on the 2-core machine), holding the GIL while
other sessions' scripts and the websocket thread wait. Python's generational collector still
frees cycles; ``freeze_startup_heap`` moves what exists after the first page run (modules,
schemas, presets: all alive until the server stops) into the permanent generation
(``gc.freeze``, Python ≥ 3.7), so the collector's occasional full passes walk only newer objects.
"""

from __future__ import annotations

import gc
import threading

_DONE = threading.Event()
_LOCK = threading.Lock()


def freeze_startup_heap() -> bool:
    """Once per process: collect, then freeze the surviving heap. True on the call that did it."""
    if _DONE.is_set():
        return False
    with _LOCK:
        if _DONE.is_set():
            return False
        gc.collect()
        gc.freeze()
        _DONE.set()
        return True
