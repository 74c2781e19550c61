"""A search space from the caller's plain data: every input checked before anything is
enumerated (a GPU count of 10^20 once hung the divisor enumeration; 8.7 GPUs read as 8, ``true``
as 1, an infinite token budget printed ``Infinity`` into the JSON), then the model and system
validated and normalised."""

from __future__ import annotations

from typing import Any

from ..config.system import MAX_NUM_GPUS as MAX_GPUS
from ..config.generation import gpu_generation
from ..errors import ConfigError
from .space import DIMS, LAYER_SPLIT_FIELDS, SearchSpace, check_choices

MAX_TOKEN_BUDGET = 1e15   # tokens: the Studio's limit too (ui/pins.py BUDGET_RANGE, 1e6 billion)
MAX_BATCH = 100_000_000   # StrategySpec.global_batch_size
MAX_SEQ = 16_777_216      # StrategySpec.seq_len


def make_space(model: dict[str, Any], system: dict[str, Any], *, global_batch: int | None = None,
               global_batch_tokens: int | None = None, seq_len: int, gpus: list[int] | tuple[int, ...] | None = None,
               token_budget: float | None = None, choices: dict[str, Any] | None = None,
               base: dict[str, Any] | None = None) -> SearchSpace:
    """A search space from plain dicts. Batch in sequences (``global_batch``) or tokens
    (``global_batch_tokens``, a multiple of ``seq_len``). ``gpus`` defaults to the system's count."""
    if not _count(seq_len) or seq_len > MAX_SEQ:
        raise ConfigError([("seq_len", f"seq_len={seq_len!r} must be an integer from 1 to {MAX_SEQ:,} (StrategySpec.seq_len)")])
    if (global_batch is None) == (global_batch_tokens is None):
        raise ConfigError([("global_batch", "give the global batch in sequences or in tokens (one of them)")])
    if global_batch_tokens is not None:
        if not _count(global_batch_tokens):
            raise ConfigError([("global_batch_tokens", f"global_batch_tokens={global_batch_tokens!r} must be a positive integer")])
        if global_batch_tokens % seq_len:
            raise ConfigError([("global_batch_tokens", f"{global_batch_tokens} tokens is not a multiple of seq_len={seq_len}")])
        global_batch = global_batch_tokens // seq_len
    if not _count(global_batch) or int(global_batch or 0) > MAX_BATCH:   # 10^24 once hung the divisor enumeration
        raise ConfigError([("global_batch", f"global_batch={global_batch!r} must be an integer from 1 to {MAX_BATCH:,} "
                                            "sequences (StrategySpec.global_batch_size)")])
    for key, value in (("choices", choices), ("base", base)):
        if value is not None and not isinstance(value, dict):
            raise ConfigError([(key, f"{key} must be a mapping of strategy fields, got {type(value).__name__}")])
    model, system = _validated(model, system)
    _check_base(base or {})
    _check_precision(base or {}, system)
    if gpus is not None and not isinstance(gpus, (list, tuple)):
        raise ConfigError([("system.num_gpus", f"GPU counts must be a list of integers, got {type(gpus).__name__}")])
    counts = tuple(gpus) if gpus is not None else (int(system["num_gpus"]),)
    if not counts or len(counts) > 64 or not all(_count(g) and g <= MAX_GPUS for g in counts):
        raise ConfigError([("system.num_gpus", f"GPU counts must be 1 to 64 integers from 1 to {MAX_GPUS:,} (SystemSpec.num_gpus)")])
    b = dict(base or {})
    for k in ("name", "dp"):
        b.pop(k, None)
    b.update(global_batch_size=global_batch, seq_len=seq_len)
    if "attention_impl" not in b and gpu_generation(str(system["gpu"]["name"])) == "volta":
        # flash attention does not run on Volta (config/scenario.py _attention_checks): a search
        # that does not fix the attention searches what runs there, unfused softmax attention
        b["attention_impl"] = "unfused"
    if token_budget is not None and not (type(token_budget) in (int, float) and 0 < token_budget <= MAX_TOKEN_BUDGET):
        raise ConfigError([("token_budget", f"token_budget={token_budget!r} must be a positive number of tokens, at most "
                                            f"{MAX_TOKEN_BUDGET:.0e} (1e308 printed a 300-digit day count)")])
    return SearchSpace(model=dict(model), system=dict(system), base=b, gpus=tuple(sorted(set(counts))),
                       choices=check_choices(choices or {}), token_budget=token_budget)


