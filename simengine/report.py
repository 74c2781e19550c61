"""Report: what ``estimate`` returns. JSON-serialisable (pydantic); the CLI's --json contract.

Times in seconds (``_s``), memory in GiB (2^30 B), energy in J, money in USD.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StageMemory(BaseModel):
    model_config = ConfigDict(frozen=True)

    stage: int = Field(..., description="Pipeline stage (rank in the PP group), 0 = first.")
    peak_gib: float = Field(..., description="Predicted torch.cuda.max_memory_allocated().")
    reserved_gib: float = Field(..., description="Predicted reserved memory of the caching allocator: peak_gib × (1 + strategy.allocator_overhead) + pools_gib (simengine/fit.py).")
    pools_gib: float = Field(0.0, description="Reserved in other CUDA streams' caches beside the peak (FSDP2's all-gather buffers): in reserved_gib, not in peak_gib.")
    allocated_limit_gib: float = Field(..., description="The most this stage may allocate and still fit: (system.gpu.memory_gib − system.gpu.non_torch_gib − pools_gib) / (1 + strategy.allocator_overhead).")
    weights_gib: float
    grads_gib: float
    optimizer_gib: float
    activations_gib: float = Field(..., description="Activations held for backward at the peak (all in-flight micro-batches).")
    other_gib: float = Field(..., description="Transient buffers at the peak (logits, collective buffers, workspaces) and framework buffers.")
    inflight_microbatches: int = Field(..., description="Forward passes whose activations are held at the peak: micro-batches × the model chunks each has gone through (= micro-batches with one chunk per rank).")
    host_offload_gib: float = Field(0.0, description="Activations offloaded to host memory at the peak (strategy.cpu_offload_layers), per GPU.")
    free_gib: float = Field(..., description="GPU memory left free on this stage: system.gpu.memory_gib - reserved - system.gpu.non_torch_gib (negative: over capacity).")
    fits: bool = Field(..., description="reserved + system.gpu.non_torch_gib <= system.gpu.memory_gib, and host_offload_gib <= system.gpu.host_memory_gib")


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)

    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float = Field(..., description="Model FLOPs (6·N_active + full s² attention, PaLM App. B) / (step time · bf16 peak · GPUs). "
                                         "A convention figure: at long causal context it counts attention work flash attention skips and can exceed 1; mfu_causal cannot.")
    hfu: float = Field(..., description="Hardware FLOPs (model FLOPs + recompute, Korthikanti et al. 2022 §6) / (step time · bf16 peak · GPUs). "
                                         "Same attention convention as mfu, so it can exceed 1 at long causal context.")
    mfu_causal: float = Field(..., description="MFU with the causal-masked attention FLOPs halved (current Megatron-LM convention).")
    peak_memory_gib: float = Field(..., description="Largest allocated peak over pipeline stages.")
    reserved_memory_gib: float
    memory_capacity_gib: float
    free_memory_gib: float = Field(..., description="GPU memory left free on the fullest stage (the least StageMemory.free_gib); negative: over capacity.")
    fits: bool = Field(..., description="Every stage fits: reserved + system.gpu.non_torch_gib <= system.gpu.memory_gib, "
                                         "and the activations offloaded to host memory fit in system.gpu.host_memory_gib")
    memory_by_stage: list[StageMemory]
    breakdown_s: dict[str, float] = Field(..., description=(
        "Where the step time goes on the critical rank; sums to step_time_s. Keys: forward_compute, backward_compute, "
        "recompute, tp_comm, cp_comm, ep_comm, dp_comm, pp_comm (exposed communication by kind), offload_comm (CPU activation "
        "offload copies the compute waits for), optimizer, bubble."))
    num_parameters: int
    num_active_parameters: int = Field(..., description="Parameters touched per token (MoE: top-k routed + shared experts).")
    num_trainable_parameters: int = Field(..., description="Parameters the optimizer updates: all of them, or the LoRA adapters (strategy.peft).")
    model_flops_per_token: float = Field(..., description="Model FLOPs per token (6·N_active + attention), the MFU numerator per token.")
    model_flops_per_step: float
    hardware_flops_per_step: float
    cost_per_step_usd: float
    cost_per_million_tokens_usd: float
    energy_per_step_j: float
    num_microbatches: int
    dp: int
    num_gpus: int
    tokens_per_step: int
    bubble_fraction: float = Field(..., description="Bubble / step time on the critical rank (sim/metrics.py: step − compute − exposed communication).")
    bubble_fraction_max: float = Field(0.0, description="The largest bubble / step time over the pipeline ranks: the critical rank "
                                                        "waits the least, and a rank beside a heavier stage (the LM head) waits more.")
    critical_rank: int = Field(0, description="Pipeline rank the breakdown describes: the one with the least bubble (the most work).")
    hidden_comm_s: dict[str, float] = Field(default_factory=dict, description="Communication hidden under compute on the critical rank, by kind.")
    gpu_us_per_launch: float = Field(0.0, description=(
        "GPU compute time per kernel launch on the critical rank (one micro-batch's compute seconds / the kernels it "
        "launches, cost/launch.py). Below ~50 µs eager training risks waiting on the host, which the estimate does not "
        "model: warnings says so."))
    uncertainty: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="(low, high) of step_time_s, tokens_per_s, mfu and peak_memory_gib from the relative "
                    "uncertainty of each cost component (uncertainty.py).")
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="How a number is counted where it could mislead (not a problem: "
                                                              "an FP8 / NVFP4 MFU past 100 % of the BF16 peak).")


def to_train(tokens: float, tokens_per_s: float, cost_per_million_tokens_usd: float) -> tuple[float, float]:
    """(seconds, USD) to train ``tokens`` at a throughput and a price per million tokens: the one
    place the estimate's and the search's "time and cost to train the token budget" come from."""
    return (tokens / tokens_per_s if tokens_per_s > 0 else float("inf")), tokens / 1e6 * cost_per_million_tokens_usd
