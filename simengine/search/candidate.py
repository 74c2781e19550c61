"""One candidate of a search space: its strategy dict (the base plus the searched fields, with the
base's settings that apply only to some levels riding with those), the space's validated model
and system, and the scenario checks run on it — fully (``scenario``) or, where only cross-field
rules can fail, without pydantic (``quick_error``)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from ..config.model import ModelSpec
from ..config.scenario import Scenario, batch_checks, batch_key, check_scenario, layout_checks, make_scenario
from ..config.strategy import StrategySpec, fp8_gather_min_zero
from ..config.system import SystemSpec
from ..errors import ConfigError, from_pydantic, issues_text
from ..schedule import get_schedule
from .space import SearchSpace, rc_fields
from .types import example

_SHARED_OF: list = [None, ""]   # (space, its text): the key every per-space memo of the search uses


@lru_cache(maxsize=8)
def _specs(model_json: str, system_json: str, gpus: int) -> tuple[ModelSpec, SystemSpec]:
    import json

    sysd = dict(json.loads(system_json), num_gpus=gpus)
    return ModelSpec.model_validate(json.loads(model_json)), SystemSpec.model_validate(sysd)


_KEYS: dict[int, tuple[SearchSpace, str, str]] = {}


def specs(space: SearchSpace, gpus: int) -> tuple[ModelSpec, SystemSpec]:
    """Validated model and system (``gpus`` GPUs) of a space, built once per process."""
    import json

    hit = _KEYS.get(id(space))
    if hit is None or hit[0] is not space:
        hit = (space, json.dumps(space.model, sort_keys=True), json.dumps(space.system, sort_keys=True))
        _KEYS.clear()
        _KEYS[id(space)] = hit
    return _specs(hit[1], hit[2], gpus)


def scenario(space: SearchSpace, gpus: int, strategy: dict[str, Any]) -> Scenario:
    """The validated scenario of one candidate; ConfigError with the scenario's own message."""
    model, system = specs(space, gpus)
    try:
        st = StrategySpec.model_validate(strategy)
    except ValidationError as e:
        raise from_pydantic(e, "strategy", StrategySpec.model_fields) from None
    return make_scenario(model, system, st)


def _strategy(space: SearchSpace, layout: dict[str, Any], mbs: int, z: int, rc: tuple[str, int | None],
              flags: dict[str, bool]) -> dict[str, Any]:
    out = {**space.base, **layout, "micro_batch_size": mbs, "zero_stage": z, **_recompute(space, *rc), "dp": None, **flags}
    if out.get("fp8_param_gather"):
        out["fp8_param_gather"] = fp8_gather_at(True, out.get("framework", "megatron-te"), z)
    return out


def fp8_gather_at(wanted: bool, framework: str, z: int) -> bool:
    """Whether a candidate at ZeRO stage ``z`` gathers FP8 parameters when its space asks for them
    (``wanted``): fp8 parameter gathers ride with the sharding that gathers them
    (config/strategy.py ``fp8_gather_min_zero``). The one rule for a candidate's strategy and for
    the closed forms that price another ZeRO stage from a group's probe (refine.py ``_Memory``)."""
    return bool(wanted) and z >= fp8_gather_min_zero(framework)


def _recompute(space: SearchSpace, level: str, layers: int | None) -> dict[str, Any]:
    """The recompute and offload fields of a candidate's activation option (``space.rc_fields``).
    The base's ``recompute_modules`` ride with the
    selective level only: Megatron-Core reads them under ``recompute_granularity == "selective"``
    alone (attention.py ``Attention.__init__``: ``checkpoint_core_attention = recompute_granularity
    == 'selective' and "core_attn" in recompute_modules``; multi_latent_attention.py likewise for
    ``mla_up_proj``), so a none / full candidate takes the default and is not refused for modules
    it would not use."""
    out = rc_fields((level, layers))
    if level != "selective" and "recompute_modules" in space.base:
        out["recompute_modules"] = StrategySpec.model_fields["recompute_modules"].default
    return out


def _shared_key(space: SearchSpace) -> str:
    """The space's text, computed once per space object in this process."""
    if _SHARED_OF[0] is not space:
        _SHARED_OF[:] = [space, space.key()]
    return _SHARED_OF[1]


