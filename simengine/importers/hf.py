"""Hugging Face ``config.json`` → ModelSpec dict, with what could not be mapped.

Covers GPT-2 and the Llama, Qwen (2, 2-MoE, 3, 3-MoE), Mistral/Mixtral, DeepSeek (V2, V3,
Kimi-K2), GLM-4.5 (glm4_moe), Nemotron-3/4 and Nemotron-H (hybrid Mamba, latent MoE) families
(``hf_families.FAMILIES``). Every mapped field is listed in ``FIELD_MAP``; a
default the file does not state, a key the importer does not know, and a feature it does not
model become warnings; bad input raises :class:`HFImportError` with one clear message.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..config import ModelSpec
from .hf_families import FAMILIES, IGNORED, READ
from .hf_values import _GATED, _GELU, FIELD_MAP, HFImportError, _echo, _first, _int, _text_config, parse_config_text


class HFImport(BaseModel):
    """The result of an import: the validated ModelSpec dump, the warnings (assumed defaults,
    ignored features) and the config.json keys the importer does not know (their effect is not
    modelled)."""

    model_config = ConfigDict(frozen=True)
    model: dict[str, Any]
    warnings: list[str] = []
    unmapped: list[str] = []


def _float(cfg: dict, key: str, share: bool = False) -> float | None:
    """A probability in [0, 1), or with ``share`` a fraction in (0, 1] (``partial_rotary_factor``:
    1.0 is the whole head, as Nemotron-H configs state it)."""
    v = cfg.get(key)
    if v is None:
        return None
    number = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    ok = number and ((0 < v <= 1) if share else (0 <= v < 1))   # (a string compared with 0 was a TypeError)
    if not ok:
        want = "a fraction in (0, 1]" if share else "a probability in [0, 1)"
        raise HFImportError(f"'{key}' must be {want}, got {json.dumps(v)[:40]}")
    return float(v)


def _shape(cfg: dict, out: dict, notes: list[str]) -> None:
    for field in ("hidden_size", "num_layers", "num_attention_heads", "vocab_size"):
        v, _ = _first(cfg, field, minimum=1)
        if v is None:
            keys = " / ".join(repr(k) for k in FIELD_MAP[field])
            raise HFImportError(f"missing {keys}: is this a Hugging Face config.json of a decoder-only transformer?")
        out[field] = v
    ffn, _ = _first(cfg, "ffn_hidden_size", minimum=1)
    if ffn is None:
        ffn = 4 * out["hidden_size"]
        notes.append(f"no 'intermediate_size' / 'n_inner': assumed 4 x hidden_size = {ffn}")
    out["ffn_hidden_size"] = ffn


def _text(cfg: dict, key: str) -> str:
    """cfg[key] when it is a string, else ''."""
    value = cfg.get(key)
    return value if isinstance(value, str) else ""


def _names(cfg: dict, out: dict) -> str:
    arch = cfg.get("architectures")
    arch0 = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else ""
    model_type, path = _text(cfg, "model_type"), _text(cfg, "_name_or_path")
    out["name"] = (path.rsplit("/", 1)[-1] or arch0 or model_type or "imported")[:120]
    out["source"] = ("Imported from a Hugging Face config.json"
                     + (f" (model_type={model_type}" + (f", {arch0}" if arch0 else "") + ")" if model_type or arch0 else ""))[:2000]
    return model_type


def _block(cfg: dict, out: dict, notes: list[str], model_type: str) -> None:
    """Activation, norm, positions, biases, tied embeddings, dropout: from the file, else the family's layout."""
    fam = FAMILIES.get(model_type)
    # Gemma 2/3 name it hidden_activation (transformers Gemma3TextConfig)
    act_keys = ("hidden_act", "activation_function", "mlp_hidden_act", "hidden_activation")
    act = next((cfg[k] for k in act_keys if cfg.get(k) is not None), None)
    if act is None:
        act = "silu"
        notes.append("no 'hidden_act' in the file: assumed SiLU (a SwiGLU MLP, the Llama layout)")
    if not isinstance(act, str):
        raise HFImportError(f"'hidden_act' must be a string, got {json.dumps(act)[:40]}")
    a = act.lower()
    if a in _GATED:
        out["activation"] = "swiglu"
    elif a in _GELU and model_type.startswith("gemma"):
        # Gemma's MLP is gated: down(gelu_tanh(gate(x)) * up(x)) (transformers GemmaMLP), GeGLU —
        # the same two input projections and GEMMs as SwiGLU, another pointwise function
        out["activation"] = "swiglu"
        notes.append(f"hidden_act={act!r} in a gated MLP (GeGLU): priced as SwiGLU (the same GEMMs)")
    elif a in _GELU:
        out["activation"] = "gelu"
        notes.append(f"hidden_act={act!r}: mapped to a plain (non-gated) GELU MLP")
    elif a == "relu":
        out["activation"] = "relu"
    elif a in ("relu2", "squared_relu", "squared-relu"):  # transformers ACT2FN "relu2" (NemotronConfig)
        out["activation"] = "squared_relu"
    else:
        raise HFImportError(f"unsupported hidden_act {act[:40]!r}; supported: silu/swish (SwiGLU), gelu*, relu, relu2")
    tie = cfg.get("tie_word_embeddings", fam["tie_default"] if fam else False)
    if not isinstance(tie, bool):
        raise HFImportError(f"'tie_word_embeddings' must be true or false, got {json.dumps(tie)[:40]}")
    out["tie_embeddings"] = tie
    if fam:
        out["norm"] = fam["norm"]
        out["position_embedding"] = fam["position_embedding"]
        out["linear_bias"] = fam["linear_bias"]
        qk = fam.get("qk_norm")  # True, or the config key that says it (GLM-4.5's use_qk_norm)
        if qk is True or (isinstance(qk, str) and cfg.get(qk) is True):
            out["qk_norm"] = True
    else:
        out["norm"] = "layernorm" if ("layer_norm_eps" in cfg or "layer_norm_epsilon" in cfg) and "rms_norm_eps" not in cfg else "rmsnorm"
        known = ", ".join(sorted(FAMILIES))
        notes.append(f"model_type {model_type or '(none)'!r} is not a family this importer knows ({known}): assumed "
                     f"{out['norm']}, rotary positions, no biases, tie_word_embeddings={tie}; check the result")
    mpe, _ = _first(cfg, "max_position_embeddings", minimum=1)
    if mpe is not None:
        out["max_position_embeddings"] = min(mpe, 16_777_216)
    prf = _float(cfg, "partial_rotary_factor", share=True)
    if prf is not None and prf != 1.0:
        notes.append(f"partial_rotary_factor={prf}: RoPE priced on the whole head (one pointwise pass, under 0.1% of a step)")
    if cfg.get("attention_bias") is True or cfg.get("mlp_bias") is True or model_type.startswith("qwen2"):
        notes.append("bias terms on some projections (attention_bias / Qwen2 qkv bias) are ignored: they are < 0.01% of parameters")
    for field, keys in (("hidden_dropout", ("resid_pdrop", "hidden_dropout")), ("attention_dropout", ("attn_pdrop", "attention_dropout"))):
        v = next((p for p in (_float(cfg, k) for k in keys) if p is not None), None)
        if v:
            out[field] = v
    if _float(cfg, "embd_pdrop"):
        notes.append(f"embd_pdrop={cfg['embd_pdrop']}: dropout on the embedding output is not modelled (one mask of s·h bytes)")


