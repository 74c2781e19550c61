"""LoRA fine-tuning (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models",
arXiv:2106.09685 §4.1): the pretrained weights W are frozen and each target linear gains a
trainable path beside it, h = x·W + x·A·B with A: in × r and B: r × out.

What freezing changes in one micro-batch, as Megatron-Core with TransformerEngine runs it:

- no weight-gradient GEMM for a frozen linear (TE computes wgrad only for a weight that
  requires grad: transformer_engine/pytorch/module/linear.py ``_Linear.backward``,
  ``ctx.requires_wgrad``), and no embedding gradient;
- a frozen linear keeps no copy of its input for backward (``backward_needs_input =
  is_grad_enabled and weight.requires_grad``), so under SP a frozen column-parallel linear
  does not all-gather its input again in backward (and cost/activations.py drops the input);
  a target linear's input is still read by its adapter's wgrad, so it keeps both;
- the TP reduce-scatter (all-reduce) of a linear's input gradient, which Megatron/TE overlap
  with that linear's wgrad GEMM, has no wgrad left to hide under;
- per target linear, the adapter's GEMMs each way (A: in → r, B: r → out, split over TP like
  NeMo's ``ParallelLinearAdapter``; they run in bf16, plain Megatron linears outside TE's FP8
  autocast) and the add of the two outputs. The adapter's own TP collectives (tokens × r) and
  saved activations (tokens × r) are below 1 % of the base linear's and are not priced.

Gradients, optimizer states, data-parallel traffic and the optimizer step follow the adapters
alone (cost/static_memory.py ``StageParams.frozen``)."""

from __future__ import annotations

from ..config.model import ModelSpec
from .dims import Dims
from .ops import BF16, Collective, Gemm, Memory, Op
from .phases import Phases, gemm_triple

# StrategySpec.lora_targets → the linear families with an adapter
TARGETS = {"qkv": ("qkv",), "all": ("qkv", "proj", "fc1", "fc2")}


def adapter_params(m: ModelSpec, targets: str, rank: int) -> tuple[int, int]:
    """(per attention block, per dense MLP block) adapter parameters: rank·(in + out) for each
    target linear of in × out (Hu et al. 2021 §4.1), unsplit."""
    h, d = m.hidden_size, m.d_head
    f_in = (2 if m.activation == "swiglu" else 1) * m.ffn_hidden_size
    per = {"qkv": h + (m.num_attention_heads + 2 * m.kv_heads) * d, "proj": m.num_attention_heads * d + h,
           "fc1": h + f_in, "fc2": m.ffn_hidden_size + h}
    chosen = TARGETS[targets]
    attn = sum(per[t] for t in chosen if t in ("qkv", "proj"))
    mlp = sum(per[t] for t in chosen if t in ("fc1", "fc2"))
    return rank * attn, rank * mlp


def model_adapter_params(m: ModelSpec, targets: str, rank: int) -> int:
    """Every adapter of the model: one per attention block and per dense MLP block."""
    attn, mlp = adapter_params(m, targets, rank)
    return m.num_attention_layers * attn + m.num_dense_layers * mlp


def family(linear: str) -> str:
    """The LoRA target a linear belongs to: Megatron's fused qkv or torchtitan's q, k, v; the
    out-projection; FC1 (SwiGLU's gate and up, torchtitan's w1 and w3); FC2; '' for the rest
    (LM head, MLA and MTP projections)."""
    base = linear.split(":", 1)[0]
    return {"qkv": "qkv", "q": "qkv", "k": "qkv", "v": "qkv", "proj": "proj",
            "fc1": "fc1", "fc3": "fc1", "fc2": "fc2"}.get(base, "")


def frozen(ph: Phases, d: Dims) -> Phases:
    """``ph`` with its weights frozen and adapters on ``d.lora``'s targets (module docstring)."""
    targets = TARGETS[d.lora]
    out = Phases(fwd=list(ph.fwd),
                 bwd=[op for op in ph.bwd if not _regathers_frozen_input(op, targets)],
                 wgt=[op for op in ph.wgt if not _frozen_weight_grad(op)])
    for fam, tokens, k_in, n_out in _adapted(ph, targets):
        r = max(d.lora_rank // d.tp, 1)
        gemm_triple(out, fam + ":lora_a", tokens, k_in, r)
        gemm_triple(out, fam + ":lora_b", tokens, r, n_out)
        out.fwd.append(Memory("lora-add:" + fam, 3 * BF16 * tokens * n_out))
    return out


def _frozen_weight_grad(op: Op) -> bool:
    return (isinstance(op, Gemm) and op.name.startswith("wgrad:")) or (isinstance(op, Memory) and op.name == "embed-wgrad")


def _regathers_frozen_input(op: Op, targets: tuple[str, ...]) -> bool:
    """A column-parallel linear's backward all-gather of its input (for its wgrad, beside its dgrad)."""
    if not (isinstance(op, Collective) and op.name.startswith("ag-bwd:")):
        return False
    linear = op.name.split(":", 1)[1]
    return op.overlap_with == "dgrad:" + linear and family(linear) not in targets


def _adapted(ph: Phases, targets: tuple[str, ...]) -> list[tuple[str, int, int, int]]:
    """(family, tokens, in, out per rank) of each target family the block's forward GEMMs hold:
    one adapter per family, however many GEMMs it is split into (torchtitan's q, k, v)."""
    found: dict[str, tuple[int, int, int]] = {}
    for op in ph.fwd:
        if isinstance(op, Gemm) and op.name.startswith("fwd:") and family(op.name[4:]) in targets:
            fam = family(op.name[4:])
            tokens, k_in, n_out = found.get(fam, (op.m, op.k, 0))
            found[fam] = (tokens, k_in, n_out + op.n)
    return [(fam, tokens, k_in, n_out) for fam, (tokens, k_in, n_out) in found.items()]
