"""The smallest changes that make a scenario fit in memory, ranked by the throughput they cost.

Each change moves one knob the way that lowers memory (more recompute, a higher ZeRO stage, more
tp/pp/cp/ep, a smaller micro-batch, more GPUs, more layers' activations offloaded to host memory);
when no single change fits, pairs of them are tried.
Every changed scenario goes through the same validation and estimate as everything else. They are
ranked by tokens/s per GPU, so a change that adds GPUs pays for them as a change of layout does.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from ..config.model import ModelSpec
from ..config.scenario import load_scenario
from ..errors import ConfigError
from .prune import memory_and_bound
from .space import LAYER_SPLIT_FIELDS

MAX_PAIRS = 64


def _changes(cfg: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(description, strategy updates, system updates) for each single change."""
    s, g = cfg["strategy"], int(cfg["system"].get("num_gpus", 1))
    out: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if s.get("recompute", "none") == "none":
        out.append(("recompute none → selective", {"recompute": "selective", "recompute_num_layers": None}, {}))
    out += _module_changes(s)
    if s.get("recompute", "none") != "full" or s.get("recompute_num_layers") is not None:
        out.append(("recompute → full (all layers)", {"recompute": "full", "recompute_num_layers": None}, {}))
    for z in range(int(s.get("zero_stage", 1)) + 1, 4):
        out.append((f"zero_stage {s.get('zero_stage', 1)} → {z}", {"zero_stage": z}, {}))
    split = [k for k in LAYER_SPLIT_FIELDS if s.get(k) is not None]
    dims = ("tp", "pp", "cp", "ep") if ModelSpec.model_validate(cfg["model"]).is_moe else ("tp", "pp", "cp")
    for dim in dims:
        v = int(s.get(dim, 1))
        if dim == "pp" and split:  # a layer split is per pipeline stage (space.py LAYER_SPLIT_FIELDS): the even one
            out.append((f"pp {v} → {2 * v} (even layer split)", {"pp": 2 * v, "dp": None, **dict.fromkeys(split)}, {}))
            continue
        out.append((f"{dim} {v} → {2 * v}", {dim: 2 * v, "dp": None}, {}))
    v = int(s.get("vpp", 1))
    if v > 1 and s.get("schedule", "1f1b") == "interleaved":
        # interleaving holds more micro-batches' activations in flight on the first ranks
        # (Narayanan et al. 2021 §2.2.2): the plain 1F1B schedule holds fewer (a split per virtual stage goes with it)
        out.append((f"vpp {v} → 1 (schedule 1f1b)", {"vpp": 1, "schedule": "1f1b", **dict.fromkeys(split)}, {}))
    mbs = int(s.get("micro_batch_size", 1))
    smaller = mbs // 2
    while smaller >= 1:   # every halving: a quarter of the micro-batch often fits at less cost than recompute
        out.append((f"micro_batch_size {mbs} → {smaller}", {"micro_batch_size": smaller}, {}))
        smaller //= 2
    out.append((f"num_gpus {g} → {2 * g}", {"dp": None}, {"num_gpus": 2 * g}))
    return out + _offload_change(cfg)