def _attention(cfg: dict, out: dict) -> None:
    h, heads = out["hidden_size"], out["num_attention_heads"]
    kv_lora = _int(cfg, "kv_lora_rank", minimum=1)
    if kv_lora is not None:
        out["attention"] = "mla"
        out["kv_lora_rank"] = kv_lora
        for field in ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            out[field], _ = _first(cfg, field, minimum=0 if field == "qk_rope_head_dim" else 1)
        for field in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if out[field] is None:
                raise HFImportError(f"MLA config (kv_lora_rank set) is missing '{field}'")
        _first(cfg, "num_kv_heads", minimum=1)  # validated, unused by MLA
        out["num_kv_heads"] = None
        return
    kv, _ = _first(cfg, "num_kv_heads", minimum=1)
    if kv is None or kv == heads:
        out["attention"] = "mha"
        out["num_kv_heads"] = kv
    else:
        out["attention"] = "gqa"
        out["num_kv_heads"] = kv
    hd, _ = _first(cfg, "head_dim", minimum=1)
    if hd is not None and hd != h // heads:
        out["head_dim"] = hd
    elif hd is None and h % heads:
        raise HFImportError(f"hidden_size={h} is not divisible by num_attention_heads={heads} and no 'head_dim' is given")


def _moe(cfg: dict, out: dict, notes: list[str]) -> None:
    experts, ekey = _first(cfg, "num_experts", minimum=0)
    if experts:
        out["num_experts"] = experts
        top_k, _ = _first(cfg, "top_k", minimum=0)
        if not top_k:
            raise HFImportError(f"MoE config ({ekey}={experts}) is missing 'num_experts_per_tok'")
        out["top_k"] = top_k
        moe_ffn, _ = _first(cfg, "moe_ffn_hidden_size", minimum=1)
        if moe_ffn is None:  # Mixtral: every expert is an intermediate_size-wide SwiGLU MLP
            moe_ffn = out["ffn_hidden_size"]
            notes.append(f"no 'moe_intermediate_size': each expert is intermediate_size = {moe_ffn} wide (Mixtral layout)")
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
        latent, _ = _first(cfg, "moe_latent_size", minimum=1)
        if latent is not None:
            out["moe_latent_size"] = latent
        scoring = cfg.get("scoring_func", FAMILIES.get(_text(cfg, "model_type"), {}).get("router"))
        if scoring is not None:
            if scoring not in ("softmax", "sigmoid"):
                raise HFImportError(f"unsupported scoring_func {str(scoring)[:40]!r}; supported: softmax, sigmoid")
            out["router"] = scoring
    mtp, _ = _first(cfg, "mtp_layers", minimum=0)
    if mtp:
        out["mtp_layers"] = mtp


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
        limit = cfg.get("swiglu_limit")  # transformers GptOssExperts: gate.clamp(max=limit), up.clamp(±limit)
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
            out["swiglu_limit"] = float(limit)
        notes[:] = [n.replace("no biases", "biased projections" if out["linear_bias"] else "no biases")
                    for n in notes if not n.startswith("bias terms")]


