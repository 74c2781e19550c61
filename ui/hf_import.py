"""Hugging Face ``config.json`` → ModelSpec dict (pure; no Streamlit).

Covers the Llama, Qwen (2, 2-MoE, 3, 3-MoE), Mistral/Mixtral and DeepSeek (V2, V3, Kimi-K2)
families. Every mapped field is listed in ``FIELD_MAP`` so users can see where a figure came
from; anything surprising becomes a note, and bad input raises :class:`HFImportError` with one
clear message (never a traceback).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from pydantic import ValidationError

from simengine.config import ModelSpec

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
    "activation": ("hidden_act", "activation_function"),
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
    "shared_expert_ffn_hidden_size": ("shared_expert_intermediate_size",),
    "first_k_dense_layers": ("first_k_dense_replace",),
    "moe_layer_freq": ("decoder_sparse_step", "moe_layer_freq"),
    "router": ("scoring_func",),
    "mtp_layers": ("num_nextn_predict_layers",),
}

_GATED = {"silu", "swish", "swiglu"}
_GELU = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "quick_gelu"}


class HFImportError(ValueError):
    """A config.json that cannot be mapped; the message is meant for the user."""


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


def hf_to_model(cfg: dict[str, Any] | str | bytes) -> tuple[dict[str, Any], list[str]]:
    """Map a Hugging Face config (dict, or its JSON text) to a validated ModelSpec dict.

    Returns ``(model_dict, notes)``: the canonical ModelSpec dump and human-readable notes about
    assumptions (defaults, ignored fields). Raises :class:`HFImportError` with a clear message.
    """
    if not isinstance(cfg, dict):
        cfg = parse_config_text(cfg)
    cfg = _text_config(cfg)
    notes: list[str] = []
    out: dict[str, Any] = {}

    required = ("hidden_size", "num_layers", "num_attention_heads", "vocab_size")
    for field in required:
        v, _ = _first(cfg, field, minimum=1)
        if v is None:
            keys = " / ".join(repr(k) for k in FIELD_MAP[field])
            raise HFImportError(f"missing {keys}: is this a Hugging Face config.json of a decoder-only transformer?")
        out[field] = v
    h, heads = out["hidden_size"], out["num_attention_heads"]

    ffn, _ = _first(cfg, "ffn_hidden_size", minimum=1)
    if ffn is None:
        ffn = 4 * h
        notes.append(f"no 'intermediate_size': assumed 4 x hidden_size = {ffn}")
    out["ffn_hidden_size"] = ffn

    # names and provenance
    arch = cfg.get("architectures")
    arch0 = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else ""
    model_type = cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else ""
    path = cfg.get("_name_or_path") if isinstance(cfg.get("_name_or_path"), str) else ""
    out["name"] = (path.rsplit("/", 1)[-1] or arch0 or model_type or "imported")[:120]
    out["source"] = ("Imported from a Hugging Face config.json"
                     + (f" (model_type={model_type}" + (f", {arch0}" if arch0 else "") + ")" if model_type or arch0 else ""))[:2000]

    # activation
    act = cfg.get("hidden_act", cfg.get("activation_function", "silu"))
    if not isinstance(act, str):
        raise HFImportError(f"'hidden_act' must be a string, got {json.dumps(act)[:40]}")
    a = act.lower()
    if a in _GATED:
        out["activation"] = "swiglu"
    elif a in _GELU:
        out["activation"] = "gelu"
        notes.append(f"hidden_act={act!r}: mapped to a plain (non-gated) GELU MLP")
    elif a == "relu":
        out["activation"] = "relu"
    else:
        raise HFImportError(f"unsupported hidden_act {act[:40]!r}; supported: silu/swish (SwiGLU), gelu*, relu")

    tie = cfg.get("tie_word_embeddings", False)
    if not isinstance(tie, bool):
        raise HFImportError(f"'tie_word_embeddings' must be true or false, got {json.dumps(tie)[:40]}")
    out["tie_embeddings"] = tie
    if "layer_norm_eps" in cfg or "layer_norm_epsilon" in cfg:
        out["norm"] = "layernorm" if "rms_norm_eps" not in cfg else "rmsnorm"
    else:
        out["norm"] = "rmsnorm"
    mpe, _ = _first(cfg, "max_position_embeddings", minimum=1)
    if mpe is not None:
        out["max_position_embeddings"] = min(mpe, 16_777_216)
    if cfg.get("attention_bias") is True or cfg.get("mlp_bias") is True or model_type.startswith("qwen2"):
        notes.append("bias terms on some projections (attention_bias / Qwen2 qkv bias) are ignored: they are < 0.01% of parameters")

    # attention kind
    kv_lora = _int(cfg, "kv_lora_rank", minimum=1)
    if kv_lora is not None:
        out["attention"] = "mla"
        out["kv_lora_rank"] = kv_lora
        for field in ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            v, _ = _first(cfg, field, minimum=0 if field == "qk_rope_head_dim" else 1)
            out[field] = v
        for field in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if out[field] is None:
                raise HFImportError(f"MLA config (kv_lora_rank set) is missing '{field}'")
        kv, _ = _first(cfg, "num_kv_heads", minimum=1)
        out["num_kv_heads"] = None
    else:
        kv, _ = _first(cfg, "num_kv_heads", minimum=1)
        if kv is None or kv == heads:
            out["attention"] = "mha"
            out["num_kv_heads"] = None if kv is None else kv
        else:
            out["attention"] = "gqa"
            out["num_kv_heads"] = kv
        hd, _ = _first(cfg, "head_dim", minimum=1)
        if hd is not None and hd != h // heads:
            out["head_dim"] = hd
        elif hd is None and h % heads:
            raise HFImportError(f"hidden_size={h} is not divisible by num_attention_heads={heads} and no 'head_dim' is given")

    # MoE
    experts, ekey = _first(cfg, "num_experts", minimum=0)
    if experts:
        out["num_experts"] = experts
        top_k, _ = _first(cfg, "top_k", minimum=0)
        if not top_k:
            raise HFImportError(f"MoE config ({ekey}={experts}) is missing 'num_experts_per_tok'")
        out["top_k"] = top_k
        moe_ffn, _ = _first(cfg, "moe_ffn_hidden_size", minimum=1)
        if moe_ffn is None:  # Mixtral: every expert is an intermediate_size-wide SwiGLU MLP
            moe_ffn = ffn
            notes.append(f"no 'moe_intermediate_size': each expert is intermediate_size = {ffn} wide (Mixtral layout)")
        out["moe_ffn_hidden_size"] = moe_ffn
        shared, _ = _first(cfg, "num_shared_experts", minimum=0)
        shared_ffn, _ = _first(cfg, "shared_expert_ffn_hidden_size", minimum=1)
        if shared_ffn is not None:
            out["shared_expert_ffn_hidden_size"] = shared_ffn
            out["num_shared_experts"] = shared if shared else 1
        elif shared:
            out["num_shared_experts"] = shared
        fk, _ = _first(cfg, "first_k_dense_layers", minimum=0)
        if fk:
            out["first_k_dense_layers"] = fk
        freq, _ = _first(cfg, "moe_layer_freq", minimum=1)
        if freq and freq > 1:
            out["moe_layer_freq"] = freq
        mlp_only = cfg.get("mlp_only_layers")
        if isinstance(mlp_only, list) and mlp_only:
            notes.append(f"mlp_only_layers={_echo(mlp_only)} is not modelled; those layers are treated as MoE")
        scoring = cfg.get("scoring_func")
        if scoring is not None:
            if scoring not in ("softmax", "sigmoid"):
                raise HFImportError(f"unsupported scoring_func {str(scoring)[:40]!r}; supported: softmax, sigmoid")
            out["router"] = scoring
    mtp, _ = _first(cfg, "mtp_layers", minimum=0)
    if mtp:
        out["mtp_layers"] = mtp
    _routing_and_window(cfg, out, notes)

    try:
        spec = ModelSpec.model_validate(out)
    except ValidationError as e:
        msgs = []
        for err in e.errors()[:6]:
            loc = ".".join(str(p) for p in err.get("loc", ()))
            src = FIELD_MAP.get(loc, ())
            where = f"{loc} (from '{src[0]}')" if src else (loc or "config")
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            msgs.append(f"{where}: {msg}")
        raise HFImportError("the config maps to an invalid model: " + "; ".join(msgs)) from None
    return spec.model_dump(mode="json"), notes


def _routing_and_window(cfg: dict[str, Any], out: dict[str, Any], notes: list[str]) -> None:
    """Group-limited routing (DeepSeek ``n_group``/``topk_group``) and sliding-window attention
    (``sliding_window`` with ``layer_types``, GPT-OSS attention sinks) onto ModelSpec fields."""
    groups, keep = _int(cfg, "n_group", minimum=1), _int(cfg, "topk_group", minimum=1)
    if out.get("num_experts") and groups and groups > 1 and keep:
        out["n_group"], out["topk_group"] = groups, keep
    window = _int(cfg, "sliding_window", minimum=1)
    types = cfg.get("layer_types")
    if window is None or cfg.get("use_sliding_window") is False:
        return
    out["attention_window"] = window
    if isinstance(types, list) and types and all(isinstance(t, str) for t in types):
        full = [i for i, t in enumerate(types) if t == "full_attention"]
        if len(full) == len(types):
            del out["attention_window"]
        elif full:
            n = full[0] + 1
            if full != list(range(n - 1, len(types), n)):
                notes.append(f"layer_types is not 'full attention every n-th layer': priced as full attention every {n}")
            out["full_attention_interval"] = max(n, 2)
    if cfg.get("model_type") == "gpt_oss":  # transformers GptOssAttention.sinks; biased q/k/v/o, experts, router
        out["attention_sinks"] = True
        out["linear_bias"] = bool(cfg.get("attention_bias", True))
        notes[:] = [n for n in notes if not n.startswith("bias terms")]
