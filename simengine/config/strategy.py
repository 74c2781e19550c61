"""StrategySpec: parallel layout, batch, precision, memory and overlap knobs.

Rank order is Megatron-Core's: TP innermost, then CP, then DP (EP folds into DP×CP for experts),
PP outermost (megatron/core/parallel_state.py, ``RankGenerator(order="tp-cp-ep-dp-pp")``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ScheduleName = Literal["gpipe", "1f1b", "interleaved", "zb-h1", "dualpipev"]


class StrategySpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    name: str = Field("custom", max_length=120, description="Display name of the strategy.")
    tp: int = Field(1, ge=1, le=1024, description="Tensor-parallel size.")
    pp: int = Field(1, ge=1, le=1024, description="Pipeline-parallel stages.")
    dp: int | None = Field(None, ge=1, le=10_000_000, description="Data-parallel size; None = num_gpus / (tp·pp·cp).")
    cp: int = Field(1, ge=1, le=1024, description="Context-parallel size (sequence split for attention).")
    ep: int = Field(1, ge=1, le=65_536, description="Expert-parallel size (MoE), carved out of DP×CP.")
    etp: int | None = Field(None, ge=1, le=1024, description="Expert tensor-parallel size; None = tp (Megatron-LM arguments.py: expert_tensor_parallel_size defaults to tensor_model_parallel_size).")
    vpp: int = Field(1, ge=1, le=128, description="Virtual pipeline chunks per rank (interleaved schedule).")
    sequence_parallel: bool = Field(True, description="Megatron sequence parallelism (norms/dropout sharded over TP; AG/RS instead of AR).")
    micro_batch_size: int = Field(1, ge=1, le=65_536, description="Sequences per micro-batch.")
    global_batch_size: int = Field(..., ge=1, le=100_000_000, description="Sequences per optimizer step.")
    seq_len: int = Field(..., ge=1, le=16_777_216, description="Tokens per sequence.")
    dtype: Literal["bf16", "fp8"] = Field("bf16", description="GEMM precision (fp8: TransformerEngine delayed/current scaling; master weights stay fp32).")
    zero_stage: int = Field(1, ge=0, le=3, description="0 = DDP; 1 = optimizer states sharded (Megatron distributed optimizer); 2 = + gradients; 3 = + weights (FSDP).")
    recompute: Literal["none", "selective", "full"] = Field("none", description="Activation recomputation: selective = attention core only (Korthikanti et al. 2022); full = whole block.")
    recompute_num_layers: int | None = Field(None, ge=0, le=1024, description="With full recompute: layers per stage that are recomputed (None = all).")
    schedule: ScheduleName = Field("1f1b", description="Pipeline schedule.")
    overlap_grad_reduce: bool = Field(False, description="Overlap the DP gradient reduce-scatter / all-reduce with backward (bucketed).")
    overlap_param_gather: bool = Field(False, description="Overlap the parameter all-gather (ZeRO-1/3) with forward.")
    tp_comm_overlap: bool = Field(False, description="Overlap TP collectives with GEMMs (TransformerEngine userbuffers).")
    overlap_slowdown: float = Field(1.05, ge=1.0, le=3.0, description="Compute slowdown while communication overlaps it (SM and HBM contention).")
    moe_dispatcher: Literal["alltoall", "allgather", "deepep"] = Field("alltoall", description="MoE token dispatcher: Megatron alltoall (one copy per routed expert), allgather, or deepep (Megatron flex + DeepEP: one copy per destination node over the scale-out network, then fanned out over NVLink).")
    moe_dispatch_dtype: Literal["bf16", "fp8"] = Field("bf16", description="Precision of the forward token dispatch (DeepEP FP8 dispatch / Megatron moe_dispatch_fwd_dtype=mxfp8: 1 B per element plus a scale per 32); combine and backward stay bf16.")
    moe_load_imbalance: float = Field(1.0, ge=1.0, le=64.0, description="Tokens on the hottest expert rank / mean; the step follows the slowest rank.")
    cp_comm_type: Literal["a2a", "p2p", "allgather"] = Field("p2p", description="Context-parallel attention: Ulysses all-to-all, ring p2p, or KV all-gather.")
    attention_impl: Literal["flash", "unfused"] = Field("flash", description="Flash attention (no s² activations) or unfused softmax attention (stores the s² scores, Korthikanti et al. 2022).")
    p2p_scatter_gather: bool = Field(False, description="Without SP, each TP rank sends 1/tp of the pipeline activation and the receiver all-gathers it (Megatron-LM ≤ 2022, Narayanan et al. 2021 §4.1); Megatron-Core sends the full tensor.")
    fused_cross_entropy: bool = Field(True, description="Fused vocab-parallel cross-entropy (no fp32 copy of the logits).")
    gradient_accumulation_fusion: bool = Field(True, description="wgrad GEMMs accumulate straight into fp32 main grads (Megatron).")
    fp32_main_grads: bool = Field(True, description="Gradients kept and reduced in fp32 (4 B/param); False = bf16.")
    allocator_overhead: float = Field(0.05, ge=0.0, le=1.0, description="Reserved/allocated − 1 of PyTorch's caching allocator (fragmentation).")
    straggler_factor: float = Field(1.0, ge=1.0, le=3.0, description="Multiplier on the pipeline time for node-to-node variation.")

    @model_validator(mode="after")
    def _check(self) -> "StrategySpec":
        if self.vpp > 1 and self.schedule not in ("interleaved",):
            raise ValueError(f"vpp={self.vpp} needs schedule='interleaved' (schedule='{self.schedule}')")
        if self.schedule == "interleaved" and self.pp == 1:
            raise ValueError("schedule='interleaved' needs pp > 1")
        if self.global_batch_size % self.micro_batch_size:
            raise ValueError(f"micro_batch_size={self.micro_batch_size} does not divide global_batch_size={self.global_batch_size}")
        if self.recompute_num_layers is not None and self.recompute != "full":
            raise ValueError("recompute_num_layers needs recompute='full'")
        return self

    @property
    def etp_size(self) -> int:
        return self.etp if self.etp is not None else self.tp
