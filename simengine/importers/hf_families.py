"""What the Hugging Face importer knows about each architecture family, and which config.json
keys it reads or knowingly ignores. Any other key is reported back as *not mapped*.

Block layouts: GPT-2 from transformers ``models/gpt2/modeling_gpt2.py`` (``GPT2Block``: LayerNorm
``ln_1``/``ln_2``, ``Conv1D`` projections with biases, learned ``wpe`` positions, ``lm_head`` tied to
``wte``; ``GPT2Config`` defaults ``tie_word_embeddings=True``, ``n_inner=None`` → 4·n_embd). Llama-style
families from ``models/llama/modeling_llama.py`` and the Mistral/Mixtral/Qwen2/Qwen3(-MoE)/DeepSeek
ports: RMSNorm, rotary positions, bias-free projections, ``tie_word_embeddings`` default False in
their configs (Qwen2/3 small models set it explicitly). Nemotron-3/4 (``models/nemotron``): LayerNorm,
rotary positions, no biases, squared-ReLU MLP, untied. ``partial_rotary_factor`` (RoPE on part of
each head) is priced as full RoPE, with a note: one pointwise pass, far below 0.1 % of a step.
"""

from __future__ import annotations

from typing import Any


_LLAMA_STYLE: dict[str, Any] = {"norm": "rmsnorm", "position_embedding": "rope", "linear_bias": False, "tie_default": False}

FAMILIES: dict[str, dict[str, Any]] = {
    "gpt2": {"norm": "layernorm", "position_embedding": "learned", "linear_bias": True, "tie_default": True},
    # transformers models/nemotron/modeling_nemotron.py: NemotronLayerNorm1P (a LayerNorm with a
    # zero-centred weight), rotary positions on partial_rotary_factor of each head, bias-free
    # projections, ACT2FN["relu2"] between up_proj and down_proj (no gate), untied lm_head
    "nemotron": {"norm": "layernorm", "position_embedding": "rope", "linear_bias": False, "tie_default": False},
    # NVIDIA's modeling_nemotron_h.py (remote code): RMSNorm, bias-free, untied; the layer pattern and
    # Mamba-2 dims are read by hf.py ``_hybrid``
    "nemotron_h": {"norm": "rmsnorm", "position_embedding": "rope", "linear_bias": False, "tie_default": False},
    **dict.fromkeys(("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "deepseek_v2", "deepseek_v3", "kimi_k2"), _LLAMA_STYLE),
    # transformers models/qwen3(_moe)/modeling_qwen3(_moe).py Qwen3Attention: q_norm and k_norm,
    # Qwen3RMSNorm(head_dim) on each head's query and key before the rotary embedding; no config key
    **dict.fromkeys(("qwen3", "qwen3_moe"), {**_LLAMA_STYLE, "qk_norm": True}),
    # transformers models/glm4_moe/modular_glm4_moe.py (GLM-4.5, 4.6, 4.7): Llama-style layers, q/k/v
    # biases (attention_bias), q_norm/k_norm only with use_qk_norm, DeepseekV3TopkRouter (sigmoid
    # scores with e_score_correction_bias: no scoring_func key), SwiGLU experts, MTP layers
    "glm4_moe": {**_LLAMA_STYLE, "qk_norm": "use_qk_norm", "router": "sigmoid"},
}

# Keys read by the mapping itself, beyond FIELD_MAP (norm kind, biases, dropout, MoE layer lists).
READ: frozenset[str] = frozenset({
    "model_type", "architectures", "_name_or_path", "text_config", "rms_norm_eps", "layer_norm_eps",
    "layer_norm_epsilon", "attention_bias", "mlp_bias", "mlp_only_layers", "resid_pdrop", "attn_pdrop",
    "attention_dropout", "hidden_dropout", "embd_pdrop", "n_ctx", "sliding_window", "use_sliding_window",
    "quantization_config", "add_cross_attention", "n_group", "topk_group", "layer_types", "partial_rotary_factor",
    "expand", "mtp_hybrid_override_pattern", "use_qk_norm",
})

# Keys with no effect on a training step's compute, communication or memory shape: token ids,
# initialisation, inference caches, rotary frequency/scaling (same FLOPs), router loss weights and
# GPT-2's sequence-summary head (not in the causal LM).
IGNORED: frozenset[str] = frozenset({
    "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype", "transformers_version",
    "initializer_range", "initializer_factor", "use_cache", "rope_theta", "rope_scaling", "pretraining_tp",
    "auto_map", "output_router_logits", "router_aux_loss_coef", "aux_loss_alpha", "seq_aux", "norm_topk_prob",
    "routed_scaling_factor", "topk_method", "ep_size", "max_window_layers", "norm_eps",
    # Mamba-2 settings with no effect on the step's shapes (time-step init and limits, kernel
    # switches, the residual dtype, the derived per-layer labels)
    "use_mamba_kernels", "time_step_min", "time_step_max", "time_step_limit", "time_step_floor", "use_conv_bias",
    "mamba_proj_bias", "rescale_prenorm_residual", "residual_in_fp32", "layers_block_type", "num_logits_to_keep",
    "mamba_hidden_act", "use_bias",
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
    "task_specific_params", "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
    "tokenizer_class", "use_bfloat16",
})
