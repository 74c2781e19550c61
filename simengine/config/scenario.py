"""Scenario = model + system + strategy, cross-checked.

``check_scenario`` returns every problem as (field, message) with each term named, e.g.
``("strategy.tp", "tp=3 does not divide num_attention_heads=64")``. ``load_scenario`` turns
plain dicts (JSON, presets, share links) into a validated Scenario or raises ConfigError.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ..errors import ConfigError, from_pydantic
from ..memo import config_cache
from ..schedule import get_schedule
from .generation import gpu_generation
from .layout import strategy_stage_counts
from .model import ModelSpec
from .notes import scenario_notes
from .strategy import StrategySpec
from .precision import fp8_param_checks, fp8_recipe_checks, precision_issues
from .system import SystemSpec


def padded_vocab(vocab_size: int, tp: int, multiple: int = 128) -> int:
    """Megatron pads the vocabulary to a multiple of 128·tp
    (megatron/training/tokenizer: ``_vocab_size_with_padding``, make-vocab-size-divisible-by=128)."""
    step = multiple * tp
    return int(math.ceil(vocab_size / step) * step)


def derived_dp(model: ModelSpec, system: SystemSpec, strategy: StrategySpec) -> int:
    if strategy.dp is not None:
        return strategy.dp
    denom = strategy.tp * strategy.pp * strategy.cp
    return max(system.num_gpus // denom, 1)


def check_scenario(model: ModelSpec, system: SystemSpec, strategy: StrategySpec) -> list[tuple[str, str]]:
    """All cross-field problems; empty when the scenario is consistent. The checks that read the
    micro-batch size (``batch_checks``) sit between the layout's own (``layout_checks``), in one
    fixed order; the search runs the layout's once for all its micro-batch sizes."""
    head, tail, dp = layout_checks(model, system, strategy)
    return head + batch_checks(model, strategy, dp, strategy.micro_batch_size) + tail


