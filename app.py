"""simengine studio — entry point: ``streamlit run app.py``.

Navigation is declared here with ``st.navigation``; the pages live in ``pages/``. Because a
folder literally named ``pages/`` exists, Streamlit runs the *requested page directly* (without
this file) for every request until some session has run this file once after a server start
(the legacy multipage mode; see ``PagesManager.uses_pages_directory``). A deep link such as
``/estimate?s=v1....`` opened on a freshly started server therefore never reaches this file.
So every page is self-sufficient: it starts with ``ui.layout.boot()``, which sets the page
config, reads the scenario from the link (``ui.state.ensure_scenario``) and draws the sidebar
navigation itself (the built-in one is hidden in both modes). tests/browser proves it.
"""

import streamlit as st

from ui.layout import PAGES, ROUTER_FLAG

st.session_state[ROUTER_FLAG] = True  # pages link Home to pages/home.py only when this ran
pages = [st.Page(path, title=label, icon=icon, default=(i == 0)) for i, (path, label, icon) in enumerate(PAGES)]
st.navigation(pages, position="hidden").run()