def _offload_change(cfg: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """More layers' activations offloaded to host memory (StrategySpec.cpu_offload_layers), where
    Megatron-Core runs it (config/scenario.py ``_offload_checks``: pp 1, its unpipelined 1F1B, no
    recompute, Megatron's stack); ``_try`` keeps the fewest layers that fit (``_least_offload``).
    And fewer of them, for a step whose offloaded activations overfill host memory
    (``gpu.host_memory_gib``): the fewest the GPU still holds."""
    from ..config.scenario import offload_issues

    s = cfg["strategy"]
    n, most = int(s.get("cpu_offload_layers") or 0), int(cfg["model"].get("num_layers", 0)) - 1
    if offload_issues(1, most + 1, int(s.get("pp", 1)), s.get("schedule", "1f1b"), s.get("recompute", "none"),
                      s.get("framework", "megatron-te")):
        return []
    out: list[tuple[str, dict[str, Any], dict[str, Any]]] = [(f"cpu_offload_layers {n} → {most}", {"cpu_offload_layers": most}, {})] if most > n else []
    if n > 0:   # fewer: the host holds less (what its memory may need), the GPU more; the fewest the GPU holds
        k = _fewest_that_fit(cfg, "cpu_offload_layers", 0, n)
        if k < n:
            out.append((f"cpu_offload_layers {n} → {k}", {"cpu_offload_layers": k}, {}))
    return out


def _module_changes(s: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Selective recompute of one more Megatron-Core submodule (transformer_config.py
    ``recompute_modules``): each drops only that module's saved tensors (cost/activations.py), so
    it often fits at less throughput than full recompute. A module the model or stack cannot use
    is refused by the scenario checks and skipped."""
    from typing import get_args

    from ..config.strategy import RecomputeModule

    if s.get("recompute", "none") == "full" or s.get("framework", "megatron-te") != "megatron-te":
        return []
    have = list(s.get("recompute_modules") or ["core_attn"]) if s.get("recompute") == "selective" else ["core_attn"]
    return [(f"recompute_modules + {m}", {"recompute": "selective", "recompute_num_layers": None,
                                          "recompute_modules": have + [m]}, {})
            for m in get_args(RecomputeModule) if m not in have]


def _apply(cfg: dict[str, Any], changes) -> dict[str, Any]:
    new = copy.deepcopy(cfg)
    for _, st, sy in changes:
        new["strategy"].update(st)
        new["system"].update(sy)
    return new


def _fewest_that_fit(cfg: dict[str, Any], field: str, lo: int, hi: int) -> int:
    """The least value of the strategy ``field`` in [lo, hi] whose scenario fits (``hi`` when none
    below it does), for a field whose memory falls as it grows: a bisection."""
    while lo < hi:
        mid = (lo + hi) // 2
        if memory_and_bound(load_scenario(_apply(cfg, [("", {field: mid}, {})])))[0] <= 0:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _least_offload(cfg: dict[str, Any], before: int) -> dict[str, Any]:
    """With more layers offloaded than before, the fewest that still fit (memory falls with each
    layer offloaded and time never falls: cost/offload.py)."""
    most = int(cfg["strategy"].get("cpu_offload_layers") or 0)
    if most <= before:
        return cfg
    return _apply(cfg, [("", {"cpu_offload_layers": _fewest_that_fit(cfg, "cpu_offload_layers", before + 1, most)}, {})])


def _least_full_recompute(cfg: dict[str, Any]) -> dict[str, Any]:
    """With full recompute, the fewest recomputed layers that still fit (memory falls with each
    layer recomputed, time rises: prune.py)."""
    sc = load_scenario(cfg)
    if sc.strategy.recompute != "full" or sc.strategy.recompute_num_layers is not None:
        return cfg
    import math

    per_stage = math.ceil(sc.model.num_layers / sc.strategy.pp)
    lo = _fewest_that_fit(cfg, "recompute_num_layers", 1, per_stage)
    return cfg if lo >= per_stage else _apply(cfg, [("", {"recompute_num_layers": lo}, {})])


def fit_changes(config: dict[str, Any], top: int = 10) -> list[dict[str, Any]]:
    """The changes (one, else two together) that make ``config`` fit, best tokens/s per GPU
    first: [{"change", "tokens_per_s", "throughput_lost", "headroom_gib", "strategy", "num_gpus"}],
    ``throughput_lost`` the share of tokens/s per GPU lost against the unfitting scenario. Empty when
    the scenario already fits or nothing tried fits."""
    from .. import api

    base = api.estimate(config)
    if base.fits:
        return []
    singles = _changes(config)
    per_gpu = base.tokens_per_s / base.num_gpus
    found = _try(config, [(c,) for c in singles], per_gpu)
    if not found:
        found = _try(config, pairs_of(singles)[:MAX_PAIRS], per_gpu)
    found.sort(key=lambda d: (-d["tokens_per_s"] / d["num_gpus"], d["change"]))
    return found[:top]


def pairs_of(singles: list) -> list:
    """The pairs of coarse knobs tried when no single change fits: one more recompute module is a
    single change only, and of the micro-batch's halvings the first pairs (every halving pushed a
    MoE's pairs past ``MAX_PAIRS``, and the last ones were never tried)."""
    halvings = [c for c in singles if "micro_batch_size" in c[1]]
    coarse = [c for c in singles if "recompute_modules" not in c[1] and c not in halvings[1:]]
    return [p for p in itertools.combinations(coarse, 2) if not _same_knob(*p)]


def _same_knob(a, b) -> bool:
    # (dp, the recomputed layers and a layer split are what a change resets, not the knob it moves)
    free = {"dp", "recompute_num_layers", *LAYER_SPLIT_FIELDS}
    return bool(set(a[1]) & set(b[1]) - free) or bool(set(a[2]) & set(b[2]))


def _try(config: dict[str, Any], combos, base_per_gpu: float) -> list[dict[str, Any]]:
    from .. import api

    out = []
    for combo in combos:
        applied = _apply(config, combo)
        before = int(config["strategy"].get("cpu_offload_layers") or 0)
        try:
            cfg = _least_full_recompute(applied)
            if any("cpu_offload_layers" in c[1] for c in combo):
                cfg = _least_offload(cfg, before)
            rep = api.estimate(cfg)
        except ConfigError:
            continue
        if not rep.fits:
            continue
        desc = " + ".join(c[0] for c in combo)
        k_off = cfg["strategy"].get("cpu_offload_layers")
        if k_off != applied["strategy"].get("cpu_offload_layers"):   # the fewest offloaded layers that fit
            desc = desc.replace(f"cpu_offload_layers {before} → {applied['strategy']['cpu_offload_layers']}",
                                f"cpu_offload_layers {before} → {k_off}")
        k = cfg["strategy"].get("recompute_num_layers")
        if k != applied["strategy"].get("recompute_num_layers"):   # fewer layers recomputed than all
            if "full (all layers)" in desc:
                desc = desc.replace("full (all layers)", f"full ({k} layers)")
            else:   # the scenario recomputed every layer: the change lets it recompute fewer, and says so
                desc += f" + recompute_num_layers → {k}"
        out.append({"change": desc, "tokens_per_s": rep.tokens_per_s,
                    "throughput_lost": 1.0 - rep.tokens_per_s / rep.num_gpus / base_per_gpu if base_per_gpu > 0 else 0.0,
                    "headroom_gib": rep.free_memory_gib,   # the estimate's own (Report.free_memory_gib)
                    "strategy": cfg["strategy"], "num_gpus": rep.num_gpus,
                    "band": list(rep.uncertainty.get("tokens_per_s", (rep.tokens_per_s, rep.tokens_per_s)))})
    return out
