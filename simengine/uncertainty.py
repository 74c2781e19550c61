"""Uncertainty bands on the headline numbers.

Each part of the step time carries its own relative uncertainty, larger when it rests on default
efficiencies than when a measured table calibrates it; the band is the step time with every part
moved to its low and its high end together (a conservative, fully correlated bound). The
half-widths are the error observed against measured runs (README "Accuracy": memory within
0.8 %, compute-bound B200 rows within ~5 %, communication the least certain), not fitted per case.

Communication the step hides under compute counts too, on the high side only: a hidden collective
that runs longer by the communication's uncertainty may outlast the kernels it hides under (the
bound: all of that extra is exposed), while no error can hide more than all of it. The case that
showed it: torchtitan's async TP, whose reduce-scatter the model first took as hidden and which
stays exposed (README "Published runs"); an overlap-heavy layout (ZeRO-3 gathers under compute)
gets a wider band than one with nothing to hide, so a search ranks the two a tie more readily.

MoE expert GEMMs priced from the scalar grouped-GEMM level (no measured table of grouped shapes:
``cost/compute.py`` ``grouped_measured``) take twice the compute's half-width: against the 108
grouped and 514 plain GEMM shapes measured on B200 (``validation/data/b200_op_efficiency.csv``),
the spread (standard deviation of log(measured / modelled)) of the grouped pricing is 0.32, of the
plain GEMM curve 0.15 (tests/test_uncertainty.py recomputes both). The compute parts then move by
the mix of the two, weighted by the grouped share of the critical rank's compute.
"""

from __future__ import annotations

from .config.system import SystemSpec

# relative half-width per breakdown part: (calibrated, default)
_REL = {
    # measured operator tables did not reduce the error against the B200 runs (README), so the
    # calibrated widths stay equal to the default ones until validation shows otherwise
    "compute": (0.10, 0.10),      # GEMM/attention efficiency: measured table vs default curve
    "comm": (0.20, 0.30),         # alpha-beta collectives: nccl-tests fit vs datasheet bandwidth
    "optimizer": (0.15, 0.15),
    "bubble": (0.10, 0.10),       # follows the stage times that shape it
}
# grouped GEMMs at the scalar level (module docstring); measured grouped shapes take the compute's
# width, as the op is then out of ``grouped_share``
GROUPED_REL = 0.20
_COMPUTE = ("forward_compute", "backward_compute", "recompute")
MEMORY_REL = 0.01


def step_time_band(breakdown_s: dict[str, float], system: SystemSpec, hidden_s: float = 0.0,
                   grouped_share: float = 0.0) -> tuple[float, float]:
    """(low, high) step time: every part at its low / high end; ``hidden_s`` (communication hidden
    under compute on the critical rank) adds its uncertainty to the high end; ``grouped_share``
    (of the critical rank's compute, the grouped GEMMs at the scalar level) widens the compute
    parts' half-width toward the grouped one (module docstring)."""
    e = system.efficiency
    cal_compute = bool(e.gemm_table)
    cal_comm = bool(e.collective_table)
    u = min(max(grouped_share, 0.0), 1.0)
    rel_compute = (1.0 - u) * _REL["compute"][0 if cal_compute else 1] + u * GROUPED_REL
    lo = 0.0
    hi = hidden_s * _REL["comm"][0 if cal_comm else 1]
    for part, t in breakdown_s.items():
        if part in _COMPUTE:
            rel = rel_compute
        elif part.endswith("_comm"):
            rel = _REL["comm"][0 if cal_comm else 1]
        else:
            rel = _REL.get(part, (0.10, 0.10))[0]
        lo += t * (1.0 - rel)
        hi += t * (1.0 + rel)
    return lo, hi


def bands(step_time_s: float, breakdown_s: dict[str, float], system: SystemSpec, tokens: float, mfu: float,
          peak_gib: float, hidden_s: float = 0.0, floor_s: float = 0.0,
          grouped_share: float = 0.0) -> dict[str, tuple[float, float]]:
    """The headline numbers' bands. ``floor_s``: the least step time the hardware allows (every
    GPU's share of the executed FLOPs at the tensor peak, ``estimate.peak_floor_s``): the low end
    never goes below it, so no band promises more than the peak (an estimate at ideal efficiencies
    otherwise had MFU up to 109 % in bf16)."""
    lo, hi = step_time_band(breakdown_s, system, hidden_s, grouped_share)
    lo = min(max(lo, floor_s), step_time_s)   # (the estimate itself is the engine's, left as it is)
    lo, hi = max(lo, 1e-12), max(hi, lo)
    return {
        "step_time_s": (lo, hi),
        "tokens_per_s": (tokens / hi, tokens / lo),
        "mfu": (mfu * step_time_s / hi, mfu * step_time_s / lo),
        "peak_memory_gib": (peak_gib * (1 - MEMORY_REL), peak_gib * (1 + MEMORY_REL)),
    }