def layout_checks(model: ModelSpec, system: SystemSpec, strategy: StrategySpec) -> tuple[list, list, int]:
    """(the checks before the batch's, those after, dp) of ``check_scenario``: every check that does
    not read ``micro_batch_size`` (search/candidate.py ``group_error`` runs them with it unset;
    tests/test_search.py ``test_layout_checks_do_not_read_the_micro_batch_size``)."""
    s = strategy
    issues: list[tuple[str, str]] = []
    add = issues.append
    tp, pp, cp = s.tp, s.pp, s.cp
    dp = derived_dp(model, system, s)
    world = tp * pp * cp * dp
    if world != system.num_gpus:
        if s.dp is None:
            add(("strategy.tp", f"tp*pp*cp = {tp}*{pp}*{cp} = {tp * pp * cp} does not divide system.num_gpus = {system.num_gpus}"))
            # no dp: the checks that read it (the batch's, EP's) would report a floored dp the
            # user never set ("not divisible by micro_batch_size*dp = 1*5" for tp 3 of 64 GPUs)
            dp = 0
        else:
            add(("strategy.dp", f"tp*pp*cp*dp = {tp}*{pp}*{cp}*{dp} = {world} but system.num_gpus = {system.num_gpus}"))
    heads, kv = model.num_attention_heads, model.kv_heads
    if heads % tp:
        add(("strategy.tp", f"tp={tp} does not divide num_attention_heads={heads}"))
    if model.attention != "mla" and kv % tp and tp % kv:
        add(("strategy.tp", f"tp={tp} and num_kv_heads={kv}: one must divide the other"))
    if model.ffn_hidden_size % tp:
        add(("strategy.tp", f"tp={tp} does not divide ffn_hidden_size={model.ffn_hidden_size}"))
    if s.sequence_parallel and tp > 1 and (s.seq_len // cp) % tp:
        add(("strategy.sequence_parallel", f"seq_len/cp = {s.seq_len}/{cp} is not divisible by tp={tp} (sequence parallelism shards the sequence)"))
    issues += _cp_checks(model, s)
    if s.dp_shard is not None and dp >= 1 and dp % s.dp_shard:
        add(("strategy.dp_shard", f"dp_shard={s.dp_shard} does not divide dp={dp} (HSDP: dp = dp_shard*replicas)"))
    if s.dp_shard is not None and s.dp_shard < dp and s.zero_stage == 0:
        add(("strategy.dp_shard", f"dp_shard={s.dp_shard} needs zero_stage >= 1 (nothing is sharded with zero_stage=0)"))
    tail = _split_checks(model, s)
    tail += _moe_checks(model, s, dp)
    tail += _recompute_module_checks(model, s)
    tail += _offload_checks(model, s)
    tail += fp8_param_checks(s) + fp8_recipe_checks(s, system.gpu.name) + _attention_checks(s, system.gpu.name)
    tail += _peft_checks(model, s)
    tail += _hybrid_checks(model, s)
    if s.packed_doc_len is not None:
        f = "strategy.packed_doc_len"
        if s.seq_len % s.packed_doc_len:
            tail.append((f, f"packed_doc_len={s.packed_doc_len} must divide seq_len={s.seq_len} (whole documents per sequence)"))
        if s.cp > 1:
            tail.append((f, "packed sequences with context parallelism (THD across cp ranks) are not modelled: use cp=1"))
    tail += precision_issues(s.dtype, s.framework, system.gpu)
    return issues, tail, dp


def batch_checks(model: ModelSpec, s: StrategySpec, dp: int, micro_batch_size: int) -> list[tuple[str, str]]:
    """The checks of ``check_scenario`` that read the micro-batch size: it divides the batch per
    replica, and the schedule's own rules on the micro-batches per step
    (simengine/schedule/<name>.py ``requirements``)."""
    issues: list[tuple[str, str]] = []
    m = None
    if dp < 1:  # the GPU count does not split into the layout (layout_checks said so): no batch per replica
        pass
    elif s.global_batch_size % (micro_batch_size * dp):
        issues.append(("strategy.global_batch_size", f"global_batch_size={s.global_batch_size} is not divisible by "
                                                     f"micro_batch_size*dp = {micro_batch_size}*{dp}"))
    else:
        m = s.global_batch_size // (micro_batch_size * dp)
    explicit = s.pipeline_layers is not None or s.decoder_first_pipeline_num_layers is not None \
        or s.decoder_last_pipeline_num_layers is not None
    sched = get_schedule(s.schedule)
    issues += sched.requirements(s.pp, m, s.vpp, None if explicit else model.num_layers)
    if m is not None:
        issues += pipeline_size_issues(s.pp, sched.chunks_per_rank(s.vpp), m)
    return issues


# pp × chunks per rank × micro-batches the pipeline engine simulates (~2–4 s at the limit): a
# larger pipeline is refused by the scenario check, so a search rejects it before any memory work
MAX_MICROBATCH_CHUNKS = 131_072


def pipeline_size_issues(pp: int, chunks: int, m: int) -> list[tuple[str, str]]:
    """The engine's size limit on a pipeline of ``pp`` ranks × ``chunks`` chunks × ``m`` micro-batches."""
    size = pp * chunks * m
    if size <= MAX_MICROBATCH_CHUNKS:
        return []
    # plain digits: the search groups its rejections by the text with every number as N
    return [("strategy.global_batch_size", f"{m} micro-batches × {pp} stages × {chunks} chunks = {size} exceeds the "
                                           f"{MAX_MICROBATCH_CHUNKS} the pipeline engine simulates; raise micro_batch_size or dp")]


def batch_key(model: ModelSpec, s: StrategySpec, dp: int) -> tuple:
    """Everything ``batch_checks`` reads but the micro-batch size (a schedule's ``requirements``
    is a pure function of its arguments, schedule/base.py): strategies with one key get the same
    checks for every micro-batch size (search/candidate.py shares them across layouts;
    tests/test_search.py ``test_batch_checks_read_only_their_key``)."""
    explicit = s.pipeline_layers is not None or s.decoder_first_pipeline_num_layers is not None \
        or s.decoder_last_pipeline_num_layers is not None
    return s.global_batch_size, dp, s.schedule, s.pp, s.vpp, explicit, model.num_layers


@config_cache
def _cached_notes(model: ModelSpec, strategy: StrategySpec) -> tuple[tuple[str, str], ...]:
    """``scenario_notes`` memoised on the frozen (model, strategy) pair it depends on (every
    estimate reads them; a search re-reads them for every layout of one model)."""
    return tuple(scenario_notes(model, strategy))


def _cp_checks(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    tp, cp = s.tp, s.cp
    if cp == 1:
        return []
    issues = []
    if s.seq_len % (2 * cp):
        issues.append(("strategy.cp", f"seq_len={s.seq_len} is not divisible by 2*cp={2 * cp} (load-balanced causal split)"))
    if s.cp_comm_type == "a2a":
        # Ulysses all-to-all swaps the sequence split for a head split, so the heads *per TP rank* of
        # Q and of K/V must divide by cp: TransformerEngine
        # transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py,
        # AttnFuncWithCPAndQKVOA2A.forward asserts "cp_comm_type='a2a' requires num_heads % cp_size == 0
        # for Q, K, V". MLA up-projects K/V to every query head; GQA with tp > kv heads replicates one
        # K/V head per TP rank (Megatron-Core transformer/attention.py Attention.__init__:
        # num_query_groups_per_partition = 1 when num_kv_heads < tp).
        heads, kv = model.num_attention_heads, model.kv_heads
        q_rank = heads // tp
        if q_rank % cp:
            issues.append(("strategy.cp", f"cp={cp} does not divide num_attention_heads/tp = {heads}/{tp} = {q_rank} "
                                          "(cp_comm_type='a2a' splits heads over cp)"))
        if model.attention != "mla":
            kv_rank = max(kv // tp, 1)
            if kv_rank % cp:
                terms = f"num_kv_heads/tp = {kv}/{tp} = {kv_rank}" if kv >= tp else f"1 (num_kv_heads={kv} < tp={tp}: one replicated per TP rank)"
                issues.append(("strategy.cp", f"cp={cp} does not divide the K/V heads per TP rank {terms} "
                                              "(cp_comm_type='a2a' splits K/V heads over cp; use cp_comm_type='p2p' or 'allgather')"))
    return issues


def _split_checks(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    """The layer split (config/layout.py) and the recomputed layers it leaves room for (the
    schedule's micro-batch rules are ``batch_checks``)."""
    counts, issues = strategy_stage_counts(s, model.num_layers)   # lists of its own (config/layout.py)
    if s.recompute_num_layers is not None and not issues:
        sched = get_schedule(s.schedule)
        nch = sched.chunks_per_rank(s.vpp)
        most = max(sum(counts[sched.stage_of(r, c, s.pp, s.vpp) % len(counts)] for c in range(nch)) for r in range(s.pp))
        if s.recompute_num_layers > most:
            issues.append(("strategy.recompute_num_layers", f"recompute_num_layers={s.recompute_num_layers} exceeds the "
                                                            f"most layers on one pipeline rank = {most}"))
    return issues


def _hybrid_checks(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    """What a hybrid Mamba stack is modelled with (workload/mamba.py): Megatron-Core's MambaModel
    splits Mamba heads and groups over TP (mamba_mixer.py asserts both divide), has no virtual
    pipeline stages (Megatron-Bridge MambaModelProvider.provide asserts vpp is None) and its own
    context parallelism is not modelled here."""
    if model.hybrid_pattern is None or "M" not in model.hybrid_pattern:
        return []
    out = []
    heads, groups = model.mamba_num_heads or 0, model.mamba_num_groups
    if heads % s.tp or groups % s.tp:
        out.append(("strategy.tp", f"tp={s.tp} must divide mamba_num_heads={heads} and mamba_num_groups={groups}"))
    if s.cp > 1:
        out.append(("strategy.cp", "context parallelism for Mamba layers is not modelled: use cp=1"))
    if s.vpp > 1 or s.schedule not in ("1f1b", "gpipe"):
        out.append(("strategy.schedule", "Megatron-Core's MambaModel runs without virtual stages: use 1f1b (or gpipe)"))
    if s.framework != "megatron-te":
        out.append(("strategy.framework", "hybrid Mamba stacks are modelled as Megatron-Core's MambaModel (megatron-te)"))
    return out


def _peft_checks(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    """What LoRA is modelled for (workload/lora.py): dense models (expert adapters and MLA's
    projections are not), frozen weights replicated over DP (FSDP-sharded frozen weights, QLoRA
    and FP8 primary weights — which need an fp32 master to cast from — are not)."""
    if s.peft == "none":
        return []
    f = "strategy.peft"
    out = []
    if model.is_moe or model.attention == "mla" or model.hybrid_pattern is not None:
        out.append((f, "LoRA is modelled for dense transformers only (no adapters on experts, MLA or Mamba projections)"))
    if s.zero_stage >= 3:
        out.append((f, "LoRA with ZeRO-3 / FSDP (sharded frozen weights) is not modelled: use zero_stage <= 2"))
    if s.fp8_param_gather:
        out.append((f, "fp8_param_gather casts trained weights from their fp32 master; LoRA's base weights are frozen"))
    return out


def _attention_checks(s: StrategySpec, gpu_name: str) -> list[tuple[str, str]]:
    """Flash attention needs Ampere or later: FlashAttention-2 supports "Ampere, Ada, or Hopper GPUs"
    (Dao-AILab/flash-attention README, Installation), and TransformerEngine's fused attention
    backends need compute capability 8.0 or later (transformer_engine/pytorch/attention/
    dot_product_attention/utils.py ``get_attention_backend``: ``device_compute_capability < (8, 0)``
    disables FlashAttention and FusedAttention). On Volta Megatron-LM runs unfused softmax attention."""
    if s.attention_impl == "flash" and gpu_generation(gpu_name) == "volta":
        # (no figure in the message: the search counts its rejections with every number as N)
        return [("strategy.attention_impl", f"attention_impl='flash' needs an Ampere or later GPU (FlashAttention and "
                                            f"TransformerEngine's fused attention do not run on Volta); {gpu_name} "
                                            "is a Volta GPU: use attention_impl='unfused'")]
    return []


def _offload_checks(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    """Megatron-Core's rules for CPU activation offloading (``offload_issues``) on a scenario."""
    if not s.cpu_offload_layers:
        return []
    return offload_issues(s.cpu_offload_layers, model.num_layers, s.pp, s.schedule, s.recompute, s.framework)


def offload_issues(n: int, num_layers: int, pp: int, schedule: str, recompute: str, framework: str) -> list[tuple[str, str]]:
    """Why ``n`` layers' activations cannot be offloaded in this layout ([] when they can):
    Megatron-Core's rules for CPU activation offloading (transformer_config.py __post_init__:
    "CPU offloading can be done only for layers less than num_layers", "no support for Pipeline
    parallelism with CPU offloading", "CPU offloading does not work when activation recomputation is
    enabled"); TransformerEngine's cpu_offload is Megatron's path, so Megatron's stack only. The one
    owner of those rules: the scenario check, the search's proposals and the fit list read them."""
    f, out = "strategy.cpu_offload_layers", []
    if n >= num_layers:
        out.append((f, f"cpu_offload_layers={n} must be below num_layers={num_layers} (at least one layer's "
                       "activations stay on the GPU)"))
    if pp > 1:
        out.append((f, f"CPU activation offloading runs without pipeline parallelism in Megatron-Core: pp={pp}, use pp=1"))
    elif schedule != "1f1b":
        # pp 1 runs Megatron-Core's forward_backward_no_pipelining: one micro-batch's forward, then its
        # backward (what TransformerEngine's layer-by-layer schedule assumes); DualPipeV's two chunks
        # or GPipe's m micro-batches in flight are not that
        out.append((f, f"CPU activation offloading runs in Megatron-Core's schedule without pipelining (one "
                       f"micro-batch's forward, then its backward): use schedule='1f1b', not {schedule!r}"))
    if recompute != "none":
        out.append((f, f"CPU activation offloading does not work with recompute={recompute!r} in Megatron-Core: use recompute='none'"))
    if framework != "megatron-te":
        out.append((f, f"CPU activation offloading is modelled as Megatron-Core runs it (framework='megatron-te'), not {framework!r}"))
    return out


def _recompute_module_checks(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    """Megatron-Core's rules for ``recompute_modules`` (transformer_config.py __post_init__: mla_up_proj
    needs multi_latent_attention, moe_act needs the grouped-GEMM experts), plus what makes a module
    meaningless here: it recomputes nothing (no MoE, no shared experts, no dense layer) or is not
    selective recompute, or the stack is not Megatron-Core's (its module names)."""
    f, mods = "strategy.recompute_modules", set(s.recompute_modules)
    if mods == {"core_attn"}:
        return []
    if s.recompute != "selective":
        return [(f, f"recompute_modules={list(s.recompute_modules)} needs recompute='selective' (recompute={s.recompute!r})")]
    if s.framework != "megatron-te":
        return [(f, f"recompute_modules other than core_attn are Megatron-Core's submodules; framework={s.framework!r}")]
    need = {"mla_up_proj": (model.attention == "mla", "multi-latent attention (attention='mla')"),
            "moe_act": (model.is_moe, "an MoE model"), "moe": (model.is_moe, "an MoE model"),
            "shared_experts": (bool(model.shared_ffn), "shared experts (num_shared_experts > 0)"),
            "mlp": (model.num_layers > model.num_moe_layers, "dense MLP layers")}
    return [(f, f"recompute_modules '{name}' needs {what}") for name, (ok, what) in need.items() if name in mods and not ok]


def _moe_checks(model: ModelSpec, s: StrategySpec, dp: int) -> list[tuple[str, str]]:
    issues: list[tuple[str, str]] = []
    add = issues.append
    tp, cp = s.tp, s.cp
    if model.is_moe:
        etp = s.etp_size
        if tp > 1 and not s.sequence_parallel:
            add(("strategy.sequence_parallel", f"MoE with tp={tp} needs sequence_parallel=true (Megatron-Core requires it for expert layers)"))
        if model.num_experts % s.ep:
            add(("strategy.ep", f"ep={s.ep} does not divide num_experts={model.num_experts}"))
        if dp >= 1 and (tp * cp * dp) % (s.ep * etp):
            add(("strategy.ep", f"ep*etp = {s.ep}*{etp} does not divide tp*cp*dp = {tp}*{cp}*{dp}"))
        if int(model.moe_ffn_hidden_size or 0) % etp:
            add(("strategy.etp", f"etp={etp} does not divide moe_ffn_hidden_size={model.moe_ffn_hidden_size}"))
    else:
        if s.ep > 1:
            add(("strategy.ep", f"ep={s.ep} needs an MoE model (num_experts > 0)"))
        if s.etp not in (None, 1):
            add(("strategy.etp", f"etp={s.etp} needs an MoE model (num_experts > 0)"))
    return issues + _a2a_overlap_checks(model, s)


def _a2a_overlap_checks(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    """Megatron-Core TransformerConfig.__post_init__ rules for the two all-to-all overlaps."""
    issues: list[tuple[str, str]] = []
    add = issues.append
    a2a = s.moe_dispatcher in ("alltoall", "deepep")
    if s.moe_shared_expert_overlap:
        if not model.shared_ffn:
            add(("strategy.moe_shared_expert_overlap", "moe_shared_expert_overlap needs shared experts (num_shared_experts > 0)"))
        if s.ep <= 1 or not a2a:
            add(("strategy.moe_shared_expert_overlap", "moe_shared_expert_overlap needs ep > 1 and moe_dispatcher "
                 f"alltoall or deepep (\"only works with alltoall or flex token dispatcher\"); ep={s.ep}, {s.moe_dispatcher}"))
    if s.overlap_moe_expert_parallel_comm:
        f = "strategy.overlap_moe_expert_parallel_comm"
        if s.ep <= 1 or not a2a:
            add((f, f"overlap_moe_expert_parallel_comm needs ep > 1 and moe_dispatcher alltoall or deepep; ep={s.ep}, {s.moe_dispatcher}"))
        # Megatron-LM arguments.py validate_args: pp > 1 needs a virtual pipeline, and a vpp of 1 is
        # set to None there ("virtual_pipeline_model_parallel_size == 1 → None"), so it is no VPP
        if not ((s.schedule == "interleaved" and s.vpp > 1) or (s.pp == 1 and s.schedule == "1f1b")):
            add((f, "overlap_moe_expert_parallel_comm runs the combined 1F1B: pp=1 with schedule='1f1b', or "
                 "schedule='interleaved' with vpp > 1 (\"virtual_pipeline_model_parallel_size must be specified\"; "
                 f"Megatron sets a vpp of 1 to None); pp={s.pp}, vpp={s.vpp}, {s.schedule}"))
        if s.recompute == "full":
            add((f, "overlap_moe_expert_parallel_comm needs recompute != 'full' (\"disable full recomputation\")"))
        if s.moe_shared_expert_overlap:
            add((f, "overlap_moe_expert_parallel_comm excludes moe_shared_expert_overlap (Megatron-Core: disable it)"))
        if model.mtp_layers > 1:
            add((f, f"overlap_moe_expert_parallel_comm supports at most one MTP layer (mtp_layers={model.mtp_layers})"))
    return issues


class Scenario(BaseModel):
    """A validated, frozen (model, system, strategy) triple."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelSpec
    system: SystemSpec
    strategy: StrategySpec

    @model_validator(mode="after")
    def _cross_check(self) -> "Scenario":
        issues = check_scenario(self.model, self.system, self.strategy)
        if issues:
            raise ValueError("; ".join(f"{f}: {m}" for f, m in issues))
        return self

    # ---- derived layout -------------------------------------------------------------------
    @property
    def dp(self) -> int:
        return derived_dp(self.model, self.system, self.strategy)

    @property
    def num_microbatches(self) -> int:
        s = self.strategy
        return s.global_batch_size // (s.micro_batch_size * self.dp)

    @property
    def tokens_per_step(self) -> int:
        return self.strategy.global_batch_size * self.strategy.seq_len

    @property
    def dp_shard(self) -> int:
        """ZeRO shard group size inside DP (HSDP); all of DP when not set."""
        return self.strategy.dp_shard or self.dp

    @property
    def dp_replicas(self) -> int:
        return max(self.dp // self.dp_shard, 1)

    @property
    def edp(self) -> int:
        """Expert data-parallel size: world / (ep·etp·pp) (Megatron-Core expert grid)."""
        s = self.strategy
        return max((s.tp * s.cp * self.dp) // (s.ep * s.etp_size), 1)

    @property
    def notes(self) -> list[tuple[str, str]]:
        """Non-fatal (field, message) notes: layouts Megatron-LM would refuse (``scenario_notes``)."""
        return list(_cached_notes(self.model, self.strategy))

    @property
    def vocab_padded(self) -> int:
        return padded_vocab(self.model.vocab_size, self.strategy.tp)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def load_scenario(data: dict[str, Any]) -> Scenario:
    """Validate ``{"model": {...}, "system": {...}, "strategy": {...}}``; raise ConfigError naming every bad field."""
    if not isinstance(data, dict):
        raise ConfigError([("", "a scenario must be a JSON object with model, system and strategy")])
    issues: list[tuple[str, str]] = []
    parts: dict[str, Any] = {}
    for key, cls in (("model", ModelSpec), ("system", SystemSpec), ("strategy", StrategySpec)):
        raw = data.get(key)
        if isinstance(raw, (ModelSpec, SystemSpec, StrategySpec)):
            parts[key] = raw
            continue
        if not isinstance(raw, dict):
            issues.append((key, f"{key} must be a JSON object"))
            continue
        try:
            parts[key] = cls.model_validate(raw)
        except ValidationError as e:
            issues.extend(from_pydantic(e, key, cls.model_fields).issues)
    extra = set(data) - {"model", "system", "strategy"}
    for k in sorted(extra):
        issues.append((str(k), "unknown section (expected model, system, strategy)"))
    if issues:
        raise ConfigError(issues)
    cross = check_scenario(parts["model"], parts["system"], parts["strategy"])
    if cross:
        raise ConfigError(cross)
    return Scenario.model_construct(model=parts["model"], system=parts["system"], strategy=parts["strategy"])


def make_scenario(model: ModelSpec, system: SystemSpec, strategy: StrategySpec) -> Scenario:
    """Cross-check already-validated specs; raise ConfigError on problems."""
    cross = check_scenario(model, system, strategy)
    if cross:
        raise ConfigError(cross)
    return Scenario.model_construct(model=model, system=system, strategy=strategy)
