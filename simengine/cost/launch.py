"""Small kernels: how much GPU work each kernel launch carries on the critical stage.

The estimate prices the GPU's work and assumes the host always keeps the GPU's queue full. Eager
PyTorch training issues every kernel from one Python thread per rank (framework, dispatcher and
``cudaLaunchKernel`` time on the CPU), and dropless MoE copies its token counts to the host once
per MoE layer before the all-to-all (Megatron-Core ``MoEAlltoAllTokenDispatcher.
_maybe_dtoh_and_synchronize``; DeepEP and HybridEP read ``tokens_per_expert.sum()`` on the host),
so with short kernels the GPU can wait. That cost is not priced: the host time per launch depends
on the CPU, the framework version and the Python around each module, and at the published per-op
sizes it does not explain the rows it would have to (README "What is still wrong" under the MoE
table: ~10 µs per eager op, TransformerEngine #2897's per-expert costs, and NVIDIA's
eager-vs-CUDA-graph test of Qwen3-30B-A3B on H100 came out neutral).

What the estimate does know is the GPU side: the compute seconds of one micro-batch through a
stage (each kernel's fixed cost, ``Efficiency.kernel_overhead_us``, included: it is GPU time) and
the kernels it launches (``ComputeModel.launches``: one cuBLAS GEMM per local expert in
a grouped GEMM, the memory-bound steps' own kernel counts). Their ratio is the mean GPU time per
launch. NVIDIA names "many small kernel launches (<50 us each)" as the symptom of launch-bound
PyTorch training that CUDA graphs address (NVIDIA/TensorRT-LLM, skill ``perf-torch-cuda-graphs``,
"When to Use"); Megatron-LM's MoE guide lists the "CPU Overhead Bottleneck" of fine-grained MoE
(megatron/core/transformer/moe/README.md: CUDA graphs over attention and the router, manual GC, a
larger micro-batch). Below ``LAUNCH_BOUND_US`` the Report warns that measured throughput may be
lower than predicted; the number itself is unchanged. Against the published runs (README
"Accuracy") it flags the eight Megatron-Bridge Qwen3-30B-A3B micro-batch-1 runs (30–40 µs): the
seven that ran without CUDA graphs over their MoE layers are over-predicted by 26–128 %, the one
that graphed whole layers with token drop (25.09, B200) is under-predicted by 22 %. NVIDIA's
eager-vs-graph layout (bf16, alltoall, 50.6 µs) is not flagged and is predicted within 0.5 %. It
does not catch GPT-OSS-120B on H100 (50 µs with its eager expert elementwise passes priced,
over-predicted by 9–13 %) and Nemotron 3 Nano on H100 (70–74 µs, +2–6 %) or
Qwen3-30B-A3B's 25.11 H100 run at micro-batch 2 (57 µs, +175 %); no other run is flagged.
"""

from __future__ import annotations

from .stage import StagePlan

# NVIDIA/TensorRT-LLM skill perf-torch-cuda-graphs, "When to Use": "many small kernel launches
# (<50 us each)" — the launch-bound symptom CUDA graphs remove
LAUNCH_BOUND_US = 50.0


def gpu_us_per_launch(stage: StagePlan) -> tuple[float, int]:
    """(mean GPU compute µs per kernel launched, kernels launched) for one micro-batch through
    every chunk of ``stage``: forward, backward, weight gradients and recompute. (0, 0) when the
    stage launches nothing."""
    kernels = 0.0
    seconds = 0.0
    for c in stage.chunks:
        for ph in (c.fwd, c.bwd, c.wgt, c.recompute):
            kernels += ph.kernels
            seconds += ph.compute_s
    return (seconds / kernels * 1e6 if kernels else 0.0), round(kernels)


def launch_warning(us: float, kernels: int, stage: int, moe: bool) -> str | None:
    """The Report's warning when ``us`` (``gpu_us_per_launch``) is below ``LAUNCH_BOUND_US``;
    ``moe``: dropless MoE layers (no capacity factor), which wait for their token counts."""
    if kernels == 0 or us >= LAUNCH_BOUND_US:
        return None
    sync = " and each dropless MoE layer's wait for its token counts" if moe else ""
    return (f"small kernels on stage {stage}: about {us:.0f} µs of GPU work per kernel launch "
            f"({kernels} kernels per micro-batch). Below ~{LAUNCH_BOUND_US:.0f} µs (NVIDIA's launch-bound "
            f"symptom) the host's launches{sync} can hold the GPU back, which this estimate does not model; "
            f"measured runs in this regime without CUDA graphs over their layers have been slower than predicted "
            f"(Megatron-Bridge Qwen3-30B-A3B at micro-batch 1: 26–128 %). CUDA graphs or a larger micro-batch "
            f"raise the work per launch.")
