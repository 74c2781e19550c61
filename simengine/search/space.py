"""The search space: which values each strategy dimension may take, and the layouts it spans.

A ``SearchSpace`` is plain picklable data (dicts, tuples, numbers) so any executor can carry it.
Validity has one source of truth: ``simengine.config.scenario.check_scenario`` (the same checks
``load_scenario`` runs). The space only *proposes* values; a proposal the scenario rejects is
kept as a rejection with the scenario's own message.

Dimensions are split the way SimuMax separates a unit's local cost from the pipeline layout
(SimuMax ``search_best_parallel_strategy``): a *layout* (gpus, tp, pp, vpp, schedule, cp,
cp_comm_type, ep, etp) fixes the groups; *knobs* (micro_batch_size, zero_stage, recompute,
recompute_num_layers, cpu_offload_layers and the overlap flags) are searched inside each layout.
Recompute and activation offload are one knob, the *activation option* (``recompute_options``):
Megatron-Core runs offload only without recompute (``config/scenario.py`` ``_offload_checks``).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

LAYOUT_DIMS = ("tp", "pp", "vpp", "schedule", "cp", "cp_comm_type", "ep", "etp")
KNOB_DIMS = ("micro_batch_size", "zero_stage", "recompute", "recompute_num_layers", "cpu_offload_layers",
             "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap")
DIMS = LAYOUT_DIMS + KNOB_DIMS
FLAG_DIMS = ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap")
RECOMPUTE_LEVELS = ("none", "selective", "full")
CP_TYPES = ("p2p", "a2a", "allgather")
MAX_MICRO_BATCH = 16        # default cap on proposed micro-batch sizes (user can widen with --space)
MAX_GPU_COUNTS = 64


def schedule_names() -> tuple[str, ...]:
    """Every registered pipeline schedule (the one place the search asks the registry)."""
    from ..schedule import SCHEDULES

    return tuple(SCHEDULES)


SPLIT_FIELDS = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
# every field that fixes where the layers go: tied to pp·vpp (an explicit layout has one entry per
# virtual stage, Megatron-Core pipeline_model_parallel_layout), so a change of pp drops them
LAYER_SPLIT_FIELDS = (*SPLIT_FIELDS, "pipeline_layers")
SPLIT_SPREAD = 3   # the first/last rank may hold up to this many layers fewer than a middle rank


def uneven_splits(layers: int, pp: int, nch: int) -> list[tuple[int, int]]:
    """(first, last) pipeline-rank layer counts that place a layer count the even split cannot
    (``layers`` not divisible by pp·nch) the way Megatron-LM allows: the middle ranks hold
    M = ceil(layers / pp) each, the first and last ranks the rest, each between M − SPLIT_SPREAD
    and M, every rank's count divisible by its nch chunks (Megatron-Core
    ``TransformerConfig.__post_init__`` / ``transformer_block.get_num_layers_to_build`` with
    --decoder-first/last-pipeline-num-layers; the rule is ``config.layout._by_rank``). E.g.
    Llama-3-405B (126 layers) at pp 16: (6, 8), (7, 7), (8, 6) — Dubey et al. 2024 §3.3.2 run the
    (7, 7) one; DeepSeek-V3 (61) at pp 16: (1..4, 5 − first). Empty when the even split works."""
    if pp < 2 or layers % (pp * nch) == 0:
        return []
    mid = -(-layers // pp)
    rest = layers - mid * (pp - 2)
    if mid % nch:
        return []
    lo = max(1, mid - SPLIT_SPREAD)
    return [(f, rest - f) for f in range(lo, mid + 1)
            if lo <= rest - f <= mid and f % nch == 0 and (rest - f) % nch == 0]


@dataclass(frozen=True)
class SearchSpace:
    """What to search: a model, a system, fixed training targets and per-dimension choices.

    ``choices[dim]`` restricts a dimension to the listed values (a pin is a one-value list);
    a dimension without an entry takes its default proposals (``dim_values``)."""

    model: dict[str, Any]
    system: dict[str, Any]
    base: dict[str, Any]                      # fixed strategy fields: global_batch_size, seq_len, dtype, …
    gpus: tuple[int, ...]
    choices: dict[str, tuple] = field(default_factory=dict)
    token_budget: float | None = None

    def key(self) -> str:
        """Canonical text of the space (cache key, share link payload)."""
        import json

        return json.dumps({"model": self.model, "system": self.system, "base": self.base, "gpus": list(self.gpus),
                           "choices": {k: list(v) for k, v in sorted(self.choices.items())},
                           "token_budget": self.token_budget}, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    """The divisors of ``n``, ascending (memoised: a 16,384-GPU space asks for the same few
    per-replica batches once per layout, 1.5 M times)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


