"""Launch-bound risk: how much GPU work each kernel launch carries on the critical stage.

The estimate prices the GPU's work and assumes the host always keeps the GPU's queue full. Eager
PyTorch training issues every kernel from one Python thread per rank (framework, dispatcher and
``cudaLaunchKernel`` time on the CPU). When the kernels are short the host falls behind and the
GPU idles between them — a cost this estimate does not model, because the host time per launch
depends on the CPU, the framework version and the Python around each module, none of which is an
input here, and no public source gives it per kernel.

What the estimate does know is the GPU side: the compute seconds of one micro-batch through a
stage and the kernels it launches (``ComputeModel.launches``: one cuBLAS GEMM per local expert in
a grouped GEMM, the memory-bound steps' own kernel counts). Their ratio is the mean GPU time per
launch. NVIDIA names "many small kernel launches (<50 us each)" as the symptom of launch-bound
PyTorch training that CUDA graphs address (NVIDIA/TensorRT-LLM, skill ``perf-torch-cuda-graphs``,
"When to Use"), and Megatron-LM's MoE guide lists the same "CPU Overhead Bottleneck" for
fine-grained MoE ("gaps between GPU kernels where CPU cannot launch kernels fast enough";
megatron/core/transformer/moe/README.md; its fixes: CUDA graphs over attention and the router,
manual GC, a larger micro-batch). Dropless MoE adds one blocking host wait per MoE layer: the
token counts are copied to the CPU before the all-to-all (Megatron-Core
``MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize``; DeepEP and HybridEP read
``tokens_per_expert.sum()`` on the host as well), so the host cannot run ahead past a MoE layer.

So below ``LAUNCH_BOUND_US`` the Report warns that measured throughput may be lower than
predicted; the number itself is unchanged. Against the published runs (README "Accuracy") it flags
the eight Megatron-Bridge Qwen3-30B-A3B micro-batch-1 runs (30–41 µs): the seven that ran without
CUDA graphs over their MoE layers are over-predicted by 28–131 %, the one that graphed whole layers
with token drop (25.09, B200) is under-predicted by 20 %. It does not catch GPT-OSS-120B and
Nemotron 3 Nano on H100 (70–74 µs, over-predicted by 33–50 %); no other run is flagged.
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
    kernels = 0
    seconds = 0.0
    for c in stage.chunks:
        for ph in (c.fwd, c.bwd, c.wgt, c.recompute):
            kernels += ph.kernels
            seconds += ph.compute_s
    return (seconds / kernels * 1e6 if kernels else 0.0), kernels


def launch_warning(us: float, kernels: int, stage: int, moe: bool) -> str | None:
    """The Report's warning when ``us`` (``gpu_us_per_launch``) is below ``LAUNCH_BOUND_US``."""
    if kernels == 0 or us >= LAUNCH_BOUND_US:
        return None
    sync = " and each dropless MoE layer waits once for the host (token counts copied to the CPU)" if moe else ""
    return (f"launch-bound risk on stage {stage}: about {us:.0f} µs of GPU work per kernel launch "
            f"({kernels} kernels per micro-batch); below ~{LAUNCH_BOUND_US:.0f} µs eager training usually "
            f"waits on the host to launch kernels{sync}, which this estimate does not model, so measured "
            f"throughput can be lower. CUDA graphs or a larger micro-batch raise the work per launch.")
