"""Build the workload: per pipeline rank and virtual chunk, which blocks it runs, and the op lists
of each block kind (built once per kind: every dense layer of a model is identical)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config.scenario import Scenario
from .dims import Dims, dims_of
from .ends import embedding, head
from .layers import attention_block, dense_mlp_block, moe_block
from .partition import layers_per_chunk, rank_chunks
from .phases import Phases


@dataclass(frozen=True, slots=True)
class ChunkWork:
    index: int              # global model chunk (v·pp + rank)
    rank: int
    layers: tuple[int, ...]  # layer indices
    dense_layers: int
    moe_layers: int
    first: bool              # holds the input embedding
    last: bool               # holds the final norm, LM head, loss (and MTP modules)


@dataclass(frozen=True, slots=True)
class Workload:
    dims: Dims
    blocks: dict[str, Phases]     # "attn", "mlp", "moe", "embed", "head" (+ "mtp")
    ranks: tuple[tuple[ChunkWork, ...], ...]   # per pp rank, its chunks in local order


def build_workload(sc: Scenario) -> Workload:
    m, st = sc.model, sc.strategy
    d = dims_of(sc)
    blocks: dict[str, Phases] = {
        "attn": attention_block(d, m, st.cp_comm_type),
        "embed": embedding(d, m.position_embedding == "learned"),
        "head": head(d, st.fused_cross_entropy),
    }
    if m.num_layers - m.num_moe_layers > 0:
        blocks["mlp"] = dense_mlp_block(d)
    if m.is_moe:
        blocks["moe"] = moe_block(d, m, st.moe_dispatcher)
    per_rank = 2 if st.schedule == "dualpipev" else st.vpp
    chunks = layers_per_chunk(m.num_layers, st.pp, per_rank)
    last = st.pp * per_rank - 1
    ranks = []
    for r in range(st.pp):
        mine = []
        # DualPipeV (DeepSeek-V3 report §3.2.1, deepseek-ai/DualPipe DualPipeV): rank r holds
        # stages r and 2p−1−r of a 2p-stage pipeline (a V), so the last stage lives on rank 0.
        held = [r, 2 * st.pp - 1 - r] if st.schedule == "dualpipev" else rank_chunks(st.pp, st.vpp, r)
        for c in held:
            layers = tuple(chunks[c])
            n_moe = sum(1 for i in layers if m.is_moe_layer(i))
            mine.append(ChunkWork(c, r, layers, len(layers) - n_moe, n_moe, c == 0, c == last))
        ranks.append(tuple(mine))
    return Workload(d, blocks, tuple(ranks))
