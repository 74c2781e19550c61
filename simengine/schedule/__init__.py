"""Pipeline schedules as pure order generators, keyed by the config's ``schedule`` names.

``get_schedule(name).orders(p, m, vpp)`` → per-rank ``list[Action]``; the simulator
(``simengine.sim``) turns orders + costs into time.
"""

from __future__ import annotations

from . import dualpipev, gpipe, interleaved, one_f_one_b, zb_h1
from .action import Action, count_max_inflight
from .base import Schedule

SCHEDULES: dict[str, Schedule] = {
    m.NAME: m.SCHEDULE for m in (gpipe, one_f_one_b, interleaved, zb_h1, dualpipev)
}


def get_schedule(name: str) -> Schedule:
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(f"unknown schedule '{name}'; known: {', '.join(SCHEDULES)}") from None


__all__ = ["Action", "Schedule", "SCHEDULES", "count_max_inflight", "get_schedule"]
