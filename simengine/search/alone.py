"""A priced phase run alone, the rule every step-time bound of the search prices phases by:
its compute times the straggler factor plus, per collective, the contention and the exposed part
that ``sim/overlap.py`` ``resolve`` gives it with nothing else in flight (``phase_alone``), and
the same for one kind of collective (``ep_alone``: the expert all-to-all, ``zero_alone``: the
ZeRO-2/3 collectives)."""

from __future__ import annotations

from ..sim.inputs import CommTask
from ..sim.overlap import by_kind


_MAY_HIDE = ("dp_comm", "ep_comm")


def ep_alone(pc, slowdown: float) -> float:
    """What a phase's expert all-to-all (``ep_comm``) adds when it runs alone (``_kind_alone``)."""
    return _kind_alone(pc, "ep_comm", slowdown)


def phase_alone(pc, with_tp: bool, slowdown: float = 1.0, k: float = 1.0) -> float:
    """One priced phase run alone: its compute × the straggler factor ``k`` plus, for each of
    its collectives, the contention and the exposed part at ``slowdown`` (sim/overlap.py
    ``resolve``, the one rule: what a value slot of the engine holds — ``values.py``: F = compute·k
    + contention, then the exposed tasks on the compute stream). Nothing else in flight, so no
    more contention than this. The collectives some overlap may hide entirely (``_MAY_HIDE``) are
    left out, and without ``with_tp`` the TP collectives too (userbuffers overlap may hide them
    all). Every collective is resolved on its own, so the result is linear in a phase's blocks."""

    tasks = tuple(CommTask(*t) for t in pc.tasks()
                  if t[0] not in _MAY_HIDE and (with_tp or t[0] != "tp_comm"))
    _, exposed, extra = by_kind(tasks, slowdown)
    return pc.compute_s * k + extra + sum(exposed)


def zero_alone(pc, slowdown: float) -> float:
    """What a phase's ZeRO-2/3 collectives (``dp_comm``) add when it runs alone (``_kind_alone``)."""
    return _kind_alone(pc, "dp_comm", slowdown)


def _kind_alone(pc, kind: str, slowdown: float) -> float:
    """What a phase's collectives of one kind add when it runs alone: per collective its
    contention on the compute and its exposed part (sim/overlap.py ``resolve``, the rule
    ``phase_alone`` applies to the others; linear in the phase's blocks)."""

    if not any(key[0] == kind and n > 0 for key, n in pc.comm.items()):  # none of that kind (a dense model's ep_comm)
        return 0.0
    tasks = tuple(CommTask(*t) for t in pc.tasks() if t[0] == kind)
    _, exposed, extra = by_kind(tasks, slowdown)
    return extra + sum(exposed)
