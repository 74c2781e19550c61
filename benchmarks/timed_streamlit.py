"""``streamlit`` with the CPU time of every script run logged: for the studio benchmarks.

Run: python benchmarks/timed_streamlit.py LOG.jsonl [--profile DIR] run app.py [streamlit options]
Each script run (``ScriptRunner._run_script``: the page script and the reruns it asks for) appends
one JSON line to LOG: ``cpu_ms`` (the script thread's CPU time, ``time.thread_time``), ``wall_ms``,
``end`` (epoch seconds), ``session`` and the first characters of the ``query`` string. With ``--profile DIR`` each run's cProfile stats go to
``DIR/runNNN.prof`` (``python -m pstats``). A benchmark aid only: the studio never imports it.
"""

from __future__ import annotations

import cProfile
import json
import sys
import threading
import time
from pathlib import Path


def _install(log: Path, profile_dir: Path | None) -> None:
    import streamlit.runtime.scriptrunner.script_runner as sr

    original = sr.ScriptRunner._run_script
    lock = threading.Lock()
    count = [0]

    def timed(self, rerun_data):
        prof = cProfile.Profile() if profile_dir else None
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        if prof:
            prof.enable()
        try:
            return original(self, rerun_data)
        finally:
            if prof:
                prof.disable()
            rec = {"cpu_ms": (time.thread_time() - cpu0) * 1e3, "wall_ms": (time.perf_counter() - wall0) * 1e3,
                   "fragment": bool(rerun_data.fragment_id_queue), "end": time.time(),
                   "session": getattr(self, "_session_id", ""), "query": rerun_data.query_string[:80]}
            with lock:
                count[0] += 1
                if prof and profile_dir:
                    prof.dump_stats(str(profile_dir / f"run{count[0]:03d}.prof"))
                with log.open("a") as f:
                    f.write(json.dumps(rec) + "\n")

    sr.ScriptRunner._run_script = timed


def main() -> int:
    args = sys.argv[1:]
    log = Path(args.pop(0))
    profile_dir = None
    if args[:1] == ["--profile"]:
        profile_dir = Path(args[1])
        profile_dir.mkdir(parents=True, exist_ok=True)
        args = args[2:]
    _install(log, profile_dir)
    from streamlit.web.cli import main as streamlit_main

    sys.argv = ["streamlit", *args]
    return streamlit_main()


if __name__ == "__main__":
    sys.exit(main())
