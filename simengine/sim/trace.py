"""Timeline → Chrome Trace Event Format (loads in Perfetto / chrome://tracing).

Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU —
complete events ``ph: "X"`` (ts/dur in µs), metadata ``ph: "M"`` (process_name, thread_name,
thread_sort_index) and counter events ``ph: "C"`` for memory. pid = pp rank, tid = stream.
"""

from __future__ import annotations

from .layout import STREAMS
from .timeline import Timeline

_US = 1e6
_TID = {name: i for i, name in enumerate(STREAMS)}


def to_chrome_trace(timeline: Timeline, name: str = "simengine") -> dict:
    ev: list[dict] = []
    for r in range(timeline.num_ranks):
        ev.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": f"{name} pp rank {r}"}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}})
        for sname, tid in _TID.items():
            ev.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": sname}})
            ev.append({"ph": "M", "name": "thread_sort_index", "pid": r, "tid": tid, "args": {"sort_index": tid}})
    for sp in timeline.spans:
        label = sp.kind if sp.mb < 0 else f"{sp.kind}{sp.mb}" + (f".{sp.chunk}" if sp.chunk > 0 else "")
        ev.append({
            "ph": "X", "name": label, "cat": sp.stream, "pid": sp.rank, "tid": _TID.get(sp.stream, 0),
            "ts": sp.start_s * _US, "dur": (sp.end_s - sp.start_s) * _US,
            "args": {"kind": sp.kind, "mb": sp.mb, "chunk": sp.chunk},
        })
    for r, series in enumerate(timeline.memory):
        for t, b in series:
            ev.append({"ph": "C", "name": "memory", "pid": r, "tid": 0, "ts": t * _US, "args": {"GiB": b / 2**30}})
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {"name": name, "step_time_s": timeline.step_time_s},
    }
