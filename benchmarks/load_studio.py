"""Shared-server load: do heavy links opened by some sessions slow down other users' light pages?

Run: python benchmarks/load_studio.py [--light-loads 8] [--heavy 3] [--time-limit 300] [--heavy-kind links|search]
Loopback only (a studio server on 127.0.0.1 started here), bounded in counts and time, stops by
itself.

1. idle: ``--light-loads`` fresh sessions open the Home page (``?preset=small``) one after the
   other in headless Chromium (each its own browser context); each render time is goto → the
   headline metric drawn → the page idle.
2. loaded: ``--heavy`` sessions keep opening heavy links (1,024 layers, pp 8 · vpp 128:
   Estimate, then Timeline, a new scenario each round so no cache answers) for the whole phase
   while the same light loads are measured again, from the moment every heavy session computes.
   ``--heavy-kind search``: the heavy sessions keep opening Search links instead (Llama-3.1-405B
   on 16,384 H100, every dimension, a new top count each round so no cache answers: ~17 s of
   search each on this machine).

The heavy sessions are protocol-level clients, not browsers (``ProtocolSession``): each load
opens Streamlit's websocket (``/_stcore/stream``), sends the ``BackMsg`` a browser sends on
opening a link (``rerun_script`` with the link's ``query_string`` and the page's ``page_name``,
as streamlit's frontend does on connect) and reads every ``ForwardMsg`` until
``script_finished``. The server does all the work a browser would make it do (session, script
run, worker, serialising the deltas); what is left out is drawing the heavy pages, which a
deployment's server does not host (in-browser that was ~10x the server's CPU and, on a shared
2-core machine, what slowed the light page down).
Prints the median and p95 render time of the light page in both phases and their p95 ratio (the
studio aims for ≤ 2×: heavy work runs in niced worker processes, see ui/worker.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_studio_server import FINISHED, IDLE_JS, CHROME_ARGS, StudioServer, chromium_path  # noqa: E402

HEAVY_GBS = 128  # the heavy link's global batch: 128 micro-batches of 8 stages · 128 chunks
DONE = (*FINISHED, 1)  # ForwardMsg.script_finished: also FINISHED_WITH_COMPILE_ERROR (2 = stopped for a rerun)


def heavy_token(variant: int = 0) -> str:
    """A heavy link (1,024 layers, pp 8 · vpp 128 · 128 micro-batches: 131,072 pipeline tasks).
    Each ``variant`` names its strategy differently: a new scenario that no cache holds, with the
    same work. (Varying the batch instead made every other variant invalid: interleaved needs
    the micro-batch count to be a multiple of pp, so those heavy loads were instant errors.)"""
    from ui.config_io import apply_diff
    from ui.share import encode_token, size_canonical

    return encode_token(apply_diff(size_canonical("medium"), {
        "model": {"num_layers": 1024},
        "strategy": {"name": f"heavy-{variant}", "pp": 8, "vpp": 128, "global_batch_size": HEAVY_GBS}}))


def search_query(variant: int = 0) -> str:
    """A heavy Search link: the ``large`` preset's model and GPU type, every dimension of the
    405B space on 16,384 GPUs; ``variant`` changes the top count (a new search, the same work)."""
    try:
        from ui.search_inputs import encode_inputs
    except ImportError:  # a tree from before ui/search_inputs.py (a "before" measurement)
        from ui.search_view import encode_inputs

    inputs = {"gpus": "16384", "global_batch": 2048, "seq_len": 8192, "objective": "tokens_per_s",
              "top": 10 + variant % 400, "restrict": ""}
    return "preset=large&search=" + encode_inputs(inputs)


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(0.95 * (len(xs) - 1))))]


async def _idle(page, timeout_ms: int) -> None:
    await page.wait_for_function(IDLE_JS, timeout=timeout_ms)
    await page.wait_for_timeout(100)
    await page.wait_for_function(IDLE_JS, timeout=timeout_ms)


async def light_load(browser, url: str, timeout_ms: int) -> float:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    try:
        t0 = time.perf_counter()
        await page.goto(f"{url}/?preset=small")
        await page.wait_for_selector("[data-testid=stMetric]", timeout=timeout_ms)
        await _idle(page, timeout_ms)
        return time.perf_counter() - t0
    finally:
        await ctx.close()


class ProtocolSession:
    """One page load as a browser's websocket makes it, without the browser: connect to
    ``/_stcore/stream`` (subprotocol ``streamlit``; streamlit/web/server/starlette/
    starlette_websocket.py ``_parse_subprotocols``), send ``BackMsg.rerun_script`` with the
    link's query string and page name, read ``ForwardMsg``s until ``script_finished``."""

    def __init__(self, url: str) -> None:
        self.ws_url = url.replace("http://", "ws://", 1) + "/_stcore/stream"
        self.deltas = 0

    async def load(self, page_name: str, query: str, started: asyncio.Event, stop: asyncio.Event,
                   timeout_s: float) -> str:
        """'finished', 'stopped', 'closed' (by the server) or 'timeout'; ``started`` is set once the page's first element
        arrives (the script runs: a heavy page's worker is computing or already answered)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from websockets.asyncio.client import connect

        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_name = page_name
        async with connect(self.ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=timeout_s) as ws:
            await ws.send(msg.SerializeToString())
            reader = asyncio.ensure_future(self._until_finished(ws, started))
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait([reader, stopper], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            for task in (reader, stopper):
                task.cancel()
            if reader in done:
                return "finished" if reader.exception() is None else "closed"
            return "stopped" if stopper in done else "timeout"

    async def _until_finished(self, ws, started: asyncio.Event) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        async for frame in ws:
            if isinstance(frame, str):
                continue
            fwd = ForwardMsg()
            fwd.ParseFromString(frame)
            kind = fwd.WhichOneof("type")
            if kind == "delta":
                self.deltas += 1
                started.set()
            elif kind == "script_finished" and fwd.script_finished in DONE:
                return


async def heavy_session(url: str, index: int, sessions: int, computing: asyncio.Event, stop: asyncio.Event,
                        deadline: float, kind: str = "links") -> dict[str, int]:
    """Open heavy links (Estimate, then Timeline; each a fresh session, as a pasted link in a new
    tab) one after the other, a new scenario each round, until ``stop`` or ``deadline``;
    ``computing`` is set once this user's first heavy page runs. Returns the loads by outcome."""
    from websockets.exceptions import WebSocketException

    client = ProtocolSession(url)
    outcomes: dict[str, int] = {}
    for round_ in range(1000):
        variant = round_ * sessions + index
        loads = [("search", search_query(variant))] if kind == "search" else \
            [(page, "s=" + heavy_token(variant)) for page in ("estimate", "timeline")]
        for page_name, query in loads:
            left = deadline - time.monotonic()
            if stop.is_set() or left <= 0:
                return outcomes
            try:
                got = await client.load(page_name, query, computing, stop, left)
            except (TimeoutError, OSError, WebSocketException) as e:  # the server went away or refused: stop this user
                outcomes[type(e).__name__] = outcomes.get(type(e).__name__, 0) + 1
                return outcomes
            outcomes[got] = outcomes.get(got, 0) + 1
    return outcomes


