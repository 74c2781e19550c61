"""Calibration: measured files → efficiency tables of a SystemSpec, with provenance.

Layers, one concept per module: ``source`` / ``csvutil`` / ``peaks`` (input text, CSV cells, GPU
peaks); ``formats/`` (one reader per file format: SimuMax operator table, OpenXLA matmul table,
generic GEMM CSV, nccl-tests logs, attention / grouped-GEMM / memory sweeps); ``collectives``
(nccl-tests names; kinds and bus factors come from ``simengine.collectives``); ``fit``
(alpha-beta per collective and tier); ``gemm`` (format detection); ``table`` (GEMM interpolation
the cost model reads); ``provenance``, ``curves``; ``calibrate`` (all of it into a SystemSpec);
``store`` (saved user systems); ``cli`` (``python -m simengine calibrate``).
"""

from __future__ import annotations

import importlib

# Names are imported on first use (PEP 562), so importing one module of the package (the CLI,
# the GEMM table the cost model reads) does not load every reader.
_WHERE = {
    "AlphaBetaFit": ".fit",
    "AttentionRow": ".formats.simumax_op_table",
    "B200Tables": ".formats.simumax_op_table",
    "CalibrationSummary": ".calibrate",
    "CollectiveFit": ".calibrate",
    "GemmIndex": ".table",
    "GemmLoad": ".gemm",
    "GroupedGemmRow": ".formats.simumax_op_table",
    "H100_SXM_DENSE_PEAK_TFLOPS": ".peaks",
    "KINDS": ".collectives",
    "MemBw": ".formats.simumax_op_table",
    "NcclLog": ".formats.nccl_tests",
    "NcclRow": ".formats.nccl_tests",
    "NcclTable": ".formats.nccl_tests",
    "attention_efficiency_from_b200": ".formats.simumax_op_table",
    "b200_scalars": ".calibrate",
    "bus_factor": ".collectives",
    "calibrate": ".calibrate",
    "calibrate_with_summary": ".calibrate",
    "causal_fraction": ".formats.simumax_op_table",
    "collective_point": ".fit",
    "detect_gemm_format": ".gemm",
    "fit_alpha_beta": ".fit",
    "fit_table": ".fit",
    "gemm_efficiency": ".table",
    "gemm_index": ".table",
    "grouped_gemm_efficiency": ".formats.simumax_op_table",
    "grouped_gemm_mean": ".formats.simumax_op_table",
    "load_b200_system_efficiency": ".calibrate",
    "load_gemm_csv": ".gemm",
    "parse_nccl_log": ".formats.nccl_tests",
    "read_b200_op_efficiency": ".formats.simumax_op_table",
    "read_gemm_csv": ".gemm",
    "read_xla_matmul_table": ".gemm",
    "tier_bandwidth_gbs": ".fit",
    "tier_for": ".fit",
}

__all__ = [
    "AlphaBetaFit", "AttentionRow", "B200Tables", "CalibrationSummary", "CollectiveFit", "GemmIndex", "GemmLoad",
    "GroupedGemmRow", "H100_SXM_DENSE_PEAK_TFLOPS", "KINDS", "MemBw", "NcclLog", "NcclRow", "NcclTable",
    "attention_efficiency_from_b200", "b200_scalars", "bus_factor", "calibrate", "calibrate_with_summary",
    "causal_fraction", "collective_point", "detect_gemm_format", "fit_alpha_beta", "fit_table", "gemm_efficiency",
    "gemm_index", "grouped_gemm_efficiency", "grouped_gemm_mean", "load_b200_system_efficiency", "load_gemm_csv",
    "parse_nccl_log", "read_b200_op_efficiency", "read_gemm_csv", "read_xla_matmul_table", "tier_bandwidth_gbs",
    "tier_for",
]


def __getattr__(name: str):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
