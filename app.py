"""simengine studio — entry point: ``streamlit run app.py``.

Navigation is declared here with ``st.navigation``; the pages live in ``pages/``. Because a
folder literally named ``pages/`` exists, Streamlit runs the *requested page directly* (without
this file) for every request until some session has run this file once after a server start
(the legacy multipage mode; see ``PagesManager.uses_pages_directory``). A deep link such as
``/estimate?s=v1....`` opened on a freshly started server therefore never reaches this file.
So every page is self-sufficient: it starts with ``ui.layout.boot()``, which sets the page
config, reads the scenario from the link (``ui.state.ensure_scenario``) and draws the sidebar
navigation itself (the built-in one is hidden in both modes). tests/browser proves it.

Share links point at the root with the page as a parameter (``/?page=estimate&s=…``): the
frontend looks for the server under the page's path first (``/estimate/_stcore/health``, a 404
by design, streamlit/streamlit#7074) whenever an address with a page path is *loaded*, so links
the studio hands out avoid page paths; ``page`` selects the page that runs here. No ``st.Page``
has an icon: a page icon becomes the tab's favicon, fetched from fonts.gstatic.com (offline: a
failed request); the sidebar draws icons from the bundled font instead.
"""

import streamlit as st

from ui.layout import PAGES, ROUTER_FLAG, page_slug

st.session_state[ROUTER_FLAG] = True  # pages link Home to pages/home.py only when this ran
wanted = st.query_params.get("page", "")
slugs = [page_slug(path) for path, _, _ in PAGES]
first = slugs.index(wanted) if wanted in slugs else 0
if wanted and wanted not in slugs:   # a mistyped or old link: say so rather than open Home silently
    from ui import state
    from ui.text import md_code

    state.notify("warning", f"The link asks for a page {md_code(wanted, 40)} that does not exist; Home opened "
                            f"instead (pages: {', '.join(slugs)}).")
if "page" in st.query_params and first == 0:
    del st.query_params["page"]  # Home (or no such page): the root's own address
# another page keeps ``page=`` in the address: it is drawn at the root (the navigation's default
# page), so the address bar reloads and shares it as the sidebar's link does (ui/layout.py boot)
pages = [st.Page(path, title=label, default=(i == first)) for i, (path, label, _) in enumerate(PAGES)]
st.navigation(pages, position="hidden").run()