def _check_base(base: dict[str, Any]) -> None:
    """Every fixed strategy field is a StrategySpec field StrategySpec accepts, checked field by
    field before anything is enumerated (``framework=[1]`` used to reach a dict lookup as an
    unhashable key: a TypeError, not a message): each one through the model itself, beside the
    two required fields, so its own "before" validators run (``recompute_modules=core_attn,mlp``
    and ``pipeline_layers="4 4"`` are text the model reads as lists); only the errors located on
    that field count. What depends on the layout (a split that needs pp > 1, …) is the scenario's
    check, per candidate."""
    from pydantic import ValidationError

    from ..config.strategy import StrategySpec
    from ..errors import from_pydantic

    issues = []
    for key, value in base.items():
        if key in ("name", "dp"):
            continue
        if not isinstance(key, str) or key not in StrategySpec.model_fields:
            issues.append((f"strategy.{str(key)[:60]}", "not a strategy field"))
            continue
        try:
            StrategySpec.model_validate({"global_batch_size": 1, "seq_len": 1, key: value})
        except ValidationError as e:   # the project's one conversion of pydantic's messages
            issues += [i for i in from_pydantic(e, "strategy").issues if i[0] == f"strategy.{key}"][:1]
        except (TypeError, ValueError) as e:   # a validator that did not expect the value's type
            issues.append((f"strategy.{key}", f"invalid value: {str(e)[:160]}"))
    if issues:
        raise ConfigError(issues)


def _check_precision(base: dict[str, Any], system: dict[str, Any]) -> None:
    """A precision the GPU or the stack cannot run (no FP8 / FP4 peak, NVFP4 off TransformerEngine)
    refuses the whole space: every candidate would fail the same check (a search of nvfp4 on
    H100 reported "316,228 of 321,980 candidates" rejected for it)."""
    from ..config.precision import precision_issues
    from ..config.system import GPUSpec

    issues = precision_issues(str(base.get("dtype", "bf16")), str(base.get("framework", "megatron-te")),
                              GPUSpec.model_validate(system["gpu"]))
    if issues:
        raise ConfigError(issues)


def _count(v: Any) -> bool:
    """A positive ``int`` (not a bool, a float or a string that looks like one)."""
    return type(v) is int and v >= 1


def _validated(model: dict[str, Any], system: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Model and system dicts validated (ConfigError naming the field) and normalised."""
    from pydantic import ValidationError

    from ..config import ModelSpec, SystemSpec
    from ..errors import from_pydantic

    out = []
    for key, cls, raw in (("model", ModelSpec, model), ("system", SystemSpec, system)):
        if isinstance(raw, cls):
            raw = raw.model_dump(mode="json")
        if not isinstance(raw, dict):
            raise ConfigError([(key, f"{key} must be a JSON object")])
        try:
            out.append(cls.model_validate(raw).model_dump(mode="json"))
        except ValidationError as e:
            raise from_pydantic(e, key, cls.model_fields) from None
    return out[0], out[1]


def fixed_fields(strategy: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The scenario's strategy fields a search keeps fixed (``make_space``'s ``base``), and whether
    an explicit layer split was left out. Everything but the searched dimensions, the batch, the
    sequence and the names — and the fields that only meant something at the scenario's own layout:

    - the layer split (``LAYER_SPLIT_FIELDS``): tied to the scenario's pp·vpp, it made every other
      depth invalid; the search places the layers itself for each depth (``space._schedules``);
    - ``sequence_parallel`` when the scenario's tp is 1: there it changes nothing (Megatron-Core's
      SP shards a TP group's norms and turns its all-reduces into all-gather / reduce-scatter), and
      a ``false`` kept for every layout refused all tp > 1 layouts of an MoE model ("MoE with tp > 1
      needs sequence_parallel", Megatron-LM arguments.py) — the qwen3-30b-a3b-ep8 preset's 19 M
      candidates — and ran a dense model's without SP. StrategySpec's default (on) applies; a
      scenario at tp > 1 keeps its own setting, which then was a choice."""
    skip = {*DIMS, *LAYER_SPLIT_FIELDS, "global_batch_size", "seq_len", "dp", "name"}
    if int(strategy.get("tp") or 1) == 1:
        skip.add("sequence_parallel")
    base = {k: v for k, v in strategy.items() if k not in skip}
    return base, any(strategy.get(k) is not None for k in LAYER_SPLIT_FIELDS)
