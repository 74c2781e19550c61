"""Where each published, hand-tuned layout ranks in our search of its model / GPU count / batch.

Run: python benchmarks/search_published.py [--sources narayanan21,nemo,megatron-bridge,dgxc-benchmarking] [--top 10] [--limit N] [--only ID,...]
For each mapped run (simengine.validation.published: Narayanan et al. 2021 weak scaling, NeMo 24.07 and
Megatron-Bridge performance pages, NVIDIA/dgxc-benchmarking's NeMo recipes) the search keeps the run's fixed settings (dtype, attention,
overlap flags, cp_comm_type, fused cross-entropy, …) and the schedules Megatron offers (1f1b,
interleaved), and searches tp, pp, vpp, cp, ep, micro-batch size, ZeRO stage, recompute, activation
offload and the uneven first/last splits. Above ``--full-up-to`` GPUs (64) the space is the published layout's
neighbourhood (``neighbourhood``). The published layout's own estimate is ranked against our top
K. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simengine.api import estimate  # noqa: E402
from simengine.errors import ConfigError  # noqa: E402
from simengine.validation.published import published_runs  # noqa: E402  (the one import of the run mapping)
from simengine.search import make_space, search  # noqa: E402
from simengine.search.space import DIMS  # noqa: E402

DATA = ROOT / "simengine" / "validation" / "data" / "published_runs.csv"  # the bundled measured runs
SEARCHED = ("tp", "pp", "vpp", "cp", "ep", "micro_batch_size", "zero_stage", "recompute", "recompute_num_layers",
            "cpu_offload_layers")
SCHEDULES = ("1f1b", "interleaved")
# ZeRO stages the source's framework offered: Megatron-LM of 2021 had no optimizer sharding (PTD-P
# runs, Narayanan et al. 2021 §5.9 compares ZeRO-3 as a separate system); NeMo 24.07's
# Megatron-Core had the distributed optimizer (ZeRO-1) only; Megatron-Bridge adds Megatron-FSDP.
FRAMEWORK_ZERO = {"narayanan21": (0,), "nemo": (0, 1)}
# a source whose runs are another's recipes: NVIDIA/dgxc-benchmarking runs NeMo's (the tables below)
SAME_AS = {"dgxc-benchmarking": "nemo"}
# what else the framework of the time lacked: Megatron-LM of 2021 had neither context parallelism
# (Megatron-Core, 2023) nor selective recompute (Korthikanti et al. 2022, §5) nor activation offload
FRAMEWORK_PINS = {"narayanan21": {"cp": (1,), "recompute": ("none", "full"), "cpu_offload_layers": (0,)}}


def layout(s: dict, gpus: int) -> str:
    parts = [f"tp{s['tp']}", f"pp{s['pp']}"]
    parts += [f"vpp{s['vpp']}"] if s.get("vpp", 1) > 1 else []
    parts += [f"cp{s['cp']}"] if s.get("cp", 1) > 1 else []
    parts += [f"ep{s['ep']}"] if s.get("ep", 1) > 1 else []
    ends = (s.get("decoder_first_pipeline_num_layers"), s.get("decoder_last_pipeline_num_layers"))
    parts += [f"split{ends[0] or '-'}/{ends[1] or '-'}"] if any(ends) else []
    rc = s.get("recompute", "none")
    rc = f"full{s['recompute_num_layers']}" if rc == "full" and s.get("recompute_num_layers") else rc
    mods = list(s.get("recompute_modules") or ["core_attn"])
    rc = f"{rc}({'+'.join(mods)})" if rc == "selective" and mods != ["core_attn"] else rc
    off = [f"off{s['cpu_offload_layers']}"] if s.get("cpu_offload_layers") else []
    return " ".join(parts + [f"mbs{s['micro_batch_size']}", f"z{s.get('zero_stage', 1)}", f"rc-{rc}"] + off)


def unique(runs):
    seen, out = set(), []
    for r in runs:
        s = r.config["strategy"]
        key = (r.config["model"].get("name"), r.config["system"].get("name"), r.config["system"]["num_gpus"],
               tuple(sorted((k, str(v)) for k, v in s.items() if k != "name")))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def neighbourhood(s: dict, model: dict) -> dict:
    """The restricted space of a large run: tp within one 8-GPU node, pp and cp at half, the same
    and twice the published value, ep at half to twice, micro-batch at half to twice; vpp, ZeRO
    stage, recompute (every level and layer count) and the uneven first/last splits stay free."""
    def around(v: int, lo: int = 1) -> tuple:
        return tuple(sorted({x for x in (v // 2, v, 2 * v) if x >= lo}))

    out = {"tp": (1, 2, 4, 8), "pp": around(int(s.get("pp", 1))), "cp": around(int(s.get("cp", 1))),
           "micro_batch_size": around(int(s.get("micro_batch_size", 1)))}
    if int(model.get("num_experts") or 0):
        out["ep"] = tuple(e for e in around(int(s.get("ep", 1))) if int(model["num_experts"]) % e == 0)
    return out


# Recipe settings tied to the published layout (simengine.validation.published: mbridge_recipes.apply_recipe,
# settings.py): Megatron-Bridge / NeMo turn sequence parallelism on exactly when tp > 1, a
# pipeline_model_parallel_layout has one entry per virtual stage of the published pp·vpp, and the
# recipe's moe_a2a_overlap is applied only where Megatron allows it (pp 1 or vpp > 1). Fixed in the
# base they would make every other layout invalid, so they are dropped (the search's uneven
# first/last splits stand in for the layout) or searched both ways (``variants``).
TIED_TO_LAYOUT = {"megatron-bridge": ("sequence_parallel", "pipeline_layers"), "nemo": ("sequence_parallel",)}


# NeMo's and Megatron-Bridge's recipes send pipeline activations off the compute stream for every
# interleaved layout (validation/published/settings.py ``_nemo``), and Megatron ignores the flag on
# plain 1F1B (StrategySpec.p2p_overlapped): on in the base, every candidate runs as the recipe would.
RECIPE_P2P_OVERLAP = ("nemo", "megatron-bridge")


def variants(base: dict, pins: dict) -> list[tuple[dict, dict]]:
    """(base, pins) pairs covering a recipe's conditional settings both ways: the all-to-all overlap
    on (only the layouts that allow it stay valid) and off; the recipe's selective recompute_modules
    (recompute pinned to selective) and the search's own recompute levels without them."""
    out = [(base, pins)]
    if base.get("overlap_moe_expert_parallel_comm"):
        out = [({**b, "overlap_moe_expert_parallel_comm": on}, p) for b, p in out for on in (True, False)]
    mods = base.get("recompute_modules")
    if mods and list(mods) != ["core_attn"]:
        out = [v for b, p in out for v in (({**b, "recompute_modules": mods}, {**p, "recompute": ("selective",)}),
                                           ({k: x for k, x in b.items() if k != "recompute_modules"}, p))]
    return out