def _allowed(space: SearchSpace, dim: str, proposals) -> list:
    if dim not in space.choices:
        return list(proposals)
    return list(space.choices[dim])


def layouts(space: SearchSpace, gpus: int) -> list[dict[str, Any]]:
    """Every layout of ``gpus`` GPUs the choices allow (validity is checked later, by the scenario).

    A dimension that cannot matter is not varied: cp_comm_type only when cp > 1, the schedule only
    when pp > 1, vpp only for the interleaved schedule, ep/etp only for MoE models."""
    m = space.model
    layers = int(m["num_layers"])
    moe = int(m.get("num_experts") or 0) > 0
    out = []
    for tp in _allowed(space, "tp", divisors(gpus)):
        rest_tp = gpus // tp if gpus % tp == 0 else 0
        for pp in _allowed(space, "pp", [d for d in divisors(max(rest_tp, 1)) if d <= layers] if rest_tp else [1]):
            for sched, vpp, split in _schedules(space, pp, layers):
                rest = gpus // (tp * pp) if gpus % (tp * pp) == 0 else 0
                cps = [d for d in divisors(max(rest, 1)) if space.base["seq_len"] % (2 * d) == 0 or d == 1] if rest else [1]
                for cp in _allowed(space, "cp", cps):
                    # at cp 1 the type changes nothing: one value, the pinned one if any (a pin is never shown dropped)
                    types = _allowed(space, "cp_comm_type", CP_TYPES) if cp > 1 else \
                        _allowed(space, "cp_comm_type", [space.base.get("cp_comm_type", "p2p")])[:1]
                    for cpt, (ep, etp) in itertools.product(types, _experts(space, moe, gpus, tp, pp, cp)):
                        out.append({"tp": tp, "pp": pp, "vpp": vpp, "schedule": sched, "cp": cp,
                                    "cp_comm_type": cpt, "ep": ep, "etp": etp, **split})
    return out


