"""How the layers are split over pipeline stages and virtual chunks."""

from __future__ import annotations


def layers_per_chunk(num_layers: int, pp: int, vpp: int) -> list[list[int]]:
    """Layer indices of each model chunk, ordered by global chunk index c = v·pp + rank
    (Megatron interleaving: rank r holds chunks r, r+pp, …).

    When the layers do not divide evenly, the first and last chunks get fewer layers, as Llama 3
    405B's pipeline does (Dubey et al. 2024, §3.3.2: "we reduce one Transformer layer each from
    the first and the last stages") since they also carry the embedding and the LM head; the
    remaining extra layers go to the middle chunks.
    """
    chunks = pp * vpp
    base, extra = divmod(num_layers, chunks)
    sizes = [base] * chunks
    # hand out the remainder to middle chunks first (1 .. chunks-2), then to the ends
    order = list(range(1, chunks - 1)) + [0, chunks - 1] if chunks > 2 else list(range(chunks))
    for i in range(extra):
        sizes[order[i % len(order)]] += 1
    out, start = [], 0
    for n in sizes:
        out.append(list(range(start, start + n)))
        start += n
    return out


def rank_chunks(pp: int, vpp: int, rank: int) -> list[int]:
    """Global chunk indices held by ``rank`` (Megatron: rank + v·pp for v in 0..vpp-1)."""
    return [v * pp + rank for v in range(vpp)]
