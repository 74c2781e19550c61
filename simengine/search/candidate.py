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
from ..config.scenario import Scenario, check_scenario, make_scenario
from ..config.strategy import StrategySpec
from ..config.system import SystemSpec
from ..errors import ConfigError, from_pydantic
from ..schedule import get_schedule
from .space import SearchSpace

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
    if z == 0 and out.get("fp8_param_gather"):
        # FP8 primary weights ride with the sharded optimizer: Megatron-LM allows fp8_param_gather
        # only with the distributed optimizer or FSDP (arguments.py validate_args)
        out["fp8_param_gather"] = False
    return out


def _recompute(space: SearchSpace, level: str, layers: int | None) -> dict[str, Any]:
    """The recompute fields of a candidate. The base's ``recompute_modules`` ride with the
    selective level only: Megatron-Core reads them under ``recompute_granularity == "selective"``
    alone (attention.py ``Attention.__init__``: ``checkpoint_core_attention = recompute_granularity
    == 'selective' and "core_attn" in recompute_modules``; multi_latent_attention.py likewise for
    ``mla_up_proj``), so a none / full candidate takes the default and is not refused for modules
    it would not use."""
    out: dict[str, Any] = {"recompute": level, "recompute_num_layers": layers}
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
