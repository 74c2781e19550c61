"""The GPU fit rule, one owner for the estimate, the search's memory checks and the studio.

PyTorch's caching allocator reserves more than the live tensors it hands out: fragmentation of
its pool (``StrategySpec.allocator_overhead``, reserved/allocated − 1) and the cached blocks of
other CUDA streams, which it hands only to the stream that allocated them (CUDACachingAllocator.cpp
``get_free_block`` searches the requesting stream's pool; ``StaticMemory.pools``: FSDP2's
all-gather buffers). A stage fits when reserved + the memory outside PyTorch
(``GPUSpec.non_torch_gib``) ≤ the GPU's capacity. Linear in its inputs: bytes or GiB alike."""

from __future__ import annotations


def reserved(allocated: float, allocator_overhead: float, pools: float = 0.0) -> float:
    """Reserved memory of a stage whose allocated peak is ``allocated``."""
    return allocated * (1.0 + allocator_overhead) + pools


def allocated_limit(capacity: float, non_torch: float, allocator_overhead: float, pools: float = 0.0) -> float:
    """The most a stage may allocate and still fit (``reserved`` solved for the allocated peak)."""
    return max(capacity - non_torch - pools, 0.0) / (1.0 + allocator_overhead)
