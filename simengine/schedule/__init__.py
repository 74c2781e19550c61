"""Pipeline schedules as pure order generators, keyed by the config's ``schedule`` names.

One module = one schedule: every module of this package that defines a module-level
``SCHEDULE`` (a :class:`Schedule`) is registered under ``SCHEDULE.name``, found with
``pkgutil.iter_modules`` — adding a schedule is one new file (plus its test file).
``StrategySpec.schedule`` is checked against this registry and the JSON schema's enum of names
is generated from it.

``get_schedule(name).orders(p, m, vpp)`` → per-rank ``list[Action]``; the simulator
(``simengine.sim``) turns orders + costs into time.
"""

from __future__ import annotations

import importlib
import pkgutil

from .action import Action, count_max_inflight
from .base import Schedule


def _discover() -> dict[str, Schedule]:
    found: list[Schedule] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in ("action", "base") or info.name.startswith("_"):
            continue
        sched = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SCHEDULE", None)
        if isinstance(sched, Schedule):
            found.append(sched)
    found.sort(key=lambda s: (s.menu_order, s.name))
    names = [s.name for s in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two schedule modules share a name: {names}")
    return {s.name: s for s in found}


SCHEDULES: dict[str, Schedule] = _discover()
SCHEDULE_NAMES: tuple[str, ...] = tuple(SCHEDULES)


def get_schedule(name: str) -> Schedule:
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(f"unknown schedule '{name}'; known: {', '.join(SCHEDULES)}") from None


__all__ = ["Action", "Schedule", "SCHEDULES", "SCHEDULE_NAMES", "count_max_inflight", "get_schedule"]