def _schedules(space: SearchSpace, pp: int, layers: int) -> list[tuple[str, int, dict[str, int]]]:
    """(schedule, vpp, split fields) triples. A non-divisible layer count keeps the even split
    (simengine places it, with a note that Megatron refuses it) and adds the Megatron-legal
    uneven first/last splits (``uneven_splits``), also for vpp values they make possible; a
    split fixed in the base is left alone."""
    pinned = any(space.base.get(f) is not None for f in SPLIT_FIELDS) or space.base.get("pipeline_layers") is not None
    if pp == 1:
        names = _allowed(space, "schedule", ["1f1b"])
        return [(s, v, {}) for s in names for v in _allowed(space, "vpp", [1])]
    out: list[tuple[str, int, dict[str, int]]] = []
    for s in _allowed(space, "schedule", schedule_names()):
        if s == "interleaved":
            # even chunks (Megatron needs num_layers divisible by pp·vpp), or an uneven split
            # whose every rank divides by vpp
            vp = [v for v in range(2, layers // pp + 1)
                  if layers % (pp * v) == 0 or (not pinned and (uneven_splits(layers, pp, v) or _accounted(pp, v, layers)))]
            vals = _allowed(space, "vpp", vp)
        else:
            vals = _allowed(space, "vpp", [1])
        for v in vals:
            nch = 2 if s == "dualpipev" else v
            splits = [] if pinned or s == "dualpipev" else uneven_splits(layers, pp, nch)  # the V: both ends on rank 0
            legal = layers % (pp * nch) == 0 or s != "interleaved" or (not pinned and _accounted(pp, v, layers))
            if legal and not _places_as_one(s, pp, v, layers, splits):
                out.append((s, v, {}))
            elif s == "interleaved" and not splits and "vpp" in space.choices:   # said if nothing else is left
                _per_space(space).setdefault("unplaced", {})[(pp, v)] = layers
            out += [(s, v, dict(zip(SPLIT_FIELDS, fl))) for fl in splits]
    return out


def why_empty(space: SearchSpace) -> str:
    """Why ``layouts`` proposed nothing for any GPU count (called after them): the one rule the
    space applies before the scenario check — Megatron-Core's even chunks of the interleaved
    schedule, or one of its uneven first/last splits — on a vpp the user asked for; else the
    restrictions in general (without restrictions tp = pp = cp = 1 is always proposed)."""
    unplaced = _per_space(space).get("unplaced")
    if unplaced:
        (pp, v), layers = min(unplaced.items())
        return (f"the pins and restrictions leave no layout to search: num_layers={layers} is not divisible by "
                f"pp*vpp = {pp}*{v} = {pp * v}, and no uneven first/last split gives every rank a multiple of vpp "
                "layers (Megatron-Core get_num_layers_to_build)")
    return "the pins and restrictions leave no layout to search: restrict fewer dimensions"


@lru_cache(maxsize=4096)
def _accounted(pp: int, vpp: int, layers: int) -> bool:
    """Whether the interleaved schedule's default placement of ``layers`` that pp·vpp does not
    divide is the split Megatron-LM builds with --account-for-embedding/loss-in-pipeline-split
    (``config.notes.megatron_account_for``: the embedding and the loss count as a layer each).
    Llama-3-405B's 126 layers at pp 16 · vpp 4 (128 / 64 = 2 a virtual stage, one fewer on the
    first and the last), Megatron-Bridge's 405B recipe: the estimate accepted it, the search never
    proposed it."""
    from types import SimpleNamespace

    from ..config.layout import strategy_stage_counts
    from ..config.notes import megatron_account_for

    st = SimpleNamespace(schedule="interleaved", pp=pp, vpp=vpp, decoder_first_pipeline_num_layers=None,
                         decoder_last_pipeline_num_layers=None, pipeline_layers=None)
    counts, issues = strategy_stage_counts(st, layers)
    return not issues and bool(megatron_account_for(layers, pp, vpp, counts))


def _places_as_one(schedule: str, pp: int, vpp: int, layers: int, splits: list[tuple[int, int]]) -> bool:
    """Whether one of the uneven ``splits`` places every layer where the default split does
    (``config.layout.strategy_stage_counts``, the one owner of placement): then they are one
    layout, and only the split Megatron accepts is kept. Llama-3-405B's 126 layers at pp 16:
    the default gives the middle ranks 8 and the ends 7 (``layout.even_split``), which is the
    (7, 7) split (Dubey et al. 2024 §3.3.2); enumerated twice, each was screened and timed twice
    and ranked as two rows with the same numbers."""
    from types import SimpleNamespace

    from ..config.layout import strategy_stage_counts

    def counts(first: int | None, last: int | None) -> list[int] | None:
        st = SimpleNamespace(schedule=schedule, pp=pp, vpp=vpp, decoder_first_pipeline_num_layers=first,
                             decoder_last_pipeline_num_layers=last, pipeline_layers=None)
        got, issues = strategy_stage_counts(st, layers)
        return None if issues else got   # a refused split falls back to the default: not the same layout

    default = counts(None, None) if splits else None
    return default is not None and any(counts(f, last) == default for f, last in splits)


def _experts(space: SearchSpace, moe: bool, gpus: int, tp: int, pp: int, cp: int) -> list[tuple[int, int | None]]:
    if not moe:
        return [(e, t) for e in _allowed(space, "ep", [1]) for t in _allowed(space, "etp", [None])]
    experts = int(space.model["num_experts"])
    world_inner = gpus // (tp * pp) * tp if gpus % (tp * pp) == 0 else tp  # tp·cp·dp
    out = []
    for etp in _allowed(space, "etp", sorted({1, tp})):
        eps = [e for e in divisors(experts) if world_inner % (e * (etp or tp)) == 0]
        out += [(e, etp) for e in _allowed(space, "ep", eps)]
    return out


def micro_batches(space: SearchSpace, gpus: int, layout: dict[str, Any]) -> list[int]:
    """Micro-batch sizes to try: divisors of the per-replica batch, up to MAX_MICRO_BATCH."""
    dp = replica_dp(gpus, layout)
    memo = _per_space(space)   # a function of dp alone: asked once per layout, of which there are 315k (V3/16k)
    hit = memo.get(("mbs", dp))
    if hit is None:
        gbs = int(space.base["global_batch_size"])
        per = gbs // dp if gbs % dp == 0 else 1
        hit = memo[("mbs", dp)] = tuple(_allowed(space, "micro_batch_size", [d for d in divisors(max(per, 1)) if d <= MAX_MICRO_BATCH]))
    return list(hit)


def recompute_options(space: SearchSpace, layout: dict[str, Any]) -> list[tuple[str, int | None]]:
    """The activation options (recompute, layers) ordered from most memory to least within each
    family: none, selective, ("offload", k) with the first k = 1 … L − 1 layers' activations in
    host memory (``offload_options``), then full with 1 … all layers of a stage recomputed
    (None = all). A function of the space, pp and the schedule, memoised per space object (every
    group a search looks at asks; callers do not mutate it)."""
    memo = _per_space(space)
    key = ("rc", layout["pp"], layout.get("schedule"))
    hit = memo.get(key)
    if hit is not None:
        return hit
    per_stage = math.ceil(int(space.model["num_layers"]) / layout["pp"])
    # a pinned layer count applies to full recompute only (StrategySpec): it asks for that level
    levels = _allowed(space, "recompute", ("full",) if "recompute_num_layers" in space.choices else RECOMPUTE_LEVELS)
    # ascending, all layers (None) last: memory falls along the list, which the bisections need
    # whatever order a restriction listed them in
    ks = sorted(_allowed(space, "recompute_num_layers", list(range(1, per_stage)) + [None]), key=lambda k: (k is None, k or 0))
    out: list[tuple[str, int | None]] = []
    if 0 in _allowed(space, "cpu_offload_layers", [0]):   # candidates without offload
        out += [(lvl, None) for lvl in ("none", "selective") if lvl in levels]
    out += offload_options(space, layout, levels)
    if "full" in levels and 0 in _allowed(space, "cpu_offload_layers", [0]):
        out += [("full", k) for k in ks]
    memo[key] = out
    return out


def offload_options(space: SearchSpace, layout: dict[str, Any], levels) -> list[tuple[str, int | None]]:
    """("offload", k) activation options: Megatron-Core's --cpu-offloading-num-layers k
    (StrategySpec.cpu_offload_layers), which runs without recompute, so only where the space
    allows recompute 'none'. Proposed for the layouts Megatron-Core runs it in (pp 1, its
    unpipelined schedule, its own stack: ``config/scenario.py`` ``_offload_checks``), every k below
    the layer count; a restriction of the dimension proposes its values for every layout (the
    scenario check rejects the ones that cannot run, with its own message)."""
    if "none" not in levels:
        return []
    if "cpu_offload_layers" in space.choices:
        return [("offload", k) for k in sorted(int(k) for k in space.choices["cpu_offload_layers"] if k)]   # ascending: bisected
    from ..config.scenario import offload_issues

    layers = int(space.model["num_layers"])
    if offload_issues(1, layers, layout["pp"], str(layout.get("schedule")), "none", space.base.get("framework", "megatron-te")):
        return []
    return [("offload", k) for k in range(1, layers)]


def rc_fields(rc: tuple[str, int | None]) -> dict[str, Any]:
    """The strategy fields of an activation option (``recompute_options``)."""
    level, k = rc
    if level == "offload":
        return {"recompute": "none", "recompute_num_layers": None, "cpu_offload_layers": k}
    return {"recompute": level, "recompute_num_layers": k, "cpu_offload_layers": 0}


def zero_stages(space: SearchSpace) -> list[int]:
    memo = _per_space(space)
    hit = memo.get("zero")
    if hit is None:
        hit = memo["zero"] = [int(z) for z in _allowed(space, "zero_stage", [0, 1, 2, 3])]
    return hit


_PER_SPACE: list = [None, {}]   # (space, its memo): what depends on the space alone (proposals, group sizes)


def _per_space(space: SearchSpace) -> dict:
    if _PER_SPACE[0] is not space:
        _PER_SPACE[:] = [space, {}]
    return _PER_SPACE[1]


def flag_options(space: SearchSpace, layout: dict[str, Any], dp_size: int) -> list[dict[str, bool]]:
    """Overlap-flag combinations that can make a difference: the DP flags only when there is a
    data-parallel group (dp·cp > 1, or an expert-DP group), tp_comm_overlap only when tp > 1 on a
    stack that has it (``Stack.tp_overlap``).
    On Megatron-Core's stack not overlap_param_gather without overlap_grad_reduce: Megatron-LM
    refuses it (arguments.py: "--overlap-grad-reduce should be turned on when using
    --overlap-param-gather"; the estimate notes it, config/notes.py ``_flag_notes``) — unless
    the user pinned exactly that, which stays searched."""
    has_dp = dp_size * layout["cp"] > 1 or (layout["ep"] > 1)
    vals = {}
    for f in FLAG_DIMS:
        # tp_comm_overlap only on a stack that overlaps TP communication with its GEMMs (the
        # StrategySpec refuses it elsewhere: eager torchtitan has no async TP)
        relevant = has_dp if f != "tp_comm_overlap" else layout["tp"] > 1 and _tp_overlaps(space)
        default = [False, True] if relevant else [False]
        vals[f] = [bool(v) for v in _allowed(space, f, default)]
    combos = [dict(zip(FLAG_DIMS, combo)) for combo in itertools.product(*(vals[f] for f in FLAG_DIMS))]
    if space.base.get("framework", "megatron-te") == "megatron-te":
        runnable = [c for c in combos if c["overlap_grad_reduce"] or not c["overlap_param_gather"]]
        combos = runnable or combos
    return combos


def _tp_overlaps(space: SearchSpace) -> bool:
    from ..config.framework import FRAMEWORKS

    stack = FRAMEWORKS.get(space.base.get("framework") or "megatron-te")
    return stack is None or stack.tp_overlap


def replica_dp(gpus: int, layout: dict[str, Any]) -> int:
    den = layout["tp"] * layout["pp"] * layout["cp"]
    return gpus // den if gpus % den == 0 else 1


def group_size(space: SearchSpace, gpus: int, layout: dict[str, Any]) -> int:
    """Candidates in one (layout, micro-batch size) group: zero stages × recompute × flags; a
    function of the GPU count, pp and the schedule (``recompute_options``) and tp, cp, ep (``flag_options``)
    alone, memoised per space object (huge spaces count millions of groups)."""
    memo = _per_space(space)
    key = ("size", gpus, layout["tp"], layout["pp"], layout["cp"], layout["ep"], layout.get("schedule"))
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = len(zero_stages(space)) * len(recompute_options(space, layout)) * \
            len(flag_options(space, layout, replica_dp(gpus, layout)))
    return hit


_INT_DIMS = ("tp", "pp", "vpp", "cp", "ep", "micro_batch_size")
MAX_CHOICES = 256


def _check_value(dim: str, v: Any) -> bool:
    if dim in _INT_DIMS:
        return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 65_536
    if dim in ("etp", "recompute_num_layers"):   # None: etp = tp, or every layer of a stage recomputed
        return v is None or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 65_536)
    if dim == "cpu_offload_layers":   # 0: no offload
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 65_536
    if dim == "zero_stage":
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 3
    if dim in FLAG_DIMS:
        return isinstance(v, bool)
    allowed = {"recompute": RECOMPUTE_LEVELS, "cp_comm_type": CP_TYPES, "schedule": schedule_names()}[dim]
    return isinstance(v, str) and v in allowed


