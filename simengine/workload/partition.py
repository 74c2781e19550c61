"""Which layers each virtual pipeline stage holds: contiguous indices in stage order (Megatron-Core
``get_transformer_layer_offset``). How many per stage is ``simengine.config.layout`` (the even
split, Megatron's decoder_first/last_pipeline_num_layers, an explicit pipeline_layers); which rank
holds which stage is the schedule's ``stage_of``."""

from __future__ import annotations

from typing import Sequence

from ..config.layout import even_split


def layers_per_chunk(num_layers: int, pp: int, vpp: int) -> list[list[int]]:
    """Layer indices of each virtual stage of the even split, ordered by stage index v·pp + rank."""
    return layer_ranges(even_split(num_layers, pp * vpp))


def layer_ranges(counts: Sequence[int]) -> list[list[int]]:
    """Contiguous layer indices per stage from the layer count of each stage."""
    out, start = [], 0
    for n in counts:
        out.append(list(range(start, start + n)))
        start += n
    return out


def rank_chunks(pp: int, vpp: int, rank: int) -> list[int]:
    """Global chunk indices held by ``rank`` under interleaving (Megatron: rank + v·pp)."""
    return [v * pp + rank for v in range(vpp)]
