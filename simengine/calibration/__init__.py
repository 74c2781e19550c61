"""Calibration: measured GEMM sweeps and raw nccl-tests output → efficiency tables of a SystemSpec.

Modules, one concept each: ``source`` (text/bytes/path in), ``nccl_lines`` + ``nccl`` (nccl-tests
stdout parser), ``collectives`` (bus factors), ``fit`` (alpha-beta per collective, network tier),
``csvutil`` + ``gemm`` (GEMM CSV readers), ``b200`` (SimuMax B200 file: attention, grouped GEMM,
memory rows), ``table`` (fast GEMM efficiency lookup), ``calibrate`` (all of it into a SystemSpec).
"""

from .formats.simumax_op_table import (
    AttentionRow, B200Tables, GroupedGemmRow, MemBw, attention_efficiency_from_b200, causal_fraction,
    grouped_gemm_efficiency, grouped_gemm_mean, read_b200_op_efficiency,
)
from .calibrate import (
    CalibrationSummary, CollectiveFit, b200_scalars, calibrate, calibrate_with_summary, load_b200_system_efficiency,
)
from .collectives import KINDS, bus_factor
from .fit import AlphaBetaFit, collective_point, fit_alpha_beta, fit_table, tier_bandwidth_gbs, tier_for
from .gemm import GemmLoad, detect_gemm_format, load_gemm_csv, read_gemm_csv, read_xla_matmul_table
from .peaks import H100_SXM_DENSE_PEAK_TFLOPS
from .formats.nccl_tests import NcclLog, NcclRow, NcclTable, parse_nccl_log
from .table import GemmIndex, gemm_efficiency, gemm_index

__all__ = [
    "AlphaBetaFit", "AttentionRow", "B200Tables", "CalibrationSummary", "CollectiveFit", "GemmIndex", "GemmLoad",
    "GroupedGemmRow", "H100_SXM_DENSE_PEAK_TFLOPS", "KINDS", "MemBw", "NcclLog", "NcclRow", "NcclTable",
    "attention_efficiency_from_b200", "b200_scalars", "bus_factor", "calibrate", "calibrate_with_summary",
    "causal_fraction", "collective_point", "detect_gemm_format", "fit_alpha_beta", "fit_table", "gemm_efficiency",
    "gemm_index", "grouped_gemm_efficiency", "grouped_gemm_mean", "load_b200_system_efficiency", "load_gemm_csv",
    "parse_nccl_log", "read_b200_op_efficiency", "read_gemm_csv", "read_xla_matmul_table", "tier_bandwidth_gbs",
    "tier_for",
]
