"""Small what-if studies built on ``estimate`` (used by the README tables, tests and the studio)."""

from __future__ import annotations

import copy
from typing import Any

from .api import estimate


def scale_up_domain_study(base: dict[str, Any], eps: tuple[int, ...], domains: tuple[int, ...]) -> dict[int, dict[int, float]]:
    """tokens/s for each expert-parallel size × scale-up domain size (GPUs per NVLink domain).

    The seed case of the MoE issue: DeepSeek-V3 on 1024 GPUs, tp 2, pp 2, ep ∈ {64, 128, 256},
    domain ∈ {8, 64, 128, 256} — larger domains keep the expert all-to-all on the fast tier.
    """
    out: dict[int, dict[int, float]] = {}
    for ep in eps:
        out[ep] = {}
        for dom in domains:
            cfg = copy.deepcopy(base)
            cfg["strategy"]["ep"] = ep
            cfg["system"]["scale_up"] = {**cfg["system"]["scale_up"], "domain_size": dom}
            out[ep][dom] = estimate(cfg).tokens_per_s
    return out
