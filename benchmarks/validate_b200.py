"""Error table on the 20 Megatron-LM runs on 8x B200 (simengine/validation/data/b200_megatron_runs.csv).

Run: python benchmarks/validate_b200.py   (prints the README's markdown tables)
A thin wrapper: the numbers come from ``python -m simengine validate --source b200 --json`` (datasheet
preset) and ``... --calibrated`` (measured op table + NCCL fits), rendered by tools/readme_tables.py,
which also writes them into README.md (``--write``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from readme_tables import b200_tables, validate_json  # noqa: E402

if __name__ == "__main__":
    print(b200_tables(validate_json("--source", "b200"), validate_json("--source", "b200", "--calibrated")))
