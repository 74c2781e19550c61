"""Uncertainty bands (simengine/uncertainty.py): every part at its low and high end together, and
communication hidden under compute widening the high end only."""

import pytest

from simengine.estimate import estimate
from simengine.uncertainty import _REL, step_time_band

from scenarios import make


def test_the_band_moves_every_part_to_its_ends():
    sc = make("llama3-8b", system={"num_gpus": 8})
    parts = {"forward_compute": 1.0, "backward_compute": 2.0, "tp_comm": 0.5, "bubble": 0.25}
    lo, hi = step_time_band(parts, sc.system)
    c, m, b = _REL["compute"][1], _REL["comm"][1], _REL["bubble"][0]
    assert lo == pytest.approx(3.0 * (1 - c) + 0.5 * (1 - m) + 0.25 * (1 - b))
    assert hi == pytest.approx(3.0 * (1 + c) + 0.5 * (1 + m) + 0.25 * (1 + b))


def test_hidden_communication_widens_the_high_end_only():
    """A hidden collective longer by the communication's uncertainty may spill out from under its
    kernels (at most all of that extra); it can never make the step faster than modelled."""
    sc = make("llama3-8b", system={"num_gpus": 8})
    parts = {"forward_compute": 1.0, "backward_compute": 2.0, "dp_comm": 0.1}
    lo0, hi0 = step_time_band(parts, sc.system)
    lo1, hi1 = step_time_band(parts, sc.system, hidden_s=0.8)
    assert lo1 == lo0 and hi1 == pytest.approx(hi0 + 0.8 * _REL["comm"][1])


def test_an_estimate_that_hides_its_gradient_reduce_has_the_wider_band():
    """The same step with the DP reduce overlapped: its band's high end carries the hidden part."""
    cfg = {"system": {"num_gpus": 16}, "strategy": {"tp": 2, "global_batch_size": 64, "seq_len": 4096,
                                                    "overlap_grad_reduce": True}}
    rep = estimate(make("llama3-8b", **cfg))
    hidden = sum(rep.hidden_comm_s.values())
    assert hidden > 0
    lo, hi = step_time_band(rep.breakdown_s, make("llama3-8b", **cfg).system)
    assert rep.uncertainty["step_time_s"][0] == pytest.approx(lo)
    assert rep.uncertainty["step_time_s"][1] == pytest.approx(hi + hidden * _REL["comm"][1])
