"""A long interleaved pipeline's memory peaks are read off a shorter order (pipeline.peak_length):
the distinct peak states, in order of first appearance, equal those of the whole order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from simengine.pipeline import _peak_states, order_memory_peaks, peak_length


def _same(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b))


CASES = [(p, v, c) for p in (2, 3, 4, 5, 8) for v in (2, 3, 4) for c in (False, True)]


@pytest.mark.parametrize("p,vpp,combined", CASES)
def test_states_of_the_short_order_are_those_of_the_whole(p, vpp, combined):
    m_short = peak_length("interleaved", p, p * 10**5, vpp, combined)
    for k in (0, 1, 2, 5):
        m = m_short + k * p
        assert peak_length("interleaved", p, m, vpp, combined) == m_short
        assert _same(_peak_states("interleaved", p, m, vpp, combined), _peak_states("interleaved", p, m_short, vpp, combined)), (p, vpp, combined, m)


def test_the_530b_pipeline_reads_140_of_its_1120_micro_batches():
    # Narayanan et al. 2021's PTD-P 530B run: pp 35, vpp 3, 1,120 micro-batches
    assert peak_length("interleaved", 35, 1120, 3) == 140


def test_other_schedules_and_short_pipelines_keep_their_length():
    assert peak_length("1f1b", 8, 1024, 1) == 1024
    assert peak_length("dualpipev", 8, 1024, 1) == 1024
    short = peak_length("interleaved", 4, 4 * 10**5, 2)
    assert peak_length("interleaved", 4, short, 2) == short
    assert peak_length("interleaved", 4, short - 4, 2) == short - 4


def test_peaks_equal_those_of_the_whole_order_for_random_chunk_memory():
    rng = random.Random(7)
    for _ in range(12):
        p, vpp, combined = rng.choice(CASES)
        m = peak_length("interleaved", p, p * 10**5, vpp, combined) + p * rng.randint(1, 6)
        chunks = [[(rng.uniform(1, 5), rng.uniform(0, 3)) for _ in range(vpp)] for _ in range(p)]
        got = order_memory_peaks("interleaved", p, m, vpp, chunks, combined)
        whole = []
        for spec, (counts, running) in zip(chunks, _peak_states("interleaved", p, m, vpp, combined)):
            act, ext = np.array([a for a, _ in spec]), np.array([e for _, e in spec])
            total = counts @ act + ext[running]
            i = int(np.argmax(total))
            whole.append((float(counts[i] @ act), float(ext[running[i]]), int(counts[i].sum())))
        flat = [x for t in got for x in t]
        assert flat == pytest.approx([x for t in whole for x in t], rel=1e-12), (p, vpp, combined, m)
