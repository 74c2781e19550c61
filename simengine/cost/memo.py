"""Reuse of priced chunks across scenarios that share what the chunk cost depends on.

SimuMax separates a unit's local cost from the pipeline layout (``search_best_parallel_strategy``
prices a layer once per tp/cp/ep/micro-batch and re-uses it across pipeline layouts). Here: the
workload of one micro-batch (``workload.builder.build_workload``) and its per-block prices
(``cost.stage._block_costs``) do not depend on the ZeRO stage, the recompute policy or the DP
overlap flags, which the strategy search varies most; a search re-prices them for every one.

Hook (one line each in ``cost/stage.py::build_plan``, for the lead):
    wl = memo.workload(sc, build_workload)
    costs = memo.block_costs(wl, cm, comm, st.tp_comm_overlap, st.overlap_slowdown, _block_costs)

Both return the cached objects themselves; ``build_plan`` only reads them (it accumulates into
fresh ``PhaseCost`` objects), so sharing is safe. Bounded LRU: no growth across a long session.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MAX_ENTRIES = 256
# strategy fields the workload and its prices do not read (stage.py applies them afterwards)
_IGNORED = frozenset({"name", "zero_stage", "recompute", "recompute_num_layers", "overlap_grad_reduce", "overlap_param_gather"})

_WORKLOADS: OrderedDict[tuple, Any] = OrderedDict()
_COSTS: OrderedDict[tuple, Any] = OrderedDict()


def _get(store: OrderedDict, key: tuple, keep: tuple, make: Callable[[], Any]) -> Any:
    hit = store.get(key)
    if hit is not None:
        store.move_to_end(key)
        return hit[1]
    val = make()
    store[key] = (keep, val)   # the objects whose ids are in the key stay alive with the value
    while len(store) > MAX_ENTRIES:
        store.popitem(last=False)
    return val


def workload_key(sc) -> tuple:
    st = sc.strategy
    fields = tuple((k, getattr(st, k)) for k in type(st).model_fields if k not in _IGNORED)
    return (id(sc.model), id(sc.system), fields)


def workload(sc, build: Callable[[Any], Any]) -> Any:
    """``build(sc)`` once per (model, system, strategy without the ignored fields); the model and
    system are keyed by identity (the search validates each once per process)."""
    return _get(_WORKLOADS, workload_key(sc), (sc.model, sc.system), lambda: build(sc))


def block_costs(wl, cm, comm, tp_overlap: bool, slowdown: float, price: Callable[..., Any]) -> Any:
    """``price(wl, cm, comm, tp_overlap, slowdown)`` once per workload object and overlap setting.
    ``cm``/``comm`` are rebuilt from the same scenario fields the workload key holds."""
    return _get(_COSTS, (id(wl), bool(tp_overlap), float(slowdown)), (wl,), lambda: price(wl, cm, comm, tp_overlap, slowdown))


def clear() -> None:
    _WORKLOADS.clear()
    _COSTS.clear()
