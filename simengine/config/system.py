"""SystemSpec: GPU, cluster and network tiers, plus the efficiency model of each.

Units: bandwidths in GB/s (10^9 B/s) per GPU and per direction; latencies in µs; memory in GiB
(2^30 B) as ``torch.cuda`` reports it; peak in dense TFLOP/s (10^12 FLOP/s, no sparsity).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .spec import Spec


class _Frozen(Spec):
    """Frozen, no unknown keys, no boolean numbers (spec.py)."""


class PeakTflops(_Frozen):
    bf16: float = Field(..., ge=0.001, le=1e6, description="Dense BF16 tensor-core peak, TFLOP/s.")
    fp8: float | None = Field(None, ge=0.001, le=1e6, description="Dense FP8 tensor-core peak, TFLOP/s (None = no FP8 support).")
    fp4: float | None = Field(None, ge=0.001, le=1e6, description="Dense FP4 (NVFP4) tensor-core peak, TFLOP/s (None = no FP4 support).")
    fp32: float = Field(..., ge=0.001, le=1e6, description="FP32 (non-tensor) peak, TFLOP/s.")

    def of(self, dtype: str) -> float | None:
        """The dense tensor peak a training precision's GEMMs run at (StrategySpec.dtype: bf16, fp8,
        nvfp4 → fp4), None when the GPU has none."""
        return {"bf16": self.bf16, "fp8": self.fp8, "nvfp4": self.fp4}.get(dtype)


class GPUSpec(_Frozen):
    name: str = Field(..., max_length=120, description="GPU model name.")
    memory_gib: float = Field(..., gt=0, le=1e5, description="HBM capacity, GiB (2^30 bytes).")
    peak_tflops: PeakTflops
    hbm_bandwidth_gbs: float = Field(..., ge=0.001, le=1e6, description="HBM bandwidth, GB/s.")
    tdp_w: float = Field(700.0, gt=0, le=1e5, description="Board power used for energy estimates, W.")
    price_per_hour: float = Field(2.0, ge=0, le=1e5, description="Price of one GPU-hour, USD.")
    sustained_clock_ratio: float = Field(1.0, ge=0.05, le=1.0, description=(
        "SM clock a training step sustains at the board power limit / the clock of a short isolated kernel "
        "benchmark (boost). Scales attention and grouped-GEMM efficiencies (measured per shape or scalar); dense "
        "GEMM efficiencies are used as measured (cost/compute.py). 1 = no derate; at least 0.05 (a GPU held "
        "below a twentieth of its boost clock is not training: measured ratios are 0.6–1)."))
    # the default: an 8-GPU HGX node whose GPUs each have their own PCIe Gen5 x16 path to the host
    # (DGX H100: each GPU behind its ConnectX-7's PCIe switch; 63 GB/s nominal per GPU, MLPerf
    # inference v4.1 DGX-H100 system description "GPU-PCIe: 504GB/s"), measured with every GPU
    # copying at once: nvbandwidth v0.2 host_to_all_memcpy_ce 55.1–55.3 and all_to_host_memcpy_ce
    # 44.4–45.1 GB/s per GPU on an 8× H800 HGX (driver 525.105.17; the H800 has the H100's PCIe)
    host_link_gbs: float = Field(50.0, ge=0.001, le=1e6, description=(
        "CPU–GPU bandwidth per direction while every GPU of the node copies at once, GB/s: what activation offload "
        "copies over (strategy.cpu_offload_layers). Default 50: a PCIe Gen5 x16 GPU of an 8-GPU HGX node, measured "
        "(nvbandwidth host_to_all / all_to_host: 55 and 45 per GPU); GB200 / GB300 trays measure 175 / 186 "
        "(NVLink-C2C, a Grace's LPDDR5X shared by its two GPUs); DGX A100 13 (two GPUs per PCIe Gen4 switch)."))
    host_link_shares_nic: bool = Field(True, description=(
        "The GPU's link to the host also carries its NIC's traffic (PCIe GPUs of an HGX/DGX node reach the host "
        "and their ConnectX NIC through one x16 link): offload copies share it with the scale-out collectives of "
        "the same phase (cost/offload.py shared_link). False on GB200/GB300, whose copies cross NVLink-C2C."))
    host_memory_gib: float = Field(200.0, ge=0, le=1e7, description=(
        "Host (CPU) memory one GPU's offloaded activations may take, GiB: the node's DRAM over its GPUs, less what "
        "the OS, the data loader and pinned buffers keep (default 200: a DGX H100's or DGX B200's 2 TB over 8 GPUs is "
        "238 GiB, 85 % of it, an assumption, left to activations; a GB200/GB300 Grace's 480 GB over 2 GPUs gives 190). "
        "An estimate that offloads more (strategy.cpu_offload_layers) does not fit."))
    non_torch_gib: float = Field(2.5, ge=0, le=1e4, description=(
        "Memory outside PyTorch's allocator: CUDA context, NCCL buffers, cuBLAS/cuDNN workspaces, GiB "
        "(SimuMax keeps a 6 GiB margin for the same; nvidia-smi minus torch reserved is typically 1.5–4 GiB)."))


class NetworkTier(_Frozen):
    bandwidth_gbs: float = Field(..., ge=0.001, le=1e6, description="Per-GPU unidirectional bandwidth, GB/s.")
    latency_us: float = Field(..., ge=0, le=1e6, description="Per-hop latency (alpha of one ring step), µs.")


class ScaleUp(NetworkTier):
    domain_size: int = Field(8, ge=1, le=1_000_000, description="GPUs in one scale-up (NVLink/xGMI) domain.")
    topology: Literal["switch", "mesh"] = Field("switch", description=(
        "switch: any group gets the full per-GPU bandwidth (NVSwitch); mesh: direct links to each peer "
        "(AMD Infinity Fabric), so a group of n GPUs uses n−1 of the domain_size−1 links."))


class GemmPoint(_Frozen):
    """One measured GEMM: achieved efficiency (achieved / peak) at shape m×n×k (batch b)."""

    m: int = Field(..., ge=1, le=2**31)
    n: int = Field(..., ge=1, le=2**31)
    k: int = Field(..., ge=1, le=2**31)
    b: int = Field(1, ge=1, le=2**20)
    dtype: Literal["bf16", "fp8", "nvfp4", "fp32"] = "bf16"
    layout: Literal["TN", "NN", "NT"] | None = Field(None, description="cuBLAS layout: TN = forward, NN = data-grad, NT = weight-grad (None = any).")
    efficiency: float = Field(..., ge=1e-4, le=1.0, description="Achieved / peak of that dtype (at most 1).")


class AttentionPoint(_Frozen):
    """One measured flash-attention shape; efficiency on the causal FLOPs simengine counts."""

    phase: Literal["fwd", "bwd"]
    batch: int = Field(1, ge=1, le=2**20)
    seq_len: int = Field(..., ge=1, le=2**27)
    heads: int = Field(..., ge=1, le=2**16, description="Query heads on the GPU.")
    kv_heads: int = Field(..., ge=1, le=2**16)
    d_qk: int = Field(128, ge=1, le=2**16)
    d_v: int = Field(128, ge=1, le=2**16)
    efficiency: float = Field(..., ge=1e-4, le=1.0, description="Achieved / peak (at most 1).")


class GroupedGemmPoint(_Frozen):
    """One measured grouped GEMM (MoE experts) keyed by its forward shape: ``groups`` experts,
    m tokens each, k input and n output features; ``layout`` says which pass was timed."""

    layout: Literal["TN", "NN", "NT"] = Field("TN", description="TN forward, NN data-grad, NT weight-grad.")
    groups: int = Field(..., ge=1, le=2**20)
    m: int = Field(..., ge=1, le=2**31)
    n: int = Field(..., ge=1, le=2**31)
    k: int = Field(..., ge=1, le=2**31)
    efficiency: float = Field(..., ge=1e-4, le=1.0, description="Achieved / peak (at most 1).")


class CollectivePoint(_Frozen):
    """A fitted alpha-beta for one collective on one tier (from nccl-tests output)."""

    kind: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]
    tier: Literal["scale_up", "scale_out"]
    efficiency: float = Field(..., ge=1e-4, le=2.0, description="Achieved bus bandwidth / tier bandwidth.")
    latency_us: float = Field(..., ge=0, le=1e6, description="Fixed latency per call, µs.")
    step_latency_us: float = Field(0.0, ge=0, le=1e5, description="Latency per ring step (×2(n−1) for all-reduce, ×(n−1) otherwise), µs.")
    group_size: int | None = Field(None, ge=2, le=1_000_000, description="Ranks the fit was measured on (None = any); the closest size is used.")


class Efficiency(_Frozen):
    """How close to peak each kind of work runs. Defaults are typical for Hopper/Blackwell GPUs
    with cuBLAS/TransformerEngine; a measured table (``gemm_table``) overrides the GEMM curve."""

    gemm: float = Field(0.70, ge=1e-4, le=1.0, description="Large-GEMM efficiency (achieved / peak) of the default curve.")
    gemm_half_dim: float = Field(96.0, ge=0, le=1e5, description="Default curve: each GEMM dimension d scales efficiency by d/(d+half_dim).")
    attention_fwd: float = Field(0.55, ge=1e-4, le=1.0, description="Flash-attention forward efficiency on the causal FLOPs actually computed.")
    attention_bwd: float = Field(0.45, ge=1e-4, le=1.0, description="Flash-attention backward efficiency on the causal FLOPs actually computed.")
    # TransformerEngine's GroupedLinear (Megatron-Core's TEGroupedMLP) runs one cuBLAS GEMM per expert
    # round-robin over its compute streams on every architecture (TE common/gemm/cublaslt_gemm.cu
    # multi_stream_cublas_gemm, via cpp_extensions/gemm.py general_grouped_gemm), so the grouped/plain
    # ratio measured on B200 (op_default 0.302 / 0.488, ../shared/validation/b200_op_efficiency.csv)
    # carries to the default GEMM level: 0.70 × 0.619 = 0.43
    grouped_gemm: float = Field(0.43, ge=1e-4, le=1.0, description=(
        "Grouped (MoE expert) GEMM efficiency relative to peak (default: the default GEMM level × the "
        "grouped/plain ratio measured on B200, 0.70 × 0.302/0.488)."))
    hbm: float = Field(0.70, ge=1e-4, le=1.0, description="Achieved / peak HBM bandwidth of memory-bound kernels.")
    kernel_overhead_us: float = Field(6.0, ge=0, le=1e4, description="Fixed per-kernel launch + tail cost, µs.")
    collective_scale_up: float = Field(0.75, ge=1e-4, le=1.0, description="Achieved bus bandwidth / scale-up bandwidth for large collectives.")
    collective_scale_out: float = Field(0.80, ge=1e-4, le=1.0, description="Achieved bus bandwidth / scale-out bandwidth for large collectives.")
    collective_overhead_us: float = Field(20.0, ge=0, le=1e5, description="Fixed per-collective launch/synchronisation cost, µs.")
    attention_half_blocks_fwd: float = Field(512.0, ge=0, le=1e7, description="Default curve: flash-attention forward reaches half its efficiency at this many thread blocks (b·heads·s/128); ~4 per SM keeps the GPU busy (B200 microbenchmarks, shared/validation/b200_op_efficiency.csv).")
    attention_half_blocks_bwd: float = Field(128.0, ge=0, le=1e7, description="Same for the backward, which does more work per block and saturates earlier.")
    async_overlap: float = Field(0.0, ge=0.0, le=1.0, description=(
        "Fraction of an asynchronously launched collective that really runs beside the GEMM next to it "
        "(TE/Megatron backward all-gather / reduce-scatter). 0 when persistent GEMM kernels hold every SM, "
        "as cuBLAS/CUTLASS do on Hopper and Blackwell; TE userbuffers (tp_comm_overlap) reserve SMs and overlap regardless."))
    fp8_gemm: float = Field(0.55, ge=1e-4, le=1.0, description="FP8 GEMM efficiency relative to the FP8 peak.")
    fp4_gemm: float | None = Field(None, ge=1e-4, le=1.0, description=(
        "NVFP4 GEMM efficiency relative to the FP4 peak. None = fp8_gemm × min(1, 1.90 × FP8 peak / FP4 peak): "
        "TransformerEngine's GEMM profiling on a B300 measured pre-quantized NVFP4 GEMMs 1.90× as fast as "
        "MXFP8 ones (cost/compute.py ``FP4_OVER_FP8``)."))
    gemm_table: tuple[GemmPoint, ...] = Field((), description="Measured GEMM efficiencies; interpolated in log-shape space when present.")
    attention_table: tuple[AttentionPoint, ...] = Field((), description="Measured flash-attention efficiencies per shape; nearest shape wins when present.")
    grouped_gemm_table: tuple[GroupedGemmPoint, ...] = Field((), description="Measured grouped-GEMM efficiencies per shape; nearest shape wins when present.")
    collective_table: tuple[CollectivePoint, ...] = Field((), description="Measured collective fits (from nccl-tests); override the tier defaults.")
    source: str = Field("", max_length=2000, description="Where these efficiencies come from.")


MAX_NUM_GPUS = 10_000_000   # a job's GPU count (SystemSpec.num_gpus; the search's GPU counts too)


class SystemSpec(_Frozen):
    name: str = Field("custom", max_length=120, description="Display name of the system.")
    source: str = Field("", max_length=2000, description="Where the figures come from (datasheet).")
    gpu: GPUSpec
    num_gpus: int = Field(..., ge=1, le=MAX_NUM_GPUS, description="GPUs in the job.")
    gpus_per_node: int = Field(8, ge=1, le=1_000_000, description="GPUs per server (each with its own NIC share).")
    scale_up: ScaleUp
    scale_out: NetworkTier
    efficiency: Efficiency = Field(default_factory=Efficiency)

    @model_validator(mode="after")
    def _check(self) -> "SystemSpec":
        if self.scale_up.domain_size < self.gpus_per_node and self.gpus_per_node % self.scale_up.domain_size:
            raise ValueError(f"scale_up.domain_size={self.scale_up.domain_size} must divide gpus_per_node={self.gpus_per_node}")
        return self

    @property
    def domain(self) -> int:
        """GPUs reachable over the scale-up tier (at least one node)."""
        return max(self.scale_up.domain_size, 1)
