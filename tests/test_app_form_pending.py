"""Out-of-range values: the error sits next to the field, the user's value stays in the field
(also after visiting another page), and every page says that results use the last valid value."""

from __future__ import annotations

import pytest

from app_walk import open_app, open_groups, scenario, texts
from ui.share import size_canonical


def widget(at, dotted):
    for w in at.number_input:
        if w.key and w.key.split(".", 1)[-1] == dotted:
            return w
    raise AssertionError(dotted)


@pytest.mark.parametrize("page, dotted, bad, needle", [
    ("pages/model.py", "model.num_layers", -5, "greater than or equal to 1"),
    ("pages/strategy.py", "strategy.zero_stage", 4, "less than or equal to 3"),
])
def test_out_of_range_value_stays_with_its_error_and_results_say_stale(page, dotted, bad, needle):
    section = dotted.split(".")[0]
    at = open_groups(open_app(page, preset="medium"), section)
    w = widget(at, dotted)
    assert not w.proto.has_min and not w.proto.has_max  # the browser sends the value, it does not block it
    good = w.value
    w.set_value(bad).run()
    assert not at.exception
    assert needle in texts(at.error)
    assert widget(at, dotted).value == bad
    assert scenario(at)[section] == size_canonical("medium")[section]  # nothing computed from the bad value
    warn = texts(at.warning)
    shown = int(good) if isinstance(good, float) and good.is_integer() else good   # an integer field's float widget (ui/form.py)
    assert "Not applied" in warn and f"in use: {shown}" in warn
    at.switch_page("pages/estimate.py").run()
    assert "Not applied" in texts(at.warning) and f"the {section} has invalid edits" in texts(at.warning)
    at.switch_page(page).run()
    assert widget(at, dotted).value == bad and needle in texts(at.error)  # the user's value is kept
    widget(at, dotted).set_value(good).run()
    assert "Not applied" not in texts(at.warning) and not at.error
    at.switch_page("pages/estimate.py").run()
    assert "Not applied" not in texts(at.warning)


def test_pending_values_are_dropped_when_the_section_is_replaced():
    at = open_app("pages/model.py")
    widget(at, "model.num_layers").set_value(-5).run()
    at.switch_page("pages/home.py").run()
    at.button(key="size.medium").click().run()
    at.switch_page("pages/model.py").run()
    assert widget(at, "model.num_layers").value == size_canonical("medium")["model"]["num_layers"]
    assert "Not applied" not in texts(at.warning)


def test_a_what_if_schedule_is_noted_under_the_schedule_field():
    """The medium scenario with DualPipe under Megatron-Core: valid, so no error, but the Strategy
    editor says under the schedule field that Megatron-Core does not ship it (config/notes.py), and the
    note goes when the stack runs the schedule (PyTorch's pipelining runs DualPipeV)."""
    from ui.share import link_params

    cfg = size_canonical("medium")
    cfg["strategy"].update(schedule="dualpipe", vpp=1, global_batch_size=512)
    at = open_groups(open_app("pages/strategy.py", **link_params(cfg)), "strategy")
    assert not at.exception and not at.error, texts(at.error)
    assert "Megatron-Core does not ship 'dualpipe'" in texts(at.warning)
    cfg["strategy"].update(schedule="dualpipev", framework="torch-native", tp_comm_overlap=False)
    at = open_groups(open_app("pages/strategy.py", **link_params(cfg)), "strategy")
    assert not at.exception and not at.error, texts(at.error)
    assert "does not ship" not in texts(at.warning)
