"""Seed case (MoE issue): DeepSeek-V3 on 1024 GPUs, tp 2, pp 2, ep ∈ {64, 128, 256}: throughput
never drops as the scale-up domain grows 8 → 64 → 128 → 256, and rises once the EP group fits."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from supernode_study import DOMAINS, EPS, base_config  # noqa: E402

from simengine.studies import scale_up_domain_study  # noqa: E402


def test_throughput_rises_with_the_scale_up_domain():
    table = scale_up_domain_study(base_config(), EPS, DOMAINS)
    for ep, row in table.items():
        values = [row[d] for d in DOMAINS]
        assert values == sorted(values), (ep, values)
        # the step where the whole EP group enters one domain is a strict gain
        assert row[ep] > row[DOMAINS[0]] * 1.05, (ep, values)
    # a published supernode study reports +14 % to +72 %; ours must be of that order, not 10×
    best_gain = max(row[DOMAINS[-1]] / row[DOMAINS[0]] for row in table.values())
    assert 1.1 < best_gain < 3.0
