"""Error table on shared/validation/b200_megatron_runs.csv (20 Megatron-LM runs on 8x B200).

Run: python benchmarks/validate_b200.py   (prints the README's markdown tables)
Columns: measured step time and allocated peak; simengine with the datasheet preset only, and
calibrated with the measured B200 operator table + NCCL fits; the peer SimuMax v1.2's own
prediction (simumax_* columns of the CSV).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simengine import presets  # noqa: E402
from simengine.api import estimate  # noqa: E402
from simengine.validation import b200_runs, b200_system  # noqa: E402

DATA = ROOT.parent / "shared" / "validation"


def rows():
    csv_text = (DATA / "b200_megatron_runs.csv").read_text()
    preset = presets.load_preset("systems", "b200-sxm-180gb")
    fits = json.loads((ROOT / "presets" / "calibration" / "b200-nccl-fits.json").read_text())
    calibrated = b200_system(preset, DATA / "b200_op_efficiency.csv", fits)
    plain_runs = b200_runs(csv_text, preset)
    cal_runs = b200_runs(csv_text, calibrated)
    for plain, cal in zip(plain_runs, cal_runs, strict=True):
        a, b = estimate(plain.config), estimate(cal.config)
        yield plain, a, b


def pct(x: float, ref: float) -> float:
    return (x / ref - 1.0) * 100.0


def main() -> None:
    out = list(rows())
    print("| case | measured ms | simengine (preset) | simengine (calibrated) | SimuMax | measured GiB | simengine GiB | SimuMax GiB |")
    print("|---|---|---|---|---|---|---|---|")
    err = {"preset": [], "calibrated": [], "peer": [], "mem": [], "peer_mem": []}
    for run, a, b in out:
        ta, tb = a.step_time_s * 1e3, b.step_time_s * 1e3
        err["preset"].append(pct(ta, run.real_ms))
        err["calibrated"].append(pct(tb, run.real_ms))
        err["peer"].append(pct(run.peer_ms, run.real_ms))
        err["mem"].append(pct(a.peak_memory_gib, run.real_alloc_gib))
        err["peer_mem"].append(pct(run.peer_alloc_gib, run.real_alloc_gib))
        print(f"| {run.case} | {run.real_ms:.1f} | {ta:.1f} ({err['preset'][-1]:+.1f} %) | {tb:.1f} ({err['calibrated'][-1]:+.1f} %) | "
              f"{run.peer_ms:.1f} ({err['peer'][-1]:+.1f} %) | {run.real_alloc_gib:.2f} | {a.peak_memory_gib:.2f} ({err['mem'][-1]:+.2f} %) | "
              f"{run.peer_alloc_gib:.2f} ({err['peer_mem'][-1]:+.2f} %) |")
    print()
    print("| | time MAPE | worst time error | memory MAPE |")
    print("|---|---|---|---|")
    mape = lambda v: sum(abs(x) for x in v) / len(v)  # noqa: E731
    worst = lambda v: max(v, key=abs)  # noqa: E731
    print(f"| simengine, datasheet preset | {mape(err['preset']):.1f} % | {worst(err['preset']):+.1f} % | {mape(err['mem']):.2f} % |")
    print(f"| simengine, calibrated (op table + NCCL fits) | {mape(err['calibrated']):.1f} % | {worst(err['calibrated']):+.1f} % | {mape(err['mem']):.2f} % |")
    print(f"| SimuMax v1.2 | {mape(err['peer']):.1f} % | {worst(err['peer']):+.1f} % | {mape(err['peer_mem']):.2f} % |")


if __name__ == "__main__":
    main()
