"""nccl-tests command lines for the collectives and group sizes a scenario uses.

One command per (collective, ranks): nccl-tests' ``<name>_perf`` binary (github.com/NVIDIA/nccl-tests,
``build/``) from ``-b`` to ``-e`` bytes doubling (``-f 2``), one GPU per process (``-g 1``),
``-c 0`` (no correctness check, so only timing is measured), 5 warm-up and 20 timed iterations
(``-w 5 -n 20``). Launched with ``mpirun -np <ranks> -N <per node>`` (Open MPI) or, with
``launcher="srun"``, ``srun -n <ranks> --ntasks-per-node <per node>``. The log names carry the
collective and the rank count (``all_reduce_16gpu.log``), hints ``calibrate`` reads.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from .shapes import CollectiveNeed

BINARIES = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf", "reduce_scatter": "reduce_scatter_perf",
            "all_to_all": "alltoall_perf", "p2p": "sendrecv_perf"}


@dataclass(frozen=True)
class NcclCommand:
    need: CollectiveNeed
    argv: tuple[str, ...]
    log_name: str

    @property
    def line(self) -> str:
        return shlex.join(self.argv)


def commands(needs: tuple[CollectiveNeed, ...], tests_dir: str, gpus_per_node: int,
             launcher: str = "mpirun") -> list[NcclCommand]:
    out = []
    binary_dir = Path(tests_dir) / "build"
    for need in needs:
        per_node = min(need.ranks, gpus_per_node)
        lo, hi = max(need.min_bytes, 8), max(need.max_bytes, 1 << 20)
        exe = str(binary_dir / BINARIES[need.kind])
        test = [exe, "-b", str(lo), "-e", str(hi), "-f", "2", "-g", "1", "-c", "0", "-w", "5", "-n", "20"]
        if launcher == "srun":
            launch = ["srun", "-n", str(need.ranks), "--ntasks-per-node", str(per_node)]
        else:
            launch = ["mpirun", "-np", str(need.ranks), "-N", str(per_node)]
        out.append(NcclCommand(need, tuple(launch + test), f"{need.kind}_{need.ranks}gpu.log"))
    return out
