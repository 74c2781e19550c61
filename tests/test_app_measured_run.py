"""A measured run opened from the Validation page, unedited, that our memory model puts over
capacity: the Estimate page says the verdict is the model's error (the run ran), not the run's."""

from __future__ import annotations

from app_walk import open_page, texts
from ui.config_io import apply_diff
from ui.share import encode_token, size_canonical

# the small preset at a micro-batch no 80 GB GPU holds
TOO_BIG = apply_diff(size_canonical("small"), {"strategy": {"micro_batch_size": 64, "global_batch_size": 512}})


def _estimate(origin: str):
    at = open_page("pages/estimate.py", s=encode_token(TOO_BIG))
    for s in ("model", "system", "strategy"):
        at.session_state[f"cfg.origin.{s}"] = origin
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Does not fit" in texts(at.error)
    return at


def test_a_measured_run_that_does_not_fit_says_whose_error_it_is():
    at = _estimate("measured run narayanan21 / narayanan21_t1_1.7B")
    assert "measured run as it was launched" in texts(at.info)


def test_any_other_scenario_that_does_not_fit_gets_no_such_note():
    at = _estimate("edited")
    assert "measured run" not in texts(at.info)
