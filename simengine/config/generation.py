"""A GPU's architecture generation from its name: what kernels and layouts it runs (the attention
kernel families of cost/attention_kernels.py, the FP8 GEMM layouts of workload/fp8_recipes.py)."""

from __future__ import annotations

# substrings of the names the presets and torch report
_GENERATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("blackwell", ("b200", "b300", "gb200", "gb300", "blackwell")),
    ("hopper", ("h100", "h200", "h800", "h20", "gh200", "hopper")),
    ("cdna", ("mi300", "mi325", "mi350", "mi355", "instinct")),
    ("ampere", ("a100", "a800", "a40", "a30", "a10")),
    ("ada", ("l40", "l4", "rtx 6000 ada", "4090")),
    ("volta", ("v100",)),
)


def gpu_generation(gpu_name: str) -> str:
    """"blackwell", "hopper", "cdna", "ampere", "ada", "volta" or "unknown"."""
    n = gpu_name.lower()
    for gen, marks in _GENERATIONS:
        if any(m in n for m in marks):
            return gen
    return "unknown"
