"""The one place that decides how much of a collective runs under computation.

Cost (``cost/phase.py``) only says what runs beside what: a collective of ``seconds`` may run
beside a compute window of ``window_s`` seconds (its partner GEMM; 0 = nothing to hide behind)
of which a share ``share`` leaves the SMs free for it. Here that becomes what the simulator
schedules: the hidden part runs on the rank's comm stream beside the compute, the rest is
exposed on the compute stream, and the compute it overlaps is slowed by contention.

Contention model (stated once): while a communication kernel runs beside a compute kernel, the
compute runs ``slowdown`` times slower (NCCL / userbuffer kernels take SMs and HBM bandwidth;
StrategySpec.overlap_slowdown). With window g = window_s·share and comm t:

    hidden  = min(t, g·slowdown)                      (the comm that fits in the slowed window)
    extra   = (slowdown − 1) · min(g, t / slowdown)   (compute lost to contention)
    exposed = t − hidden

So overlap never makes a phase slower than running the comm after the compute: hidden − extra is
g (t ≥ g·slowdown) or t/slowdown (otherwise), both ≥ 0.
"""

from __future__ import annotations

from typing import Any, Iterable

from .inputs import CommTask


def resolve(t: CommTask, slowdown: float) -> tuple[float, float, float]:
    """(hidden, exposed, extra compute) seconds of ``t`` (all ``t.count`` repeats)."""
    g = t.window_s * t.share
    if g <= 0.0 or t.seconds <= 0.0:
        return 0.0, t.seconds * t.count, 0.0
    hidden = min(t.seconds, g * slowdown)
    extra = (slowdown - 1.0) * min(g, t.seconds / slowdown)
    return hidden * t.count, (t.seconds - hidden) * t.count, extra * t.count


def kinds(tasks: Iterable[CommTask]) -> tuple[tuple[str, bool], ...]:
    """Distinct kinds in order of first appearance, each with whether any of its collectives has
    a compute window (only those get a hidden task on the comm stream; every kind gets an exposed
    task on the compute stream). A structural fact of the workload, independent of durations."""
    out: dict[str, bool] = {}
    for t in tasks:
        out[t.kind] = out.get(t.kind, False) or (t.window_s > 0 and t.share > 0 and t.seconds > 0)
    return tuple(out.items())


def by_kind(tasks: tuple[CommTask, ...], slowdown: float) -> tuple[list[float], list[float], float]:
    """Hidden and exposed seconds per kind (in ``kinds`` order) and the total extra compute."""
    hid: dict[str, float] = {}  # kinds in order of first appearance (``kinds``)
    exp: dict[str, float] = {}
    extra = 0.0
    for t in tasks:
        h, e, x = resolve(t, slowdown)
        k = t.kind
        if k in hid:
            hid[k] += h
            exp[k] += e
        else:  # 0.0 + h == h: the same sums as starting each kind at zero
            hid[k] = 0.0 + h
            exp[k] = 0.0 + e
        extra += x
    return list(hid.values()), list(exp.values()), extra


def piece_groups(infos) -> tuple[int, tuple[tuple[Any, tuple[tuple[int, int], ...]], ...]]:
    """The structure of ``piece_durations``' input, once per compiled structure: the slot count
    and, per run of pieces sharing a base (one chunk's pieces), its first info and the
    (slot, bucket beside) of each piece."""
    groups: list[tuple[Any, list[tuple[int, int]]]] = []
    last = None
    for i, info in enumerate(infos):
        if info is None:  # a bucket not tied to a piece (no overlap): slot unused (0.0)
            continue
        key = info[:-1]
        if key != last or not groups:
            groups.append((info, []))
            last = key
        groups[-1][1].append((i, info[-1]))
    return len(infos), tuple((info, tuple(items)) for info, items in groups)


def piece_durations(groups, buckets: tuple[float, ...], base_of, slowdown: float) -> list[float]:
    """Durations of the compute pieces a DP bucket runs beside (``piece_groups``; bucket -1 =
    none): the same rule with the piece as the window, so only the overlapped stretch slows."""
    n, runs = groups
    k = slowdown - 1.0
    out = [0.0] * n
    for info, items in runs:  # the pieces of one chunk share their base
        base = base_of(info)
        if base <= 0.0:
            for i, _ in items:
                out[i] = base
            continue
        for i, j in items:
            b = buckets[j] if j >= 0 else 0.0
            if b > 0.0:
                x = b / slowdown  # base + k · min(base, b / slowdown)
                out[i] = base + k * (x if x < base else base)
            else:
                out[i] = base
    return out


def paired(tasks: tuple[CommTask, ...], partner_s: float, slowdown: float, kind: str
           ) -> tuple[list[float], list[float], float, float]:
    """A member of an overlapped F&B pair: its collectives of ``kind`` (the expert all-to-all)
    run beside the partner's ``partner_s`` of compute instead of their own window — all of them
    as one collective of their total length, since the fine-grained schedule interleaves the two
    micro-batches layer by layer (Megatron-Core ``TransformerLayerSchedulePlan.run``; DualPipe
    ``overlapped_forward_backward``), a2a of one beside attention/MLP of the other. Approximation:
    per layer each all-to-all only has one sub-block of the partner to hide behind; here the
    partner's whole compute is the window (an upper bound on what hides). The rest resolve as
    alone. Returns hidden and exposed seconds per kind (``kinds`` order), the contention on the
    member's own compute, and the contention on the partner's compute (same rule as ``resolve``)."""
    names = kinds(tasks)
    idx = {k: i for i, (k, _) in enumerate(names)}
    hid = [0.0] * len(names)
    exp = [0.0] * len(names)
    own = total = 0.0
    for t in tasks:
        if t.kind == kind:
            total += t.seconds * t.count
            continue
        h, e, x = resolve(t, slowdown)
        i = idx[t.kind]
        hid[i] += h
        exp[i] += e
        own += x
    partner = 0.0
    if total > 0.0:
        h, e, partner = resolve(CommTask(kind, total, partner_s, 1.0), slowdown)
        hid[idx[kind]] += h
        exp[idx[kind]] += e
    return hid, exp, own, partner


def phase_seconds(compute_s: float, tasks: tuple[CommTask, ...], slowdown: float) -> float:
    """A phase run alone (nothing else in flight): its compute with contention plus the
    exposed communication — the per-layer times papers report."""
    _, exp, extra = by_kind(tasks, slowdown)
    return compute_s + extra + sum(exp)
