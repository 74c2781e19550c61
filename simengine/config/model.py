"""ModelSpec: the architecture of a decoder-only transformer (dense, GQA, MLA, MoE).

Canonical field names follow ../shared/DESIGN.md; users' JSON files and share links depend on
them. Every field is described with its unit; the JSON schema (``ModelSpec.model_json_schema()``)
is what the studio's editors render.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field, model_validator

from .spec import Spec


class MlaDims(NamedTuple):
    """The MLA dimensions of a model with attention='mla' (DeepSeek-V2, arXiv:2405.04434 §2.1)."""

    q_lora_rank: int        # d_c'; 0 = no query compression (DeepSeek-V2-Lite)
    kv_lora_rank: int       # d_c
    qk_nope_head_dim: int   # d_h
    qk_rope_head_dim: int   # d_h^R
    v_head_dim: int


class _Frozen(Spec):
    """Frozen, no unknown keys, no boolean numbers (spec.py)."""


class ModelSpec(_Frozen):
    name: str = Field("custom", max_length=120, description="Display name of the model.")
    source: str = Field("", max_length=2000, description="Where the architecture figures come from (paper, config.json).")
    hidden_size: int = Field(..., ge=8, le=262_144, description="Model width h (elements).")
    num_layers: int = Field(..., ge=1, le=1024, description="Number of transformer blocks L.")
    num_attention_heads: int = Field(..., ge=1, le=4096, description="Query heads a.")
    num_kv_heads: int | None = Field(None, ge=1, le=4096, description="Key/value heads (GQA); None = num_attention_heads (MHA).")
    head_dim: int | None = Field(None, ge=1, le=4096, description="Per-head dimension; None = hidden_size / num_attention_heads.")
    ffn_hidden_size: int = Field(..., ge=1, le=1_048_576, description="Dense MLP intermediate size f (per gate for SwiGLU).")
    vocab_size: int = Field(..., ge=2, le=4_194_304, description="Tokenizer vocabulary V before padding (Megatron pads to a multiple of 128·tp).")
    activation: Literal["swiglu", "gelu", "relu", "squared_relu"] = Field(
        "swiglu", description="MLP activation; SwiGLU has two input projections (gate and up); squared_relu = relu(x)² "
        "(Nemotron-3/4, Primer), two unfused pointwise kernels in Megatron-Core.")
    norm: Literal["rmsnorm", "layernorm"] = Field("rmsnorm", description="Normalisation layer kind.")
    tie_embeddings: bool = Field(False, description="Share input embedding and output (LM head) weights.")
    attention: Literal["mha", "gqa", "mla"] = Field("gqa", description="Attention kind: multi-head, grouped-query or multi-head latent (DeepSeek).")
    linear_bias: bool = Field(False, description="Linear layers carry a bias (GPT-2/3 style).")
    position_embedding: Literal["rope", "learned"] = Field("rope", description="Rotary or learned absolute position embedding (learned adds seq_len·h parameters).")
    hidden_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout after attention and MLP (GPT-3/Megatron 0.1; Llama 0). Adds a 1-byte mask per element to activations.")
    attention_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on attention probabilities (only stored with unfused attention).")
    max_position_embeddings: int = Field(4096, ge=1, le=16_777_216, description="Positions of a learned position embedding (only used when learned).")
    # --- MLA (DeepSeek-V2, arXiv:2405.04434 §2.1) -------------------------------------------
    q_lora_rank: int | None = Field(None, ge=1, le=65_536, description="MLA query compression rank d_c' (None = no query compression, as in DeepSeek-V2-Lite).")
    kv_lora_rank: int | None = Field(None, ge=1, le=65_536, description="MLA key/value compression rank d_c.")
    qk_nope_head_dim: int | None = Field(None, ge=1, le=4096, description="MLA per-head q/k dimension without rotary part.")
    qk_rope_head_dim: int | None = Field(None, ge=0, le=4096, description="MLA per-head decoupled rotary dimension d_h^R.")
    v_head_dim: int | None = Field(None, ge=1, le=4096, description="MLA per-head value dimension.")
    # --- MoE --------------------------------------------------------------------------------
    num_experts: int = Field(0, ge=0, le=65_536, description="Routed experts per MoE layer; 0 = dense model.")
    top_k: int = Field(0, ge=0, le=1024, description="Routed experts per token.")
    moe_ffn_hidden_size: int | None = Field(None, ge=1, le=1_048_576, description="Intermediate size of one routed expert.")
    num_shared_experts: int = Field(0, ge=0, le=64, description="Always-active shared experts per MoE layer (each moe_ffn_hidden_size wide unless shared_expert_ffn_hidden_size).")
    shared_expert_ffn_hidden_size: int | None = Field(None, ge=1, le=1_048_576, description="Total intermediate size of the shared experts (overrides num_shared_experts·moe_ffn_hidden_size).")
    first_k_dense_layers: int = Field(0, ge=0, le=1024, description="Leading layers that use a dense MLP instead of MoE.")
    moe_layer_freq: int = Field(1, ge=1, le=1024, description="Every n-th layer (after the dense ones) is MoE; others dense.")
    router: Literal["softmax", "sigmoid"] = Field("softmax", description="Router scoring function.")
    capacity_factor: float | None = Field(None, gt=0, le=64, description="Expert capacity factor; with padding every expert processes ceil(tokens·top_k/E·cf) tokens. None = dropless.")
    pad_to_capacity: bool = Field(True, description="With capacity_factor: pad every expert's input to its capacity (Megatron --moe-pad-expert-input-to-capacity); False = drop the tokens above capacity and send the rest unpadded.")
    mtp_layers: int = Field(0, ge=0, le=16, description="Multi-token-prediction modules (DeepSeek-V3), each one extra block plus projection.")
    mtp_repeated_layer: bool = Field(False, description=(
        "The MTP depths run one shared module (Megatron-Core mtp_use_repeated_layer; Nemotron 3 Super: one "
        "*E block run twice): compute per depth, weights, gradients and optimizer state once."))
    moe_latent_size: int | None = Field(None, ge=1, le=262_144, description=(
        "Latent MoE (Megatron-Core moe_latent_size; HF moe_latent_size; Nemotron 3 Super: 1024): each MoE layer "
        "projects its tokens h → latent before the dispatch and latent → h after the combine; the routed experts, "
        "the permutation and the all-to-all run at the latent width. None = the hidden size."))
    n_group: int | None = Field(None, ge=1, le=65_536, description="Group-limited routing: experts split into this many equal groups (HF n_group, Megatron --moe-router-num-groups); None = no groups. DeepSeek-V3: 8 (one group per node).")
    topk_group: int | None = Field(None, ge=1, le=65_536, description="Groups a token may route into (HF topk_group, Megatron --moe-router-group-topk). DeepSeek-V3: 4, i.e. each token reaches at most 4 nodes.")
    router_expert_bias: Literal["auto", "on", "off"] = Field("auto", description="Auxiliary-loss-free balancing: a per-expert bias added to the scores for top-k selection, updated each step (DeepSeek-V3 report §2.1.2; Megatron --moe-router-enable-expert-bias). auto = on with the sigmoid router (HF topk_method noaux_tc, e_score_correction_bias).")
    # --- attention window (sliding-window / local attention) -----------------------------------
    attention_window: int | None = Field(None, ge=1, le=16_777_216, description="Sliding-window attention: each query attends to the last attention_window keys (HF sliding_window). None = full causal attention.")
    full_attention_interval: int | None = Field(None, ge=2, le=1024, description="With attention_window: every n-th layer (layer i with (i+1) % n == 0) uses full attention, the others the window (GPT-OSS: 2, alternating). None = every layer windowed.")
    attention_sinks: bool = Field(False, description="A learned sink logit per attention head in the softmax denominator (GPT-OSS): one parameter per head and layer.")
    swiglu_limit: float | None = Field(None, gt=0, le=1e6, description=(
        "Clamped GLU (HF GptOssConfig swiglu_limit; Megatron-Core activation_func_clamp_value): the gate is clamped "
        "above and the linear half on both sides before the activation (GPT-OSS: 7.0). Megatron-Core clamps the routed "
        "experts' fc1 output with eager clamps and a concatenation before its fused GLU (fusions/fused_bias_geglu.py "
        "weighted_bias_quick_geglu_impl): three memory-bound passes more each way. None = no clamp."))
    qk_norm: bool = Field(False, description="RMSNorm over each head of the queries and keys before RoPE (Qwen3 q_norm/k_norm; Megatron-Core qk_layernorm): two norm kernels each way, their inputs saved, 2·head_dim parameters per layer. Not with MLA.")
    # --- hybrid Mamba-2 / attention / MLP / MoE stacks (Nemotron-H, Nemotron-3; workload/mamba.py) ---
    hybrid_pattern: str | None = Field(None, min_length=1, max_length=1024, description=(
        "One character per layer, each layer a single mixer with its own pre-norm and residual (Megatron-Core "
        "MambaModel hybrid_override_pattern): M = Mamba-2, * = self-attention, - = MLP, E = MoE. Its length is "
        "num_layers. None = every layer is attention + MLP (or MoE)."))
    mamba_num_heads: int | None = Field(None, ge=1, le=65_536, description="Mamba-2 SSM heads H (d_inner = H·mamba_head_dim).")
    mamba_head_dim: int = Field(64, ge=1, le=4096, description="Mamba-2 head dimension P.")
    mamba_state_dim: int = Field(128, ge=1, le=4096, description="Mamba-2 state size N per head.")
    mamba_num_groups: int = Field(8, ge=1, le=4096, description="Mamba-2 groups G sharing B and C (like GQA's KV groups).")
    mamba_conv_kernel: int = Field(4, ge=1, le=64, description="Width of Mamba's causal depthwise convolution.")
    mamba_chunk_size: int = Field(128, ge=1, le=65_536, description="SSD chunk length Q of the chunked scan (Megatron-Core MambaMixer chunk_size).")

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        kv = self.num_kv_heads if self.num_kv_heads is not None else self.num_attention_heads
        if self.attention != "mla":
            if self.num_attention_heads % kv:
                raise ValueError(f"num_attention_heads={self.num_attention_heads} is not a multiple of num_kv_heads={kv}")
            if self.attention == "mha" and kv != self.num_attention_heads:
                raise ValueError(f"attention='mha' needs num_kv_heads == num_attention_heads, got num_kv_heads={kv}, num_attention_heads={self.num_attention_heads}")
            if self.head_dim is None and self.hidden_size % self.num_attention_heads:
                raise ValueError(f"hidden_size={self.hidden_size} is not divisible by num_attention_heads={self.num_attention_heads}; set head_dim")
        else:
            missing = [n for n in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim") if getattr(self, n) is None]
            if missing:
                raise ValueError("attention='mla' needs " + ", ".join(missing))
            if self.qk_norm:
                raise ValueError("qk_norm is for MHA/GQA heads; MLA normalises its latents instead")
        if self.num_experts:
            if not 1 <= self.top_k <= self.num_experts:
                raise ValueError(f"top_k={self.top_k} must be between 1 and num_experts={self.num_experts}")
            if self.moe_ffn_hidden_size is None:
                raise ValueError("num_experts > 0 needs moe_ffn_hidden_size")
            if self.first_k_dense_layers > self.num_layers:
                raise ValueError(f"first_k_dense_layers={self.first_k_dense_layers} exceeds num_layers={self.num_layers}")
        elif self.top_k:
            raise ValueError(f"top_k={self.top_k} needs num_experts > 0")
        if self.moe_latent_size is not None and not self.num_experts:
            raise ValueError("moe_latent_size needs num_experts > 0")
        if self.mtp_repeated_layer and not self.mtp_layers:
            raise ValueError("mtp_repeated_layer needs mtp_layers > 0")
        self._check_groups()
        self._check_hybrid()
        if self.full_attention_interval is not None and self.attention_window is None:
            raise ValueError("full_attention_interval needs attention_window")
        return self

    def _check_hybrid(self) -> None:
        pat = self.hybrid_pattern
        if pat is None:
            return
        bad = sorted(set(pat) - set("M*-E"))
        if bad:
            raise ValueError(f"hybrid_pattern takes M (Mamba-2), * (attention), - (MLP) and E (MoE) only, not {''.join(bad)[:8]!r}")
        if len(pat) != self.num_layers:
            raise ValueError(f"hybrid_pattern has {len(pat)} layers but num_layers={self.num_layers}")
        if "M" in pat and self.mamba_num_heads is None:
            raise ValueError("hybrid_pattern with Mamba layers (M) needs mamba_num_heads")
        if "M" in pat and self.mamba_num_heads is not None and self.mamba_num_heads % self.mamba_num_groups:
            raise ValueError(f"mamba_num_groups={self.mamba_num_groups} does not divide mamba_num_heads={self.mamba_num_heads}")
        if ("E" in pat) != self.is_moe:
            raise ValueError("hybrid_pattern has MoE layers (E) exactly when num_experts > 0")
        if self.attention == "mla" or self.attention_window is not None:
            raise ValueError("hybrid_pattern is modelled with MHA/GQA attention and no sliding window")

    def _check_groups(self) -> None:
        if self.n_group is None and self.topk_group is None:
            return
        if self.n_group is None or self.topk_group is None or not self.num_experts:
            raise ValueError("n_group and topk_group go together and need num_experts > 0")
        if self.num_experts % self.n_group:
            raise ValueError(f"n_group={self.n_group} does not divide num_experts={self.num_experts}")
        if self.topk_group > self.n_group:
            raise ValueError(f"topk_group={self.topk_group} exceeds n_group={self.n_group}")
        if self.top_k > self.topk_group * (self.num_experts // self.n_group):
            raise ValueError(f"top_k={self.top_k} exceeds the {self.topk_group * (self.num_experts // self.n_group)} experts of topk_group={self.topk_group} groups")

    # ---- derived shapes (cheap properties; no caching needed) -------------------------------
    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_attention_heads

    @property
    def d_head(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def mla(self) -> MlaDims:
        """The MLA dimensions, set whenever attention='mla' (``_check`` requires them)."""
        kvr, nope, rope, dv = self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
        if self.attention != "mla" or kvr is None or nope is None or rope is None or dv is None:
            raise ValueError(f"model {self.name!r} has no MLA dimensions (attention={self.attention!r})")
        return MlaDims(self.q_lora_rank or 0, kvr, nope, rope, dv)

    @property
    def expert_ffn(self) -> int:
        """Intermediate size of one routed expert, set whenever num_experts > 0 (``_check`` requires it)."""
        if self.moe_ffn_hidden_size is None:
            raise ValueError(f"model {self.name!r} has no moe_ffn_hidden_size (num_experts={self.num_experts})")
        return self.moe_ffn_hidden_size

    @property
    def moe_dim(self) -> int:
        """Width of the routed tokens: the latent size of a latent MoE (``moe_latent_size``), else h."""
        return self.moe_latent_size if self.moe_latent_size is not None else self.hidden_size

    @property
    def mtp_moe(self) -> bool:
        """Whether an MTP module's block uses an MoE MLP: as the last main layer (DeepSeek-V3 report
        §2.2); in a hybrid stack attention + MoE on an MoE model (Megatron-Bridge Nemotron 3 Super:
        ``mtp_hybrid_override_pattern`` "*E"), attention + MLP otherwise."""
        return self.is_moe if self.hybrid_pattern is not None else self.is_moe_layer(self.num_layers - 1)

    @property
    def mtp_weight_copies(self) -> int:
        """MTP modules with their own weights: one when the depths share it (``mtp_repeated_layer``)."""
        return min(self.mtp_layers, 1) if self.mtp_repeated_layer else self.mtp_layers

    @property
    def qk_head_dim(self) -> int:
        """Per-head q·k dimension (MLA: nope + rope)."""
        if self.attention == "mla":
            return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim
        return self.d_head

    @property
    def v_dim(self) -> int:
        return self.mla.v_head_dim if self.attention == "mla" else self.d_head

    @property
    def shared_ffn(self) -> int:
        """Total intermediate width of the shared experts (0 if none)."""
        if self.shared_expert_ffn_hidden_size is not None:
            return self.shared_expert_ffn_hidden_size
        return self.num_shared_experts * int(self.moe_ffn_hidden_size or 0)

    def layer_kind(self, index: int) -> str:
        """A hybrid layer's one mixer (``hybrid_pattern``: M, *, - or E), or "" for an attention + MLP
        (or MoE) layer."""
        return self.hybrid_pattern[index] if self.hybrid_pattern is not None else ""

    @property
    def num_attention_layers(self) -> int:
        """Layers with self-attention: every one, or the hybrid pattern's *."""
        return self.hybrid_pattern.count("*") if self.hybrid_pattern is not None else self.num_layers

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense MLP: the non-MoE ones, or the hybrid pattern's -."""
        return self.hybrid_pattern.count("-") if self.hybrid_pattern is not None else self.num_layers - self.num_moe_layers

    @property
    def num_mamba_layers(self) -> int:
        return self.hybrid_pattern.count("M") if self.hybrid_pattern is not None else 0

    @property
    def mamba_inner(self) -> int:
        """d_inner = H·P of a Mamba-2 layer (0 without Mamba layers)."""
        return (self.mamba_num_heads or 0) * self.mamba_head_dim

    @property
    def mamba_conv_dim(self) -> int:
        """Channels of Mamba-2's depthwise conv: x, B and C (d_inner + 2·G·N; Megatron-Core MambaMixer)."""
        return self.mamba_inner + 2 * self.mamba_num_groups * self.mamba_state_dim

    @property
    def mamba_in_proj(self) -> int:
        """in_proj's output width: z, x, B, C and dt (2·d_inner + 2·G·N + H)."""
        return self.mamba_inner + self.mamba_conv_dim + (self.mamba_num_heads or 0)

    def is_moe_layer(self, index: int) -> bool:
        """Layer ``index`` (0-based) uses an MoE MLP (Megatron moe_layer_freq / DeepSeek first_k_dense_replace;
        a hybrid pattern's E)."""
        if self.hybrid_pattern is not None:
            return self.hybrid_pattern[index] == "E"
        if not self.is_moe or index < self.first_k_dense_layers:
            return False
        return (index - self.first_k_dense_layers) % self.moe_layer_freq == 0

    @property
    def expert_bias(self) -> bool:
        """The router keeps a per-expert selection bias (``router_expert_bias``; auto = sigmoid)."""
        return self.router == "sigmoid" if self.router_expert_bias == "auto" else self.router_expert_bias == "on"

    def attention_window_of(self, index: int) -> int | None:
        """Window of layer ``index`` (0-based); None = full causal attention (HF layer_types)."""
        if self.attention_window is None:
            return None
        n = self.full_attention_interval
        return None if n is not None and (index + 1) % n == 0 else self.attention_window

    @property
    def num_moe_layers(self) -> int:
        if self.hybrid_pattern is not None:
            return self.hybrid_pattern.count("E")
        if not self.is_moe or self.num_layers <= self.first_k_dense_layers:
            return 0
        return -(-(self.num_layers - self.first_k_dense_layers) // self.moe_layer_freq)
