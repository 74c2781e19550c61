"""Reading a Hugging Face ``config.json``: the text, integer fields, and which HF key feeds which
ModelSpec field (``FIELD_MAP``). Bad input raises :class:`HFImportError` (a ``ConfigError`` whose
field is ``config.json``) with one clear message, never a traceback."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from ..errors import ConfigError

MAX_BYTES = 1_000_000
ECHO_CHARS = 60  # user values quoted in messages are cut to this length

# ModelSpec field ← Hugging Face key(s), first present wins (for the messages and the docs).
FIELD_MAP: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "ffn_hidden_size": ("intermediate_size", "n_inner", "ffn_dim"),
    "vocab_size": ("vocab_size",),
    "activation": ("hidden_act", "activation_function", "mlp_hidden_act", "hidden_activation"),
    "tie_embeddings": ("tie_word_embeddings",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions"),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "num_experts": ("n_routed_experts", "num_local_experts", "num_experts"),
    "top_k": ("num_experts_per_tok",),
    "moe_ffn_hidden_size": ("moe_intermediate_size",),
    "num_shared_experts": ("n_shared_experts",),
    "shared_expert_ffn_hidden_size": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
    "first_k_dense_layers": ("first_k_dense_replace",),
    "moe_layer_freq": ("decoder_sparse_step", "moe_layer_freq"),
    "router": ("scoring_func",),
    "mtp_layers": ("num_nextn_predict_layers",),
    "moe_latent_size": ("moe_latent_size",),
    # hybrid Mamba-2 stacks (NVIDIA's configuration_nemotron_h.py NemotronHConfig: the attributes
    # its config.json stores, then the constructor's argument names)
    "hybrid_pattern": ("hybrid_override_pattern",),
    "mamba_num_heads": ("mamba_num_heads",),
    "mamba_head_dim": ("mamba_head_dim",),
    "mamba_state_dim": ("ssm_state_size",),
    "mamba_num_groups": ("n_groups", "mamba_n_groups"),
    "mamba_conv_kernel": ("conv_kernel", "mamba_d_conv"),
    "mamba_chunk_size": ("chunk_size", "mamba_chunk_size"),
}

_GATED = {"silu", "swish", "swiglu"}
_GELU = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "quick_gelu"}


class HFImportError(ConfigError):
    """A config.json that cannot be mapped; the message is meant for the user (field ``config.json``)."""

    def __init__(self, message: str, field: str = "config.json"):
        super().__init__([(field, message)])
        self.message = message


def _echo(value: Any, limit: int = ECHO_CHARS) -> str:
    """A user value quoted in a message, cut to ``limit`` characters (a huge integer included)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"{'-' if value < 0 else ''}an integer of more than {limit} digits"
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _int(cfg: dict, key: str, *, minimum: int = 0) -> int | None:
    """An integer field (None when absent or null); rejects bools, fractions, huge or negative values."""
    if key not in cfg or cfg[key] is None:
        return None
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise HFImportError(f"'{key}' must be an integer, got {json.dumps(v)[:40]}")
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        raise HFImportError(f"'{key}' must be a whole number, got {v!r}")
    v = int(v)
    if v < minimum:
        raise HFImportError(f"'{key}' must be >= {minimum}, got {_echo(v)}")
    if v > 10**12:
        raise HFImportError(f"'{key}' = {_echo(v)} is implausibly large")
    return v


def _first(cfg: dict, field: str, *, minimum: int = 0) -> tuple[int | None, str | None]:
    for key in FIELD_MAP[field]:
        v = _int(cfg, key, minimum=minimum)
        if v is not None:
            return v, key
    return None, None


def _text_config(cfg: dict) -> dict:
    """Multimodal configs (Llama-4, Qwen-VL, ...) keep the decoder under ``text_config``."""
    inner = cfg.get("text_config")
    if "hidden_size" not in cfg and isinstance(inner, dict):
        merged = dict(inner)
        for k in ("_name_or_path", "architectures", "model_type"):
            merged.setdefault(k, cfg.get(k))
        return merged
    return cfg


def parse_config_text(text: str | bytes) -> dict:
    """The JSON object of a config.json upload or paste (raises HFImportError)."""
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise HFImportError(f"config.json is {len(text):,} bytes; a real one is a few kB (limit {MAX_BYTES:,})")
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise HFImportError("config.json is not UTF-8 text") from None
    if not isinstance(text, str):
        raise HFImportError("config.json must be text")
    text = text.lstrip("\ufeff")
    if len(text) > MAX_BYTES:
        raise HFImportError(f"config.json is {len(text):,} characters; a real one is a few kB (limit {MAX_BYTES:,})")
    if not text.strip():
        raise HFImportError("config.json is empty: paste the file's content or upload it")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise HFImportError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise HFImportError("not a config.json: nested too deeply") from None
    except ValueError as e:  # an integer literal over Python's 4,300-digit conversion limit
        limit = f"more than {sys.get_int_max_str_digits():,} digits" if "integer string" in str(e) else str(e)[:80]
        raise HFImportError(f"not a config.json: it holds an integer too long to read ({limit})") from None
    if not isinstance(data, dict):
        raise HFImportError(f"a config.json is a JSON object {{...}}, got a JSON {type(data).__name__}")
    return data