def _hybrid(cfg: dict, out: dict, notes: list[str]) -> None:
    """A hybrid Mamba-2 stack (NVIDIA's NemotronHConfig): the layer pattern and the Mamba dims; its
    MoE layers route with sigmoid scores and a selection bias (modeling_nemotron_h.py
    ``NemotronHTopkRouter``: ``e_score_correction_bias``); its attention layers have no position
    embedding, priced as one RoPE pass (under 0.1 % of a step)."""
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is None:
        return
    if not isinstance(pattern, str):
        raise HFImportError(f"'hybrid_override_pattern' must be a string, got {_echo(pattern)}")
    out["hybrid_pattern"] = pattern
    for field in ("mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups", "mamba_conv_kernel",
                  "mamba_chunk_size"):
        value, _ = _first(cfg, field, minimum=1)
        if value is not None:
            out[field] = value
    expand = _int(cfg, "expand", minimum=1)
    d_inner = out.get("mamba_num_heads", 0) * out.get("mamba_head_dim", 64)
    if expand is not None and d_inner and expand * out["hidden_size"] != d_inner:
        notes.append(f"expand={expand} x hidden_size differs from mamba_num_heads x mamba_head_dim = {d_inner}: the heads are used")
    if out.get("num_experts"):
        out["router"], out["router_expert_bias"] = "sigmoid", "on"
    _hybrid_mtp(cfg, out, notes)
    notes.append("Nemotron-H attention layers have no position embedding: priced as one RoPE pass")


def _hybrid_mtp(cfg: dict, out: dict, notes: list[str]) -> None:
    """A hybrid stack's MTP module: its block is ``mtp_hybrid_override_pattern`` (Nemotron 3 Super:
    "*E"), priced as attention + MoE on an MoE model, attention + MLP otherwise
    (``ModelSpec.mtp_moe``)."""
    if not out.get("mtp_layers"):
        return
    want = "*E" if out.get("num_experts") else "*-"
    pat = cfg.get("mtp_hybrid_override_pattern")
    if pat is not None and pat != want:
        notes.append(f"mtp_hybrid_override_pattern={_echo(pat)}: the MTP block is priced as {want!r}")
    notes.append(f"num_nextn_predict_layers={out['mtp_layers']}: MTP modules with their own weights (Megatron-Bridge's "
                 "Nemotron 3 Super recipe runs one at two depths: mtp_layers 2 with mtp_repeated_layer)")


def _features(cfg: dict, notes: list[str]) -> None:
    """Features the file turns on that simengine does not model (priced as the plain layout)."""
    if cfg.get("add_cross_attention") is True:
        notes.append("add_cross_attention=true is not modelled: cross-attention blocks are not priced")
    q = cfg.get("quantization_config")
    if isinstance(q, dict):
        notes.append(f"quantization_config ({_echo(q.get('quant_method', '?'))} checkpoint) is ignored: the training "
                     "precision is the strategy's dtype")


def _unmapped(cfg: dict) -> list[str]:
    """Keys of ``cfg`` the importer neither maps, reads, nor knowingly ignores."""
    mapped = {k for keys in FIELD_MAP.values() for k in keys}
    return sorted(k for k in cfg if isinstance(k, str) and k not in mapped and k not in READ and k not in IGNORED)


def _validated(out: dict) -> dict[str, Any]:
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
    return spec.model_dump(mode="json")


def import_hf_config(cfg: dict[str, Any] | str | bytes) -> HFImport:
    """Map a Hugging Face config (dict, or its JSON text) to a validated ModelSpec dict, with the
    warnings (assumptions, ignored features, keys not mapped). Raises :class:`HFImportError`."""
    if not isinstance(cfg, dict):
        cfg = parse_config_text(cfg)
    cfg = _text_config(cfg)
    notes: list[str] = []
    out: dict[str, Any] = {}
    _shape(cfg, out, notes)
    model_type = _names(cfg, out)
    _block(cfg, out, notes, model_type)
    _attention(cfg, out)
    _moe(cfg, out, notes)
    _routing_and_window(cfg, out, notes)
    _hybrid(cfg, out, notes)
    _features(cfg, notes)
    unmapped = _unmapped(cfg)
    if unmapped:
        notes.append(f"not mapped (unknown to the importer, their effect is not modelled): {_echo(', '.join(unmapped), 400)}")
    return HFImport(model=_validated(out), warnings=notes, unmapped=unmapped)


def hf_to_model(cfg: dict[str, Any] | str | bytes) -> tuple[dict[str, Any], list[str]]:
    """``(model_dict, warnings)`` of :func:`import_hf_config` (the studio's older call)."""
    res = import_hf_config(cfg)
    return res.model, list(res.warnings)