def search_variants(cfg: dict, base: dict, pins: dict, g: int, top: int):
    """The best ``top`` candidates over every variant's search, and the number timed."""
    s = cfg["strategy"]
    found, timed = [], 0
    for b, p in variants(base, pins):
        space = make_space(cfg["model"], cfg["system"], global_batch=s["global_batch_size"], seq_len=s["seq_len"],
                           gpus=[g], choices=p, base=b)
        res = search(space, top=top)
        found += res.candidates
        timed += res.evaluated
    return sorted(found, key=lambda c: -c.tokens_per_s)[:top], timed


def rank_one(run, top: int, full_up_to: int = 64) -> dict:
    cfg = run.config
    s = cfg["strategy"]
    pins = {k: (s.get(k),) for k in DIMS if k not in SEARCHED and k != "schedule" and k in s}
    pins["schedule"] = SCHEDULES
    src = SAME_AS.get(run.source, run.source)
    if src in FRAMEWORK_ZERO and not run.run_id.startswith("narayanan21_t2_ZeRO"):
        pins["zero_stage"] = FRAMEWORK_ZERO[src]
    pins.update(FRAMEWORK_PINS.get(src, {}))
    drop = ("global_batch_size", "seq_len", "dp", "name") + TIED_TO_LAYOUT.get(src, ())
    base = {k: v for k, v in s.items() if k not in DIMS and k not in drop}
    if src in RECIPE_P2P_OVERLAP:
        base["overlap_p2p_comm"] = True
    g = int(cfg["system"]["num_gpus"])
    if g > full_up_to:
        near = neighbourhood(s, cfg["model"])
        pins.update({k: v for k, v in near.items() if k not in pins})
    t0 = time.perf_counter()
    cands, timed = search_variants(cfg, base, pins, g, top)
    dt = time.perf_counter() - t0
    note = ""
    try:
        pub = estimate(cfg)
        tps, fits = pub.tokens_per_s, pub.fits
        if not fits:
            gpu = max(pub.memory_by_stage, key=lambda x: x.reserved_gib)
            note = f" (OOM in our model: {gpu.reserved_gib:.1f} GiB reserved on stage {gpu.stage})"
    except ConfigError as e:
        tps, fits, note = 0.0, False, f" (not estimable: {e})"
    best = cands[0] if cands else None
    if best is None:
        rank = "nothing fits"
    else:
        faster = sum(1 for c in cands if c.tokens_per_s > tps * (1 + 1e-9))
        rank = (str(faster + 1) if faster < len(cands) or len(cands) < top else f">{top}") if fits else "-"
        if fits and tps > best.tokens_per_s * (1 + 1e-9):   # its space holds the published layout: a miss, said
            note += " (faster than the search's best: a layout outside the space searched, or missed)"
        rank += note
    return {"run": run.run_id, "gpus": g, "published": layout(s, g), "pub_tps": tps, "rank": rank,
            "best": layout(best.strategy, g) if best else "-", "best_tps": best.tokens_per_s if best else 0.0,
            "tie": bool(best and fits and tps >= best.band["tokens_per_s"][0]), "seconds": dt, "timed": timed}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sources", default="narayanan21,nemo,megatron-bridge,dgxc-benchmarking")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--max-gpus", type=int, default=0, help="skip runs on more GPUs (search time grows with the space)")
    ap.add_argument("--full-up-to", type=int, default=64, help="search the full space up to this many GPUs, the "
                                                                  "published layout's neighbourhood above (neighbourhood())")
    ap.add_argument("--skip", default="", help="comma-separated run ids to leave out (e.g. the rows already ranked)")
    ap.add_argument("--only", default="", help="comma-separated run-id substrings: rank only the runs matching one")
    a = ap.parse_args()
    runs, _ = published_runs(DATA.read_text())
    runs = unique([r for r in runs if r.source in a.sources.split(",")])
    skip = set(filter(None, a.skip.split(",")))
    runs = [r for r in runs if r.run_id not in skip]
    only = [x for x in a.only.split(",") if x]
    if only:
        runs = [r for r in runs if any(x in r.run_id for x in only)]
    if a.max_gpus:
        runs = [r for r in runs if r.config["system"]["num_gpus"] <= a.max_gpus]
    if a.limit:
        runs = runs[:a.limit]
    print("| run | GPUs | published layout | our tokens/s for it | its rank | our best layout | best tokens/s | best / published | within band | search s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        d = rank_one(r, a.top, a.full_up_to)
        ratio = d["best_tps"] / d["pub_tps"] if d["pub_tps"] else float("nan")
        print(f"| {d['run']} | {d['gpus']} | {d['published']} | {d['pub_tps']:,.0f} | {d['rank']} | {d['best']} | "
              f"{d['best_tps']:,.0f} | {ratio:.3f} | {'yes' if d['tie'] else 'no'} | {d['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
