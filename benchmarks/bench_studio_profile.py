"""Where the browser spends a studio interaction: renderer main-thread time by phase, and what the
page holds (loopback only, headless Chromium).

Run: python benchmarks/bench_studio_profile.py [--repeats N]
For the interactions of ``bench_studio.py`` (open Model, Estimate, Timeline, Strategy from the
sidebar; a Strategy field edit) on the ``medium`` preset it prints medians of: the renderer's
main-thread task time and its script / style / layout parts (Chrome DevTools Protocol
``Performance.getMetrics``: ``TaskDuration``, ``ScriptDuration``, ``RecalcStyleDuration``,
``LayoutDuration``, in the page's renderer only), the number of deltas the server sent
(``ForwardMsg.delta``: one per element or widget, from the websocket), and the element
containers on the page afterwards in the main area and in the sidebar (``stElementContainer``)
with the widgets among them. A profiling aid: it prints and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_studio import _edit, _nav  # noqa: E402
from bench_studio_server import (CHROME_ARGS, RunWatcher, StudioServer, chromium_path, on_forward_msg,  # noqa: E402
                                 wait_idle)

METRICS = ("TaskDuration", "ScriptDuration", "RecalcStyleDuration", "LayoutDuration")
# widgets: every element container holding an input the user can change
COUNT_JS = """() => {
  const n = (root, sel) => root ? root.querySelectorAll(sel).length : 0;
  const main = document.querySelector('[data-testid=stMain]'), side = document.querySelector('[data-testid=stSidebar]');
  const w = 'input, textarea, button, [role=slider], [data-baseweb=select]';
  return {main: n(main, '[data-testid=stElementContainer]'), side: n(side, '[data-testid=stElementContainer]'),
          main_widgets: n(main, w), side_widgets: n(side, w), dom: document.getElementsByTagName('*').length};
}"""


class Deltas:
    """Counts ``ForwardMsg.delta`` messages on the page's websocket."""

    def __init__(self, page) -> None:
        self.count = 0
        on_forward_msg(page, self._msg)

    def _msg(self, msg) -> None:
        if msg.WhichOneof("type") == "delta":
            self.count += 1


def _metrics(cdp) -> dict[str, float]:
    got = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {k: float(got.get(k, 0.0)) for k in METRICS}


def run(repeats: int) -> dict[str, dict[str, float]]:
    from playwright.sync_api import sync_playwright

    rows: dict[str, list[dict[str, float]]] = {}
    exe = chromium_path()
    with tempfile.TemporaryDirectory() as tmp, StudioServer(run_log=Path(tmp) / "runs.jsonl") as server, \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROME_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        runs, deltas = RunWatcher(page), Deltas(page)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
        page.goto(f"{server.url}/strategy?preset=medium")
        page.get_by_role("spinbutton", name="global_batch_size [sequences]").wait_for(timeout=60_000)
        wait_idle(page)

        def measure(label: str, action) -> None:
            m0, d0 = _metrics(cdp), deltas.count
            t = action()
            m1 = _metrics(cdp)
            row = {k: (m1[k] - m0[k]) * 1e3 for k in METRICS}
            row.update(wall=t * 1e3, deltas=deltas.count - d0, **page.evaluate(COUNT_JS))
            rows.setdefault(label, []).append(row)

        for i in range(repeats):
            for label in ("Model", "Estimate", "Timeline", "Strategy"):
                measure(f"open {label}", lambda label=label: _nav(page, runs, label))
            measure("Strategy edit", lambda i=i: _edit(page, runs, 64 + 8 * i))
            time.sleep(0.05)
        browser.close()
    return {k: {f: statistics.median(r[f] for r in v[1:] or v) for f in v[0]} for k, v in rows.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    res = run(max(2, min(args.repeats, 20)))
    print(f"{'':>15} {'wall':>6} {'task':>6} {'script':>6} {'style':>6} {'layout':>6} {'deltas':>6} "
          f"{'main el':>7} {'widgets':>7} {'side el':>7} {'widgets':>7} {'DOM':>6}   (medians, ms)")
    for label, r in res.items():
        print(f"{label:>15} {r['wall']:6.0f} {r['TaskDuration']:6.0f} {r['ScriptDuration']:6.0f} "
              f"{r['RecalcStyleDuration']:6.0f} {r['LayoutDuration']:6.0f} {r['deltas']:6.0f} {r['main']:7.0f} "
              f"{r['main_widgets']:7.0f} {r['side']:7.0f} {r['side_widgets']:7.0f} {r['dom']:6.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
