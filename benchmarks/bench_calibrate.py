"""Time and peak memory of calibrating from the largest GEMM sweep accepted (200k rows).

Run: python benchmarks/bench_calibrate.py
"""

from __future__ import annotations

import random
import sys
import time
import resource
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simengine import presets  # noqa: E402
from simengine.calibration import calibrate_with_summary  # noqa: E402
from simengine.calibration.csvutil import MAX_ROWS  # noqa: E402


def main() -> None:
    rng = random.Random(0)
    rows = [f"{rng.randint(1, 512) * 64},{rng.randint(1, 512) * 64},{rng.randint(1, 512) * 64},1,bf16,TN,"
            f"{rng.uniform(0.1, 0.9):.4f}" for _ in range(MAX_ROWS)]
    text = ("m,n,k,b,dtype,layout,efficiency\n" + "\n".join(rows)).encode()
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    t0 = time.perf_counter()
    _, summary = calibrate_with_summary(system, text)
    dt = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    print(f"{MAX_ROWS:,} rows ({len(text) / 1e6:.1f} MB): {dt:.1f} s, process peak RSS {peak_kib / 2**20:.2f} GiB, "
          f"{summary.gemm_points:,} points")


if __name__ == "__main__":
    main()
