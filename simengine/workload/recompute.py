"""Which forward ops of a block a Megatron-Core selective ``recompute_modules`` entry re-runs in
backward (megatron/core/transformer/transformer_config.py ``recompute_modules``; the attention core,
``core_attn``, is priced from the block's attention kernels by the caller).

- ``layernorm`` — the norms that are separate modules (transformer_layer.py: ``recompute_input_layernorm``
  / ``recompute_pre_mlp_layernorm`` only when the norm is not an IdentityOp): the MoE layer's pre-MLP
  norm and MLA's input norm (gpt_layer_specs.py); a GQA layer's input norm and a dense MLP's norm
  are fused into TransformerEngine's LayerNormLinear and are not recomputed.
- ``moe_act`` — the expert activation (experts.py TEGroupedMLP ``activation_checkpoint`` of
  ``bias_act_func``: the clamped GLU's eager clamps too, fused_bias_geglu.py).
- ``mla_up_proj`` — MLA's up-projections (with the fused q/kv norms of TE's LayerNormLinear when
  ``qk_layernorm``) and RoPE (multi_latent_attention.py ``qkv_up_proj_and_rope_apply``).
- ``mlp`` — the whole dense MLP (transformer_layer.py ``recompute_mlp``: not for MoE layers).
- ``moe`` — the whole MoE layer after its norm, router and token all-to-alls included
  (moe_layer.py ``tensor_parallel.checkpoint`` of the MoE forward).
- ``shared_experts`` — the shared expert MLP (shared_experts.py ``recompute``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config.framework import FRAMEWORKS
from .ops import Attention, Collective, Gemm, Op

if TYPE_CHECKING:
    from ..config.scenario import Scenario
    from ..config.strategy import StrategySpec


def op_sac_stack(sc: Scenario) -> bool:
    """Whether recompute="selective" means torchtitan's per-op selective AC here (``Stack.selective_ac``;
    its dense blocks only: MLA and the MoE layers keep the recompute_modules' meaning)."""
    return FRAMEWORKS[sc.strategy.framework].selective_ac == "op" and sc.model.attention != "mla"


def recomputed_layers(st: StrategySpec, n_layers: int) -> int:
    """Layers of a chunk of ``n_layers`` that full recompute re-runs: the first ones (Megatron
    --recompute-method block, --recompute-num-layers; all when it is unset), none otherwise."""
    if st.recompute != "full":
        return 0
    return n_layers if st.recompute_num_layers is None else min(st.recompute_num_layers, n_layers)

_MLA_UP = ("norm:q_norm", "ag:q_up", "fwd:q_up", "norm:kv_norm", "ag:kv_up", "fwd:kv_up", "rope")


def _is(name: str, *prefixes: str) -> bool:
    return name.startswith(prefixes)


def recomputed_ops(block: str, fwd: Sequence[Op], modules: Sequence[str], mla: bool) -> list[Op]:
    """The forward ops of ``block`` ("attn", "attn_window", "mlp", "moe") that ``modules`` re-run."""
    mods = set(modules)
    if block in ("attn", "attn_window"):
        keep = (("norm:ln1",) if mla and "layernorm" in mods else ()) + (_MLA_UP if mla and "mla_up_proj" in mods else ())
        return [op for op in fwd if op.name in keep]
    if block == "mlp":
        return [op for op in fwd if not _is(op.name, "bda:")] if "mlp" in mods else []
    if block != "moe":
        return []
    out = []
    for op in fwd:
        n = op.name
        if _is(n, "bda:"):
            continue
        if n == "norm:ln2":
            if "layernorm" in mods:
                out.append(op)
        elif "moe" in mods or ("moe_act" in mods and _is(n, "swiglu:experts", "gelu:experts", "sqrelu:experts",
                                                           "glu-clamp:experts")) \
                or ("shared_experts" in mods and n.endswith(":shared")):
            out.append(op)
    return out


def op_sac(fwd: Sequence[Op], first_mm: int = 1) -> tuple[list[Op], list[Op]]:
    """(ops re-run in backward, ops whose outputs are kept) of a block's forward under torchtitan's
    per-op selective activation checkpointing (torchtitan/models/llama3/parallelize_llama.py
    ``_apply_ac_to_transformer_block``, ``selective_ac_option = "op"``, at the commit of its 2024-12
    benchmarks): each TransformerBlock is checkpointed with a policy that saves the outputs of the
    ops in ``_save_list`` — ``aten.mm`` except every second one (``mm_count % 2 == 0``, counted per
    block from its first GEMM: ``first_mm`` numbers this block's first within the TransformerBlock),
    SDPA (flash / memory-efficient) and ``_c10d_functional.reduce_scatter_tensor`` — and re-runs
    every other op (norms, RoPE, activations, residual adds, the SP all-gathers)."""
    rerun: list[Op] = []
    kept: list[Op] = []
    n = first_mm
    for op in fwd:
        if isinstance(op, Gemm):
            (kept if n % 2 else rerun).append(op)
            n += 1
        elif isinstance(op, Attention) or (isinstance(op, Collective) and op.kind == "reduce_scatter"):
            kept.append(op)
        else:
            rerun.append(op)
    return rerun, kept


def gemms(fwd: Sequence[Op]) -> int:
    """GEMM ops of a block's forward (``op_sac``'s count)."""
    return sum(1 for op in fwd if isinstance(op, Gemm))
