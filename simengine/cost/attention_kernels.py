"""Attention kernel families and how fast each runs on each GPU generation.

The system's attention efficiencies (``Efficiency.attention_fwd/bwd``, the block-count curve, a
measured ``attention_table``) describe the fastest fused kernel of that GPU — what
TransformerEngine launches (cuDNN fused attention on Hopper/Blackwell, flash-attention-2 on
Ampere; the B200 table was measured that way). Another kernel family scales that curve by its
throughput relative to the reference on the same generation:

- flash-attention-2 (Dao 2023) is written for Ampere's ``mma.sync``; it cannot use Hopper's
  ``wgmma``/TMA, and reaches only ~35 % of the H100 peak where FlashAttention-3 reaches 75 %;
  FlashAttention-3 is 1.5–2.0× faster than FlashAttention-2 on H100 (Shah et al. 2024,
  "FlashAttention-3", arXiv:2407.08608, abstract and §4.1). We take the midpoint: FA2 runs at
  1/1.75 of the reference on Hopper and Blackwell (sm90+; FA2 has no Blackwell path either).
- PyTorch SDPA (``F.scaled_dot_product_attention``) is treated as its FLASH_ATTENTION backend,
  i.e. flash-attention-2 kernels vendored in ATen; set ``attention_kernel='cudnn'`` if your
  PyTorch build dispatches SDPA to cuDNN.
- flash-attention-3 is Hopper-only (sm90); elsewhere it is not available and is priced as FA2.
- On Ampere, Ada and Volta flash-attention-2 (or the memory-efficient SDPA kernel) is the
  reference itself (scale 1); on AMD CDNA every family maps onto the Composable Kernel flash
  attention the ROCm stacks use (scale 1).
"""

from __future__ import annotations

from functools import lru_cache

from ..config.generation import gpu_generation

FA2_ON_HOPPER = 1.0 / 1.75  # Shah et al. 2024 abstract: FA3 is 1.5–2.0× FA2 on H100 (midpoint)


@lru_cache(maxsize=64)
def kernel_scale(kernel: str, gpu_name: str) -> float:
    """Throughput of attention kernel family ``kernel`` relative to the system's reference
    attention kernel on the GPU called ``gpu_name`` (multiplies the attention efficiency)."""
    gen = gpu_generation(gpu_name)
    if gen not in ("hopper", "blackwell"):
        return 1.0
    if kernel == "cudnn" or (kernel == "flash3" and gen == "hopper"):
        return 1.0
    return FA2_ON_HOPPER  # flash2, sdpa, and flash3 where it does not run
