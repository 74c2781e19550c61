"""Build the workload: per pipeline rank and virtual chunk, which blocks it runs, and the op lists
of each block kind (built once per kind: every dense layer of a model is identical)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config.model import ModelSpec
from ..config.scenario import Scenario
from ..config.strategy import StrategySpec
from ..memo import config_cache
from ..schedule import get_schedule
from .dims import Dims, dims_of
from .ends import embedding, head, mtp_projection
from .layers import attention_block, dense_mlp_block, moe_block
from ..config.layout import strategy_stage_counts
from .partition import layer_ranges
from .lora import frozen
from .mamba import mamba_block
from .fp8_recipes import add_fp8_ops
from .ops import Collective
from .phases import Phases, add_grad_accumulation
from .window import window_attention_block, windowed_layers


@dataclass(frozen=True, slots=True)
class ChunkWork:
    index: int              # virtual pipeline stage (Schedule.stage_of: v·pp + rank interleaved)
    rank: int
    layers: tuple[int, ...]  # layer indices
    dense_layers: int
    moe_layers: int
    first: bool              # holds the input embedding
    last: bool               # holds the final norm, LM head, loss (and MTP modules)
    mtp: int = 0             # multi-token-prediction modules on this chunk (last chunk only)
    mtp_moe: bool = False    # their transformer block uses an MoE MLP (ModelSpec.mtp_moe)
    window_layers: int = 0   # of ``layers``, those with sliding-window attention ("attn_window" block)
    mamba_layers: int = 0    # hybrid stacks: Mamba-2 layers ("mamba" block)
    hybrid_attn: int = -1    # hybrid stacks: self-attention layers; -1 = every layer has attention

    @property
    def attn_layers(self) -> int:
        """Layers of the chunk with a self-attention block."""
        return len(self.layers) if self.hybrid_attn < 0 else self.hybrid_attn


@dataclass(frozen=True, slots=True)
class Workload:
    dims: Dims
    blocks: dict[str, Phases]     # "attn", "mlp", "moe", "embed", "head" (+ "mtp")
    ranks: tuple[tuple[ChunkWork, ...], ...]   # per pp rank, its chunks in local order


def build_workload(sc: Scenario) -> Workload:
    d = dims_of(sc)
    return Workload(d, scenario_blocks(sc, d), place_layers(sc))


def scenario_blocks(sc: Scenario, d: Dims | None = None) -> dict[str, Phases]:
    """``build_workload(sc).blocks`` without placing the layers (what the search prices per block
    kind: search/blocks.py)."""
    m, st = sc.model, sc.strategy
    return block_phases(dims_of(sc) if d is None else d, m, st.cp_comm_type, st.fused_cross_entropy, st.moe_dispatcher,
                        st.moe_shared_expert_overlap)


@config_cache
def block_phases(d: Dims, m: ModelSpec, cp_comm_type: str, fused_cross_entropy: bool, moe_dispatcher: str,
                 moe_shared_expert_overlap: bool) -> dict[str, Phases]:
    """The op lists of each block kind: a pure function of the per-rank dimensions, the model and
    the strategy fields the block builders read, memoised on exactly those (``memo.config_cache``:
    a search and a page rerun build the same blocks for many layouts). The result is shared:
    read it, never change it (cost/stage.py keys its priced blocks on its identity).

    Every block but the MoE one is also memoised on its own, on the dims without their MoE
    fields (``_without_moe``: none of those builders reads them), so the attention, MLP and
    end blocks of a search's layouts that differ only in ep, etp or the dispatcher are one
    object (search/blocks.py prices a block once per object)."""
    dense = _without_moe(d) if m.is_moe else d
    blocks: dict[str, Phases] = {
        "attn": _block("attn", dense, m, cp_comm_type),
        "embed": _block("embed", dense, m, None),
        "head": _block("head", dense, m, fused_cross_entropy),
    }
    if m.num_dense_layers > 0:
        blocks["mlp"] = _block("mlp", dense, m, None)
    if m.num_mamba_layers:
        blocks["mamba"] = _block("mamba", dense, m, None)
    if m.is_moe:
        blocks["moe"] = _torch_tp(_finished(moe_block(d, m, moe_dispatcher, moe_shared_expert_overlap), d), d, "moe")
    if m.mtp_layers:
        blocks["mtp"] = _block("mtp", dense, m, None)
    if m.full_attention_interval:  # mixed pattern (GPT-OSS): windowed layers get their own block
        blocks["attn_window"] = _block("attn_window", dense, m, cp_comm_type)
    return blocks


def _without_moe(d: Dims) -> Dims:
    """The dims with the fields only the MoE block reads (workload/dims.py) at their dense values."""
    return replace(d, experts_local=0, moe_ffn=0, moe_tokens=0, tokens_per_expert=0, shared_ffn=0,
                   ep=1, etp=1, moe_dispatch_dtype="bf16", moe_imbalance=1.0, moe_dim=0)


def _build_block(kind: str, d: Dims, m: ModelSpec, arg) -> Phases:
    """One dense block's op lists (``block_phases``), with the FP8 casts; ``arg``: what its
    builder takes besides the dims and model (cp_comm_type, fused cross-entropy, or None)."""
    if kind == "attn":
        ph = attention_block(d, m, arg)
    elif kind == "attn_window":
        ph = window_attention_block(d, m, arg)
    elif kind == "embed":
        ph = embedding(d, m.position_embedding == "learned")
    elif kind == "head":
        ph = head(d, arg)
    elif kind == "mlp":
        ph = dense_mlp_block(d)
    elif kind == "mamba":
        ph = mamba_block(d, m)
    else:
        ph = mtp_projection(d)
    if d.lora:
        ph = frozen(ph, d)  # LoRA: base weights frozen, adapters on the targets (workload/lora.py)
    return _torch_tp(_finished(ph, d), d, kind)


_block = config_cache(_build_block, 1024)   # a search's dense blocks: one per (tp, cp, micro-batch, …)


def _finished(ph: Phases, d: Dims) -> Phases:
    """The block as the stack runs it: its FP8 recipe's casts when its GEMMs run in fp8
    (``Dims.fp8``), and its separate gradient-accumulation passes when the wgrad GEMMs do not
    accumulate (``Dims.grad_accum_bytes``)."""
    if d.fp8:
        add_fp8_ops(ph, d)
    if d.grad_accum_bytes:
        add_grad_accumulation(ph, d.grad_accum_bytes)
    return ph


# blocks torchtitan runs outside torch.compile: ``apply_compile`` compiles each TransformerBlock
# and nothing else (torchtitan/models/llama3/parallelize_llama.py at 820504e, the 2025-06 async-TP
# page's commit; components/loss.py compiles the loss function alone), so the embedding's and the
# output projection's TP collectives stay eager NCCL collectives that no Inductor pass can fuse
_EAGER_BLOCKS = ("embed", "head")


def _torch_tp(ph: Phases, d: Dims, kind: str) -> Phases:
    """TP collectives as the DTensor stacks run them (``Stack.dtensor_tp``): no backward re-gather
    (``_regather``), each sequence-parallel all-gather and reduce-scatter with its ``aten.cat``
    copy (``Collective.cat_copy``); and where TP overlap is async TP (``Stack.tp_overlap_impl``
    "symm_mem", torchtitan's ``enable_async_tensor_parallel``), which Inductor's post-grad
    ``micro_pipeline_tp_pass`` (torch/_inductor/fx_passes/micro_pipeline_tp.py) applies to every
    compiled graph, forward and backward, their decomposition as symmetric-memory fused ops
    (``Collective.overlap_impl``, priced in cost/phase.py ``_symm_mem``) — none in the blocks
    outside the compiled TransformerBlocks (``_EAGER_BLOCKS``)."""
    if not d.stack.dtensor_tp or d.tp <= 1:
        return ph
    symm = d.stack.tp_overlap_impl == "symm_mem"
    eager = kind in _EAGER_BLOCKS
    for ops in (ph.fwd, ph.bwd, ph.wgt):
        ops[:] = [_dtensor(op, symm, eager, d.b > 1) if isinstance(op, Collective) and op.group == "tp" else op
                  for op in ops if not _regather(op)]
    return ph


def _dtensor(op: Collective, symm: bool, eager: bool, batched: bool) -> Collective:
    cat = op.kind in ("all_gather", "reduce_scatter")
    if symm and not eager:
        return replace(op, cat_copy=cat, overlap_impl="symm_mem", seq_major=batched and op.kind == "all_gather")
    return replace(op, cat_copy=cat, decomposable=op.decomposable and not symm)


def _regather(op) -> bool:
    """Megatron's backward re-gather of a column-parallel input for its wgrad (workload/phases.py
    ``column_linear``: ``ag-bwd:<name>`` beside the dgrad), which a DTensor stack never runs: the
    all-gather is its own autograd op (``PrepareModuleInput`` / ``ColwiseParallel`` redistribute
    Shard(1) → Replicate, torch/distributed/tensor/parallel/style.py) whose output the linear saves
    for its wgrad, so backward reads the saved gathered input — or, under activation
    checkpointing, the one the recompute gathers again (the recompute's ``ag:`` op, counted there:
    workload/recompute.py ``op_sac`` re-runs the SP all-gathers, full recompute the whole forward)."""
    return (isinstance(op, Collective) and op.group == "tp" and op.kind == "all_gather"
            and op.name.startswith("ag-bwd:") and op.overlap_with == "dgrad:" + op.name.split(":", 1)[1])


def place_layers(sc: Scenario) -> tuple[tuple[ChunkWork, ...], ...]:
    """Per pp rank, its chunks in local order with the layers each holds. The schedule says which
    virtual stage (rank, chunk) is (``stage_of``: interleaved c·p + r, DualPipeV's V r / 2p−1−r);
    ``partition`` says how many layers each stage holds."""
    return _place_layers(sc.model, sc.strategy)


@config_cache
def _place_layers(m: ModelSpec, st: StrategySpec) -> tuple[tuple[ChunkWork, ...], ...]:
    """``place_layers``, memoised on the frozen (model, strategy) it depends on (immutable result)."""
    sched = get_schedule(st.schedule)
    nch = sched.chunks_per_rank(st.vpp)
    counts, _ = strategy_stage_counts(st, m.num_layers)  # the Scenario has rejected bad splits
    chunks = layer_ranges(counts)
    per_chain = st.pp * nch // sched.chains  # DualPipe: stage s holds the layers of stage s mod p
    last = per_chain - 1
    ranks = []
    for r in range(st.pp):
        mine = []
        for g in (sched.stage_of(r, k, st.pp, st.vpp) for k in range(nch)):
            c = g % per_chain
            layers = tuple(chunks[c])
            n_moe = sum(1 for i in layers if m.is_moe_layer(i))
            is_last = c == last
            mtp = m.mtp_layers if is_last else 0
            win = windowed_layers(m, layers) if m.full_attention_interval else 0
            if m.hybrid_pattern is not None:  # one mixer per layer (ModelSpec.hybrid_pattern)
                kinds = [m.layer_kind(i) for i in layers]
                mine.append(ChunkWork(g, r, layers, kinds.count("-"), n_moe, c == 0, is_last, mtp, m.mtp_moe, 0,
                                      kinds.count("M"), kinds.count("*")))
                continue
            mine.append(ChunkWork(g, r, layers, len(layers) - n_moe, n_moe, c == 0, is_last, mtp,
                                  m.mtp_moe, win))
        ranks.append(tuple(mine))
    return tuple(ranks)


def _clear_blocks(clear=block_phases.cache_clear) -> None:  # type: ignore[attr-defined]
    """Empty both block memos (``block_phases``' and each dense block's)."""
    clear()
    _block.cache_clear()  # type: ignore[attr-defined]


block_phases.cache_clear = _clear_blocks  # type: ignore[attr-defined]