def _field_ranges() -> tuple[tuple[str, float, float], ...]:
    """(field, ge, le) of every searched field with bounds in StrategySpec's own ``Field(ge=…,
    le=…)`` metadata, read off the model once (a missing bound as ∓inf)."""
    if not _RANGES:
        from .types import SEARCHED

        for k in SEARCHED:  # pydantic keeps ge and le as two metadata entries: one range per field
            lo, hi = -math.inf, math.inf
            for c in StrategySpec.model_fields[k].metadata:
                ge, le = getattr(c, "ge", None), getattr(c, "le", None)
                lo = lo if ge is None else max(lo, ge)
                hi = hi if le is None else min(hi, le)
            if lo > -math.inf or hi < math.inf:
                _RANGES.append((k, lo, hi))
    return tuple(_RANGES)


_RANGES: list[tuple[str, float, float]] = []


def _in_field_ranges(strategy: dict[str, Any]) -> bool:
    """The searched integers inside StrategySpec's own field bounds (e.g. cp ≤ 1024 while a space
    may propose larger divisors). Called for every group a search looks at: ``type(v) is int``
    (not bool, a subclass of int) instead of two isinstance calls."""
    get = strategy.get
    for k, lo, hi in _RANGES or _field_ranges():
        v = get(k)
        if type(v) is int and not lo <= v <= hi:
            return False
    return True


_TEMPLATE: list = [None, None]   # (space key, StrategySpec built without validation from its base)


def construct(space: SearchSpace, strategy: dict[str, Any]) -> StrategySpec:
    """``StrategySpec.model_construct(**strategy)`` for a strategy of ``space`` (its base plus
    searched fields), as a copy of one template per space: pydantic resolves every default in
    ``model_construct`` (~70 µs), a copy with the fields updated takes a few."""
    key = _shared_key(space)
    if _TEMPLATE[0] != key:
        _TEMPLATE[:] = [key, StrategySpec.model_construct(**space.base)]
    return _TEMPLATE[1].model_copy(update=strategy)


def quick_error(space: SearchSpace, gpus: int, strategy: dict[str, Any]) -> str:
    """What ``scenario()`` would reject ``strategy`` for ('' when valid), without pydantic
    validation when the strategy's own rules pass: the values come from a validated base and
    ``check_choices``-checked integers, so only the cross-field rules can fail and those are
    ``check_scenario`` itself. When a strategy-level rule fails (a schedule's requirement, a
    micro-batch that does not divide the batch), the full validation gives the exact message."""

    model, system = specs(space, gpus)
    st = construct(space, strategy)
    own = not _in_field_ranges(strategy) or get_schedule(st.schedule).requirements(st.pp, None, st.vpp, None) \
        or st.global_batch_size % st.micro_batch_size \
        or (st.recompute_num_layers is not None and st.recompute != "full") or (st.tp_comm_overlap and st.tp > 1)
    if own:
        try:
            scenario(space, gpus, strategy)
        except ConfigError as e:
            return str(e)
        return ""
    issues = check_scenario(model, system, st)
    return str(ConfigError(issues)) if issues else ""


# (space key, {(gpus, layout items): what ``group_error`` keeps of the layout}): every group of a
# layout (one per micro-batch size) shares its layout's checks; bounded (a cache, refilled)
_LAYOUTS: list = [None, {}]
MAX_LAYOUTS = 1 << 16
# id(layout) → (the layout, gpus, its entry of _LAYOUTS): a layout's groups share one dict object
# (``run.plan_groups``; one unpickled batch too) and the search never changes one, so most groups
# find their layout by identity, without building and hashing its items. The layout is kept alive
# with its entry: its id stays its own (tests/test_search.py ``test_group_validity_by_layout_identity_is_each_layouts_own``)
_BY_ID: dict[int, tuple] = {}
_MBS_OK: dict[int, bool] = {}   # per micro-batch size of that space: ``_mbs_ok``
_BATCH: dict[tuple, str] = {}   # (``batch_key`` number, mbs) → the text of ``batch_checks``: ``_batch_text``
_BATCH_KEYS: dict[tuple, int] = {}   # ``scenario.batch_key`` → a small number
_OWN = ("own",)   # the layout breaks a strategy-level rule: its groups take the full validation
_OWN_MSG = object()   # ... which StrategySpec refuses with one text for every valid size: (_OWN_MSG, text, example)


