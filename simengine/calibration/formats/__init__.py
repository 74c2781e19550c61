"""One reader per measured-file format (each module names the tool that writes the format):

* :mod:`.simumax_op_table` — SimuMax's flattened operator-efficiency table (GEMM, grouped GEMM,
  flash attention, memory bandwidth), e.g. ``b200_op_efficiency.csv``;
* :mod:`.xla_matmul` — OpenXLA's measured matmul table;
* :mod:`.generic_gemm` — any ``m,n,k`` CSV with an efficiency, a throughput or a time;
* :mod:`.nccl_tests` (+ :mod:`.nccl_lines`) — raw nccl-tests stdout;
* :mod:`.attention_csv` — flash-attention sweeps (``simengine.measure attention`` writes them);
* :mod:`.grouped_gemm_csv` — grouped (MoE) GEMM sweeps (``simengine.measure grouped-gemm``).

Readers import only ``..csvutil``, ``..source``, ``..peaks``, the config types and (xla_matmul) the
generic reader it extends, never
or the calibration modules above them, so there is no import cycle.
"""
