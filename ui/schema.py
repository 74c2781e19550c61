"""Field metadata read from the pydantic specs (pure): the form widgets are generated from it.

Nothing here is hand-written per field except presentation groups: type, bounds, choices,
defaults and help come from ``model_fields`` (the same data as ``model_json_schema()``).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt, MaxLen
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from .units import unit_for

Kind = Literal["int", "float", "bool", "str", "choice", "table"]


@dataclass(frozen=True)
class FieldMeta:
    path: tuple[str, ...]          # inside the section, e.g. ("gpu", "memory_gib")
    kind: Kind
    description: str
    optional: bool = False         # None is allowed ("auto")
    choices: tuple[Any, ...] = ()
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    max_length: int | None = None
    default: Any = None
    required: bool = False
    row_model: type[BaseModel] | None = None  # for "table": the row spec
    group: tuple[str, ...] = field(default=())  # enclosing nested-model path

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def unit(self) -> str:
        return unit_for(self.name)

    @property
    def label(self) -> str:
        """The canonical (dotted) field name and its unit, e.g. ``scale_up.bandwidth_gbs [GB/s]``."""
        u = self.unit
        return f"{self.dotted} [{u}]" if u else self.dotted

    def bounds_text(self) -> str:
        parts = []
        if self.ge is not None:
            parts.append(f"≥ {self.ge:g}")
        if self.gt is not None:
            parts.append(f"> {self.gt:g}")
        if self.le is not None:
            parts.append(f"≤ {self.le:g}")
        if self.lt is not None:
            parts.append(f"< {self.lt:g}")
        return ", ".join(parts)

    def at_default(self, value: Any) -> bool:
        # a tuple default arrives from the JSON-canonical section as a list
        default = list(self.default) if isinstance(self.default, tuple) else self.default
        return not self.required and (list(value) if isinstance(value, tuple) else value) == default

    def help_text(self) -> str:
        bits = [self.description or self.name]
        if self.unit:
            bits.append(f"Unit: {self.unit}.")
        b = self.bounds_text()
        if b:
            bits.append(f"Range: {b}.")
        if self.choices:
            bits.append("Choices: " + ", ".join(str(c) for c in self.choices) + ".")
        if self.optional:
            bits.append("Leave empty for the automatic value.")
        if not self.required and self.default is not None and self.kind != "table":
            bits.append(f"Default: {self.default}.")
        return "  \n".join(bits)


def _strip_optional(ann: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(ann)) == 2:
            return args[0], True
    return ann, False


def fields_of(cls: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[FieldMeta]:
    """Leaf fields of ``cls`` in declaration order, nested models flattened with their path."""
    out: list[FieldMeta] = []
    for name, info in cls.model_fields.items():
        ann, optional = _strip_optional(info.annotation)
        path = prefix + (name,)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.extend(fields_of(ann, path))
            continue
        bounds: dict[str, Any] = {}
        for m in info.metadata:
            if isinstance(m, Ge):
                bounds["ge"] = m.ge
            elif isinstance(m, Gt):
                bounds["gt"] = m.gt
            elif isinstance(m, Le):
                bounds["le"] = m.le
            elif isinstance(m, Lt):
                bounds["lt"] = m.lt
            elif isinstance(m, MaxLen):
                bounds["max_length"] = m.max_length
        origin = typing.get_origin(ann)
        row_model = None
        choices: tuple[Any, ...] = ()
        if origin is Literal:
            kind: Kind = "choice"
            choices = typing.get_args(ann)
        elif origin is tuple and typing.get_args(ann) and isinstance(typing.get_args(ann)[0], type) \
                and issubclass(typing.get_args(ann)[0], BaseModel):
            kind = "table"
            row_model = typing.get_args(ann)[0]
        elif ann is bool:
            kind = "bool"
        elif ann is int:
            kind = "int"
        elif ann is float:
            kind = "float"
        elif ann is str:
            kind = "str"
        else:  # unknown annotation: edit as text, let pydantic judge
            kind = "str"
        default = None
        if info.default is not PydanticUndefined:
            default = info.default
        elif info.default_factory is not None:
            try:
                default = info.default_factory()
            except TypeError:
                default = None
        out.append(FieldMeta(
            path=path, kind=kind, description=info.description or "", optional=optional,
            choices=choices, default=default, required=info.is_required(), row_model=row_model,
            group=prefix, **bounds,
        ))
    return out


def get_in(data: dict, path: tuple[str, ...]) -> Any:
    cur: Any = data
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def set_in(data: dict, path: tuple[str, ...], value: Any) -> None:
    cur = data
    for p in path[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[p] = nxt
        cur = nxt
    cur[path[-1]] = value


# ---- presentation groups (which fields sit together; everything else lands in "Other") -------
# tests/test_app_ui_units.py checks that no spec field falls into "Other" unless OTHER_OK lists it.
GROUPS: dict[str, list[tuple[str, list[str]]]] = {
    "model": [
        ("Architecture", ["name", "hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim",
                          "ffn_hidden_size", "vocab_size", "max_position_embeddings"]),
        # the layer's variants: folded while they are the defaults (a Llama-style decoder), open for
        # anything else (GPT-2's LayerNorm, GELU and learned positions; sliding windows)
        ("Attention, activation, norm and embeddings", ["attention", "activation", "norm", "position_embedding",
                                                        "tie_embeddings", "linear_bias", "attention_window",
                                                        "full_attention_interval", "attention_sinks", "swiglu_limit", "qk_norm"]),
        ("Multi-head latent attention (MLA)", ["q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"]),
        ("Mixture of experts (MoE)", ["num_experts", "top_k", "moe_ffn_hidden_size", "num_shared_experts",
                                      "shared_expert_ffn_hidden_size", "first_k_dense_layers", "moe_layer_freq",
                                      "router", "capacity_factor", "pad_to_capacity", "n_group", "topk_group",
                                      "router_expert_bias", "moe_latent_size", "mtp_layers", "mtp_repeated_layer"]),
        ("Hybrid Mamba-2 stack", ["hybrid_pattern", "mamba_num_heads", "mamba_head_dim", "mamba_state_dim",
                                  "mamba_num_groups", "mamba_conv_kernel", "mamba_chunk_size"]),
        ("Regularisation", ["hidden_dropout", "attention_dropout"]),
    ],
    "system": [
        ("Cluster", ["name", "num_gpus", "gpus_per_node"]),
        ("GPU", ["gpu.name", "gpu.memory_gib", "gpu.peak_tflops.bf16", "gpu.peak_tflops.fp8", "gpu.peak_tflops.fp4", "gpu.peak_tflops.fp32",
                 "gpu.hbm_bandwidth_gbs", "gpu.host_link_gbs", "gpu.host_link_shares_nic", "gpu.host_memory_gib", "gpu.tdp_w", "gpu.price_per_hour"]),
        ("Network", ["scale_up.domain_size", "scale_up.bandwidth_gbs", "scale_up.latency_us",
                     "scale_out.bandwidth_gbs", "scale_out.latency_us"]),
        ("Efficiency model", [f"efficiency.{n}" for n in (
            "gemm", "gemm_half_dim", "fp8_gemm", "fp4_gemm", "grouped_gemm", "attention_fwd", "attention_bwd", "hbm",
            "kernel_overhead_us", "collective_scale_up", "collective_scale_out", "collective_overhead_us")]),
    ],
    "strategy": [
        ("Parallelism", ["name", "tp", "pp", "dp", "cp", "vpp", "sequence_parallel", "cp_comm_type"]),
        ("Batch", ["micro_batch_size", "global_batch_size", "seq_len"]),
        ("Schedule and overlap", ["schedule", "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap",
                                  "overlap_p2p_comm", "p2p_scatter_gather"]),
        ("Pipeline layout", ["decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                             "pipeline_layers"]),
        ("Precision and memory", ["dtype", "fp8_recipe", "zero_stage", "dp_shard", "recompute", "recompute_num_layers",
                                  "recompute_modules", "cpu_offload_layers", "attention_impl",
                                  "fused_cross_entropy", "compiled_loss", "gradient_accumulation_fusion", "fp32_main_grads", "adam_moments_dtype", "fp8_param_gather",
                                  "allocator_overhead"]),
        ("Fine-tuning (packing, LoRA)", ["packed_doc_len", "peft", "lora_rank", "lora_targets"]),
        ("MoE and expert parallelism", ["ep", "etp", "moe_dispatcher", "moe_dispatch_dtype", "moe_shared_expert_overlap",
                 "overlap_moe_expert_parallel_comm", "moe_load_imbalance"]),
        ("Software stack and overheads", ["framework", "attention_kernel", "fsdp_pattern", "step_overhead_ms",
                                          "jitter_cv", "overlap_slowdown", "straggler_factor"]),
    ],
}
# Fields deliberately left to the "Other" group (none today).
OTHER_OK: frozenset[str] = frozenset()
# Long free-text fields edited in a text area at the end.
TEXT_AREAS = {"source", "efficiency.source"}


def grouped_fields(section: str, cls: type[BaseModel]) -> list[tuple[str, list[FieldMeta]]]:
    """Leaf fields of ``cls`` split into presentation groups; tables and long texts excluded."""
    metas = [m for m in fields_of(cls) if m.kind != "table" and m.dotted not in TEXT_AREAS]
    by_name = {m.dotted: m for m in metas}
    used: set[str] = set()
    out: list[tuple[str, list[FieldMeta]]] = []
    for title, names in GROUPS.get(section, []):
        items = [by_name[n] for n in names if n in by_name]
        used.update(m.dotted for m in items)
        if items:
            out.append((title, items))
    rest = []
    for m in metas:
        if m.dotted in used:
            continue
        # a field the engine added later joins the group of its siblings (same nested model)
        home = next((items for _, items in out if m.group and any(x.group == m.group for x in items)), None)
        (home if home is not None else rest).append(m)
    if rest:
        out.append(("Other", rest))
    return out


def text_fields(cls: type[BaseModel]) -> list[FieldMeta]:
    return [m for m in fields_of(cls) if m.dotted in TEXT_AREAS]


def table_fields(cls: type[BaseModel]) -> list[FieldMeta]:
    return [m for m in fields_of(cls) if m.kind == "table"]
