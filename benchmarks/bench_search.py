"""Strategy-search speed: the full space (every dimension) of a model on a GPU count.

Run: python benchmarks/bench_search.py [case ...] [--top K] [--objective NAME] [--workers N] [--ray N] [--base SECONDS]
Cases: 70b-64 (llama3-70b on 64 H100, gbs 128 × 8192), 405b-16k (llama3-405b on 16,384 H100,
gbs 2048 × 8192), v3-16k (deepseek-v3 on 16,384 H100, gbs 8192 × 4096), 8b-8 (llama3-8b on 8).
Prints space size, memory checks, estimates timed, seconds and the best layout per executor.
Each search runs in a fresh Python process (nothing memoised or compiled by an earlier one).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simengine import presets  # noqa: E402
from simengine.search import ProcessPool, RayExecutor, make_space, search  # noqa: E402

CASES = {
    "8b-8": ("llama3-8b", 8, 32, 8192),
    "70b-64": ("llama3-70b", 64, 128, 8192),
    "405b-16k": ("llama3-405b", 16384, 2048, 8192),
    "v3-16k": ("deepseek-v3", 16384, 8192, 4096),
}


CHOICES: dict = {}
OBJECTIVE = ["tokens_per_s"]   # --objective (memory_headroom: the objective whose groups have no time bound)


def _lit(v: str):
    import json

    try:
        return json.loads(v)
    except ValueError:
        return v


def space_of(case: str, choices: dict | None = None):
    model, gpus, gbs, seq = CASES[case]
    m = presets.load_spec("models", model).model_dump(mode="json")
    s = presets.load_spec("systems", "h100-sxm5-80gb").model_dump(mode="json")
    return make_space(m, s, global_batch=gbs, seq_len=seq, gpus=[gpus], choices=choices or CHOICES)


def run(case: str, top: int, executor=None, label: str = "in-process") -> float:
    """One search; prints its counts, wall time (perf_counter), this process's CPU time
    (process_time: the driver only when an executor farms the work out) and the 1-minute load."""
    import os

    sp = space_of(case)
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    res = search(sp, objective=OBJECTIVE[0], top=top, executor=executor)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    best = res.candidates[0].label() if res.candidates else "nothing fits"
    tps = f" ({res.candidates[0].tokens_per_s:,.0f} tokens/s)" if res.candidates else ""
    print(f"{case:9s} {label:12s} space {res.space_size:>12,}  memory checks {res.memory_checked:>7,}  timed {res.evaluated:>7,}  "
          f"{dt:8.2f} s wall  {dc:8.2f} s cpu  load {load:.1f}  best: {best}{tps}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=["70b-64"])
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--objective", default="tokens_per_s")
    ap.add_argument("--workers", type=int, default=0, help="also run on a local process pool of N workers")
    ap.add_argument("--ray", type=int, default=0, help="also run on a local Ray cluster of N CPUs")
    ap.add_argument("--space", default="", help="restrict, e.g. tp=4,8;pp=2,4 (python literal values)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--base", type=float, default=0.0,
                    help="in-process wall seconds measured before: skip the in-process run, report speed-ups against it")
    a = ap.parse_args()
    OBJECTIVE[0] = a.objective
    if a.space:
        CHOICES.update({k.strip(): tuple(_lit(v) for v in vals.split(",")) for k, _, vals in
                        (part.partition("=") for part in a.space.split(";"))})
    if a.child:  # one measurement in this fresh process
        print(f"{_one(a.cases[0], a.top, a.child):.6f}")
        return
    for case in a.cases:
        base = a.base or _fresh(case, a.top, "inprocess", a.space)
        for kind, n in (("process", a.workers), ("ray", a.ray)):
            if n:
                t = _fresh(case, a.top, f"{kind}:{n}", a.space)
                print(f"  speed-up {base / t:.2f}x")


def _one(case: str, top: int, how: str) -> float:
    """One search of ``case`` on ``how`` (inprocess, process:N, ray:N) in this process."""
    if how == "inprocess":
        return run(case, top)
    kind, n = how.split(":")
    if kind == "process":
        return run(case, top, ProcessPool(int(n)), f"{n} processes")
    import ray

    ray.init(num_cpus=int(n), include_dashboard=False, log_to_driver=False)
    try:
        return run(case, top, RayExecutor(), f"ray {n} cpus")
    finally:
        ray.shutdown()


def _fresh(case: str, top: int, how: str, space: str) -> float:
    """``_one`` in a fresh Python process: a pool forked from a process that has already searched
    inherits its memos and compiled pipelines (the 405B space then took 4.7 s on two processes
    instead of 9.7 s), which is not what a user starting a search gets."""
    import subprocess

    cmd = [sys.executable, __file__, case, "--top", str(top), "--objective", OBJECTIVE[0], "--child", how] + (["--space", space] if space else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
    print("\n".join(out[:-1]), flush=True)
    return float(out[-1])


if __name__ == "__main__":
    main()
