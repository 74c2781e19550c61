"""Timings of the pipeline simulator (plain script; nothing asserted).

    python benchmarks/bench_simulate.py

Targets (2-core CI box): full ``simulate`` pp=16, vpp=4, m=128 interleaved ≤ 200 ms;
``pipeline_step_time`` pp=16, m=16, 1F1B ≤ 0.3 ms. "cold" includes building the task graph
for a new structure (schedule, pp, m, vpp, flags, comm/bucket counts); "warm" reuses it, as the
estimate/search path does when only costs change.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simengine.sim import ChunkCost, CommTask, PipelineInput, StageCost, pipeline_step_time, simulate  # noqa: E402
from simengine.sim import compiled  # noqa: E402


def make(p: int, vpp: int, m: int, schedule: str, tp_overlap: bool = False, **flags) -> PipelineInput:
    # with tp_overlap each TP collective may run beside its phase's compute (sim/overlap.py)
    fw, bw = (1e-3 / vpp, 2e-3 / vpp) if tp_overlap else (0.0, 0.0)
    ch = ChunkCost(1e-3 / vpp, 2e-3 / vpp, 0.0, forward_comm=(CommTask("tp", 1e-4 / vpp, fw),),
                   backward_comm=(CommTask("tp", 1e-4 / vpp, bw),), activation_bytes=1e9, peak_extra_bytes=1e8)
    st = StageCost(chunks=(ch,) * vpp, p2p_s=5e-5, static_bytes=2e10, dp_grad_buckets_s=(1e-3,) * 4,
                   dp_param_buckets_s=(5e-4,) * 4, optimizer_s=2e-3)
    return PipelineInput((st,) * p, m, schedule, vpp, **flags)


def best_of(fn, repeat: int, number: int = 1, setup=None) -> float:
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best


def main() -> None:
    flags = {"overlap_grad_reduce": True, "overlap_param_gather": True, "tp_overlap": True}
    big = make(16, 4, 128, "interleaved", **flags)

    tl = simulate(big)
    print(f"simulate pp=16 vpp=4 m=128 interleaved ({len(tl.spans)} spans): "
          f"cold {best_of(lambda: simulate(big), 3, setup=compiled.clear_cache) * 1e3:.1f} ms, warm {best_of(lambda: simulate(big), 3) * 1e3:.1f} ms "
          f"(target 200 ms)")

    for label, inp in (("1f1b plain", make(16, 1, 16, "1f1b")),
                       ("1f1b all overlaps", make(16, 1, 16, "1f1b", **flags)),
                       ("zb-h1", make(16, 1, 16, "zb-h1"))):
        def run(inp=inp):
            return pipeline_step_time(inp)

        warm = best_of(run, 5, 200)
        print(f"pipeline_step_time pp=16 m=16 {label}: warm {warm * 1e3:.3f} ms, "
              f"cold {best_of(run, 3, setup=compiled.clear_cache) * 1e3:.2f} ms (target 0.3 ms)")


if __name__ == "__main__":
    main()