def expected_values(dim: str) -> str:
    """What ``_check_value`` accepts for ``dim``, in words (the messages name it)."""
    if dim in _INT_DIMS:
        return "a whole number from 1 to 65,536"
    if dim in ("etp", "recompute_num_layers"):
        return "a whole number from 1 to 65,536, or null"
    if dim == "cpu_offload_layers":
        return "a whole number from 0 to 65,536"
    if dim == "zero_stage":
        return "0, 1, 2 or 3"
    if dim in FLAG_DIMS:
        return "true or false"
    allowed = {"recompute": RECOMPUTE_LEVELS, "cp_comm_type": CP_TYPES, "schedule": schedule_names()}.get(dim, ())
    return "one of " + ", ".join(allowed)


def check_choices(choices: dict[str, Any]) -> dict[str, tuple]:
    """Validate user restrictions: known dimension names, non-empty lists of values of the
    dimension's type (ConfigError naming the dimension otherwise)."""
    if not isinstance(choices, dict):
        raise ConfigError([("choices", f"expected a dict of dimension → values, not {type(choices).__name__}")])
    out = {}
    for k, v in choices.items():
        if k not in DIMS:
            raise ConfigError([(f"strategy.{k}", f"'{k}' is not a searchable dimension (one of {', '.join(DIMS)})")])
        vals = tuple(v) if isinstance(v, (list, tuple)) else (v,)
        if not vals or len(vals) > MAX_CHOICES:
            raise ConfigError([(f"strategy.{k}", f"{k} needs 1 to {MAX_CHOICES} values, not {len(vals):,}")])
        bad = [x for x in vals if not _check_value(k, x)]
        if bad:
            raise ConfigError([(f"strategy.{k}", f"{str(bad[0])[:40]!r} is not a valid value of {k} ({expected_values(k)})")])
        out[k] = tuple(dict.fromkeys(vals))
    if "recompute_num_layers" in out and "full" not in out.get("recompute", ("full",)):
        raise ConfigError([("strategy.recompute_num_layers", "recompute_num_layers applies to recompute='full' only, "
                                                             f"and recompute is restricted to {list(out['recompute'])}")])
    offloads = any(v for v in out.get("cpu_offload_layers", ()))
    if offloads and ("none" not in out.get("recompute", ("none",)) or "recompute_num_layers" in out):
        pinned = f"recompute is restricted to {list(out['recompute'])}" if "recompute" in out else \
            "recompute_num_layers asks for full recompute"
        raise ConfigError([("strategy.cpu_offload_layers", "CPU activation offloading runs with recompute='none' only "
                                                           f"(Megatron-Core), and {pinned}")])
    return out
