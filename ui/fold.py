"""Foldable groups whose content is drawn only while they are open.

A plain ``st.expander`` sends its whole content to the browser even when folded, and the browser
builds every widget inside it (profiled in headless Chromium, ``benchmarks/bench_studio_profile.py``:
the folded editor groups were about a third of the Model and Strategy pages' deltas, DOM nodes
and renderer time). An expander with ``on_change`` keeps its open state on the server (Streamlit
1.67 ``st.expander``: "lazy execution where content only runs when the expander is open";
``streamlit/elements/layouts.py``), so a folded group sends only its header and the page draws
the fields after the user opens it (one rerun).

The open state lives under the expander's key in ``st.session_state``. Streamlit forgets the
state of a widget that a run does not draw (another page), so :func:`group` also records it in
``remember`` (a dict the caller keeps in session state): coming back to the page reopens what
was open and keeps folded what the user folded.
"""

from __future__ import annotations

from typing import Any

import streamlit as st


def group(title: str, key: str, remember: dict[str, bool], default_open: bool, force_open: bool = False,
          **expander_kw: Any) -> tuple[Any, bool]:
    """(the expander, whether it is open now). ``default_open``: the state when this group has
    none yet (first visit, or after its section was replaced); ``force_open``: open it whatever
    the user chose (it holds an error the user must see). Draw the content only when open."""
    if force_open:
        st.session_state[key] = True
    elif key not in st.session_state:
        st.session_state[key] = remember.get(title, default_open)
    # expanded stays constant: Streamlit derives the widget's id from it, and the state is the key's
    box = st.expander(title, expanded=False, key=key, on_change="rerun", **expander_kw)
    is_open = bool(st.session_state.get(key))
    remember[title] = is_open
    return box, is_open
