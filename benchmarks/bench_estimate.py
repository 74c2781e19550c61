"""Estimate latency: one estimate of llama3-405b on 16,384 H100s (tp 8, pp 16, dp 128), with
the 1F1B schedule (16 micro-batches) and with the interleaved 'large' preset (vpp 4); and the
published Narayanan et al. 2021 PTD-P 530B run on 560 A100s (tp 8, pp 35, vpp 3, 1,120
micro-batches: the largest pipeline among the validation rows).

Run: python benchmarks/bench_estimate.py [repeats]
"Warm" = after the first call in the process (imports done, module-level caches such as the
GEMM-efficiency memo, the compiled pipeline structure and the priced blocks filled); every timed
call rebuilds the workload, prices its chunks, runs the pipeline engine and the memory model from
the validated Scenario. The blocks' op lists and prices are memoised on what they depend on
(workload/builder.py ``block_phases``, cost/stage.py ``_block_costs``: tp, cp, the micro-batch,
the sequence, the system, … — not pp, vpp, the schedule, ZeRO or the DP flags), and so are a
chunk's plan (``_plan_chunk_kept``: those blocks, what the chunk holds and the recompute) and a
rank's DP work (cost/dp.py ``dp_work``: its parameters, the DP groups and flags), and so are the
pipeline engine's inputs read off them (pipeline.py ``_chunk``/``_stage``: a chunk's and a rank's
costs, by the identity of the priced phases; sim/values.py: a rank's value block), the collective
model's tiers and group placements (cost/comm.py ``_comm_parts``: the system and the group sizes)
and a stage's memory figures (estimate.py ``_stage_memory``: its byte counts), so a what-if
edit of the rest, or a search's next layout of the same block kind, reuses them; "blocks priced
anew" times the same estimate with all those memos emptied before each call (a new block kind).
Times are CPU time (``time.process_time``: steadier than wall time on a shared machine), median
and minimum over the warm calls. Scenario validation (pydantic) is timed separately.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simengine import presets  # noqa: E402
from simengine.config import load_scenario  # noqa: E402
from simengine.estimate import estimate  # noqa: E402
from simengine.validation.published.mapping import published_runs  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "simengine" / "validation" / "data" / "published_runs.csv"


def bench(label: str, cfg: dict, repeats: int) -> None:
    t0 = time.process_time()
    sc = load_scenario(cfg)
    t_validate = time.process_time() - t0
    t0 = time.process_time()
    estimate(sc)
    cold = time.process_time() - t0
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        estimate(sc)
        times.append(time.process_time() - t0)
    anew = []
    for _ in range(repeats):
        _forget_blocks()
        t0 = time.process_time()
        estimate(sc)
        anew.append(time.process_time() - t0)
    s = sc.strategy
    print(f"{label}: {sc.model.name} on {sc.system.num_gpus} x {sc.system.gpu.name}, tp={s.tp} pp={s.pp} dp={sc.dp} "
          f"vpp={s.vpp} m={sc.num_microbatches} schedule={s.schedule}")
    print(f"  first estimate (cold caches): {cold * 1e3:.2f} ms (first validation {t_validate * 1e3:.2f} ms)")
    print(f"  warm estimate: median {statistics.median(times) * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms, "
          f"p90 {sorted(times)[int(0.9 * len(times))] * 1e3:.3f} ms over {repeats}")
    print(f"  warm, blocks priced anew: median {statistics.median(anew) * 1e3:.3f} ms, min {min(anew) * 1e3:.3f} ms")


def _forget_blocks() -> None:
    """A new block kind each call (``estimate.forget_priced``)."""
    from simengine.estimate import forget_priced

    forget_priced()


def narayanan_530b() -> dict:
    runs, _ = published_runs(DATA.read_text())
    return next(r.config for r in runs if r.run_id == "narayanan21_t2_PTD-P_529.6B_560gpu")


def main(repeats: int = 200) -> None:
    large = presets.size_scenario("large")
    one_f_one_b = copy.deepcopy(large)
    one_f_one_b["strategy"].update(schedule="1f1b", vpp=1, recompute_num_layers=4)
    bench("405B, 1F1B", one_f_one_b, repeats)
    bench("405B, 'large' preset (interleaved)", large, repeats)
    bench("530B, Narayanan et al. 2021 PTD-P on 560 A100 (interleaved)", narayanan_530b(), max(repeats // 20, 3))
    cfg = large
    val = []
    for _ in range(50):
        t0 = time.process_time()
        load_scenario(cfg)
        val.append(time.process_time() - t0)
    print(f"scenario validation (pydantic, warm): median {statistics.median(val) * 1e3:.3f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