def group_error(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, probe) -> tuple[str, dict[str, Any] | None]:
    """(``quick_error`` of a group's first candidate ``probe(mbs)``, its searched fields when that
    is not '') with the checks that do not read the micro-batch size run once per layout
    (``config.scenario.layout_checks``, on a strategy whose ``micro_batch_size`` is unset: a check
    that read it would fail loudly) and ``batch_checks`` per group, concatenated in
    ``check_scenario``'s order: the same message. A layout that breaks a strategy-level rule, or
    a micro-batch size outside its field range or not dividing the batch, takes ``quick_error``
    itself (pydantic's exact message)."""
    hit = _layout_of(space, gpus, layout, mbs, probe)
    ok = _MBS_OK.get(mbs)
    if ok is None:
        ok = _MBS_OK[mbs] = _mbs_ok(space, mbs)
    if hit[0] is _OWN_MSG and ok:   # the strategy's own rules refuse the layout: the same text for every such size
        return hit[1], {**hit[2], "micro_batch_size": mbs}
    if hit is _OWN or not ok:
        strategy = probe(mbs)
        err = quick_error(space, gpus, strategy)
        return err, (example(gpus, strategy) if err else None)
    head, tail, st, dp, model, ex, bkey = hit
    batch = _batch_text(model, st, dp, mbs, bkey)
    if not (head or batch or tail):
        return "", None
    # ConfigError(head + batch + tail)'s text, the layout's parts written once (errors.issues_text)
    msg = "; ".join(t for t in (head, batch, tail) if t)
    return msg, {**ex, "micro_batch_size": mbs}


def _layout_of(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, probe) -> tuple:
    """The layout's entry of ``_LAYOUTS`` (``_layout_part``), found by the layout's identity
    first (``_BY_ID``), else by its items; the memos start afresh with another space or when full."""
    key = _shared_key(space)
    if _LAYOUTS[0] != key or len(_LAYOUTS[1]) >= MAX_LAYOUTS or len(_BY_ID) >= MAX_LAYOUTS:
        _LAYOUTS[:] = [key, {}]
        for memo in (_BY_ID, _MBS_OK, _BATCH, _BATCH_KEYS):
            memo.clear()
    seen = _BY_ID.get(id(layout))
    if seen is not None and seen[0] is layout and seen[1] == gpus:
        return seen[2]
    memo = _LAYOUTS[1]
    lkey = (gpus, tuple(layout.items()))
    hit = memo.get(lkey)
    if hit is None:
        hit = memo[lkey] = _layout_part(space, gpus, probe(mbs))
    _BY_ID[id(layout)] = (layout, gpus, hit)
    return hit


def _batch_text(model: ModelSpec, st: StrategySpec, dp: int, mbs: int, bkey: int) -> str:
    """The text of ``batch_checks(model, st, dp, mbs)`` ('' when it passes), once per (what it
    reads, ``scenario.batch_key``, numbered per layout in ``_layout_part``; mbs): layouts that
    differ in tp, cp, ep, … with the same dp, pp, vpp and schedule share it."""
    hit = _BATCH.get((bkey, mbs))
    if hit is None:
        batch = batch_checks(model, st, dp, mbs)
        hit = _BATCH[(bkey, mbs)] = issues_text(batch) if batch else ""
    return hit


def _layout_part(space: SearchSpace, gpus: int, strategy: dict[str, Any]) -> tuple:
    """(the text of the checks before the batch's, of those after them, the strategy without its
    micro-batch size, dp, the model, the searched fields, the number of its ``batch_key``), or ``_OWN`` when a strategy-level rule other than the
    micro-batch size's fails (``quick_error``)."""
    unset = {**strategy, "micro_batch_size": None}
    st = construct(space, unset)
    if not _in_field_ranges(unset) or get_schedule(st.schedule).requirements(st.pp, None, st.vpp, None) \
            or (st.recompute_num_layers is not None and st.recompute != "full") or (st.tp_comm_overlap and st.tp > 1):
        # StrategySpec refuses it whatever the size (its field errors, or its _check's first failing
        # rule: none reads the size but ``global_batch_size % micro_batch_size``, which passes for
        # every size ``_mbs_ok`` lets through, as for 1): pydantic's text once for the layout
        try:
            StrategySpec.model_validate({**strategy, "micro_batch_size": 1})
        except ValidationError as e:
            return _OWN_MSG, str(from_pydantic(e, "strategy", StrategySpec.model_fields)), example(gpus, unset)
        return _OWN
    model, system = specs(space, gpus)
    head, tail, dp = layout_checks(model, system, st)
    bkey = _BATCH_KEYS.setdefault(batch_key(model, st, dp), len(_BATCH_KEYS))
    return issues_text(head), issues_text(tail), st, dp, model, example(gpus, unset), bkey


def _mbs_ok(space: SearchSpace, mbs: int) -> bool:
    """The micro-batch size inside its field range and dividing the global batch (the strategy's own
    rules ``quick_error`` sends to pydantic)."""
    for k, lo, hi in _RANGES or _field_ranges():
        if k == "micro_batch_size" and not lo <= mbs <= hi:
            return False
    return type(mbs) is int and not int(space.base["global_batch_size"]) % mbs
