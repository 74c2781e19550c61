"""Derived figures shown next to the editors (pure; numbers come from the engine's functions)."""

from __future__ import annotations

from typing import Any

from simengine.config import ModelSpec, StrategySpec, SystemSpec
from simengine.config.scenario import make_scenario
from simengine.errors import ConfigError
from simengine.api import count_parameters


def model_figures(model: dict[str, Any]) -> dict[str, float]:
    m = ModelSpec.model_validate(model)
    total, active = count_parameters(m)
    return {
        "params_total": float(total), "params_active": float(active),
        "weights_bf16_gib": total * 2 / 2**30,
        "moe_layers": float(m.num_moe_layers), "d_head": float(m.d_head),
    }


def system_figures(system: dict[str, Any]) -> dict[str, float | None]:
    s = SystemSpec.model_validate(system)
    g = s.gpu
    return {
        "peak_bf16_pflops": s.num_gpus * g.peak_tflops.bf16 / 1e3,
        "peak_fp8_pflops": None if g.peak_tflops.fp8 is None else s.num_gpus * g.peak_tflops.fp8 / 1e3,
        "peak_fp4_pflops": None if g.peak_tflops.fp4 is None else s.num_gpus * g.peak_tflops.fp4 / 1e3,
        "cost_per_hour_usd": s.num_gpus * g.price_per_hour,
        "hbm_total_tib": s.num_gpus * g.memory_gib / 1024,
        "power_kw": s.num_gpus * g.tdp_w / 1e3,
        "nodes": -(-s.num_gpus // s.gpus_per_node),
        "scale_up_domains": -(-s.num_gpus // s.domain),
    }


def scenario_figures(cfg: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Layout figures of a consistent scenario (raises ConfigError otherwise)."""
    from simengine.api import model_flops_per_step

    sc = make_scenario(ModelSpec.model_validate(cfg["model"]), SystemSpec.model_validate(cfg["system"]),
                       StrategySpec.model_validate(cfg["strategy"]))
    tokens = sc.tokens_per_step
    try:
        flops_step = model_flops_per_step(sc)
    except (ValueError, ZeroDivisionError, OverflowError) as e:
        raise ConfigError([("", f"cannot count FLOPs: {e}")]) from e
    s = sc.strategy
    return {
        "dp": float(sc.dp), "num_microbatches": float(sc.num_microbatches), "tokens_per_step": float(tokens),
        "model_flops_per_token": flops_step / tokens, "model_flops_per_step": flops_step,
        "edp": float(sc.edp), "world": float(s.tp * s.pp * s.cp * sc.dp),
        "vocab_padded": float(sc.vocab_padded),
    }
