"""Calibration: measured files → efficiency tables of a SystemSpec, with provenance.

Layers, one concept per module: ``source`` / ``csvutil`` / ``peaks`` (input text, CSV cells, GPU
peaks); ``formats/`` (one reader per file format: SimuMax operator table, OpenXLA matmul table,
generic GEMM CSV, nccl-tests logs, attention / grouped-GEMM / memory sweeps); ``collectives``
(nccl-tests names; kinds and bus factors come from ``simengine.collectives``); ``fit``
(alpha-beta per collective and tier); ``gemm`` (format detection); ``table`` (GEMM interpolation
the cost model reads); ``provenance``, ``curves``; ``calibrate`` (all of it into a SystemSpec);
``store`` (saved user systems); ``cli`` (``python -m simengine calibrate``).
"""

# Eager on purpose: ``calibrate`` is both a submodule and a function; importing the names here, after
# the submodules, keeps ``simengine.calibration.calibrate`` the function for every importer.
from .calibrate import b200_scalars, calibrate, calibrate_with_summary, CalibrationSummary, CollectiveFit, load_b200_system_efficiency
from .collectives import bus_factor, KINDS
from .fit import AlphaBetaFit, collective_point, fit_alpha_beta, fit_table, tier_bandwidth_gbs, tier_for
from .formats.nccl_tests import NcclLog, NcclRow, NcclTable, parse_nccl_log
from .formats.simumax_op_table import attention_efficiency_from_b200, AttentionRow, B200Tables, causal_fraction, grouped_gemm_efficiency, grouped_gemm_mean, GroupedGemmRow, MemBw, read_b200_op_efficiency
from .gemm import detect_gemm_format, GemmLoad, load_gemm_csv, read_gemm_csv, read_xla_matmul_table
from .peaks import H100_SXM_DENSE_PEAK_TFLOPS
from .table import gemm_efficiency, gemm_index, GemmIndex

__all__ = [
    "AlphaBetaFit", "AttentionRow", "B200Tables", "CalibrationSummary", "CollectiveFit", "GemmIndex", "GemmLoad",
    "GroupedGemmRow", "H100_SXM_DENSE_PEAK_TFLOPS", "KINDS", "MemBw", "NcclLog", "NcclRow", "NcclTable",
    "attention_efficiency_from_b200", "b200_scalars", "bus_factor", "calibrate", "calibrate_with_summary",
    "causal_fraction", "collective_point", "detect_gemm_format", "fit_alpha_beta", "fit_table", "gemm_efficiency",
    "gemm_index", "grouped_gemm_efficiency", "grouped_gemm_mean", "load_b200_system_efficiency", "load_gemm_csv",
    "parse_nccl_log", "read_b200_op_efficiency", "read_gemm_csv", "read_xla_matmul_table", "tier_bandwidth_gbs",
    "tier_for",
]