async def measure(url: str, light_loads: int, heavy: int, time_limit_s: float, exe: str | None,
                  stagger_s: float = 0.5, kind: str = "links") -> dict:
    """Light loads on an idle server, then the same number while ``heavy`` protocol-level
    sessions keep opening heavy links. The loaded phase starts once every heavy session
    computes (its page's script runs)."""
    from playwright.async_api import async_playwright

    deadline = time.monotonic() + time_limit_s
    timeout_ms = int(time_limit_s * 1e3)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=exe, args=CHROME_ARGS, headless=True)
        await light_load(browser, url, timeout_ms)  # warm-up: imports, caches, the small estimate
        idle = [await light_load(browser, url, timeout_ms) for _ in range(light_loads)]
        stop = asyncio.Event()
        computing = [asyncio.Event() for _ in range(heavy)]
        heavies = [asyncio.create_task(heavy_session(url, i, heavy, computing[i], stop, deadline, kind)) for i in range(heavy)]
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in computing)), timeout=max(1.0, time_limit_s / 4))
        await asyncio.sleep(1.0)  # the heavy scenarios are being computed now
        loaded = []
        for _ in range(light_loads):
            if time.monotonic() > deadline or all(h.done() for h in heavies):
                break
            loaded.append(await light_load(browser, url, timeout_ms))
            await asyncio.sleep(stagger_s)
        busy_to_the_end = not any(h.done() for h in heavies)  # every heavy user still hammering
        stop.set()
        outcomes = await asyncio.gather(*heavies, return_exceptions=True)
        await browser.close()
    heavy_loads: dict[str, int] = {}
    for o in outcomes:
        for k, v in (o.items() if isinstance(o, dict) else [(type(o).__name__, 1)]):
            heavy_loads[k] = heavy_loads.get(k, 0) + v
    return {"idle_p95_s": p95(idle), "loaded_p95_s": p95(loaded) if loaded else float("nan"),
            "idle_median_s": statistics.median(idle), "loaded_median_s": statistics.median(loaded) if loaded else float("nan"),
            "ratio": (p95(loaded) / p95(idle)) if loaded else float("nan"),
            "median_ratio": (statistics.median(loaded) / statistics.median(idle)) if loaded else float("nan"),
            "light_loads": len(loaded), "heavy": heavy, "heavy_loads": heavy_loads, "heavy_to_the_end": busy_to_the_end,
            "heavy_computing": all(e.is_set() for e in computing)}


def run(light_loads: int = 8, heavy: int = 3, time_limit_s: float = 300.0, kind: str = "links") -> dict:
    exe = chromium_path()
    with StudioServer() as server:
        return asyncio.run(measure(server.url, light_loads, heavy, time_limit_s, exe, kind=kind))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--light-loads", type=int, default=8)
    ap.add_argument("--heavy", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--heavy-kind", choices=("links", "search"), default="links",
                    help="what the heavy sessions open: heavy Estimate/Timeline links, or Search links")
    a = ap.parse_args()
    res = run(max(2, min(a.light_loads, 50)), max(0, min(a.heavy, 8)), max(30.0, min(a.time_limit, 900.0)), a.heavy_kind)
    print(f"light page (Home, small), {res['light_loads']} loads a phase: median {res['idle_median_s'] * 1e3:.0f} → "
          f"{res['loaded_median_s'] * 1e3:.0f} ms, p95 {res['idle_p95_s'] * 1e3:.0f} → {res['loaded_p95_s'] * 1e3:.0f} ms "
          f"with {res['heavy']} heavy sessions → p95 ratio {res['ratio']:.2f} (median ratio {res['median_ratio']:.2f}); "
          f"heavy loads {res['heavy_loads']}, heavy users busy to the end: {res['heavy_to_the_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
