"""Timeline (engine object) → plain tables, and Gantt/memory frames that stay small (pure).

Written against ``simengine.sim.timeline.Timeline`` but reads it defensively (``getattr`` with
fallbacks), so a renamed attribute degrades one figure instead of breaking the page.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .theme import TIME_LABELS, scale, span_category
from .units import fmt_pct, fmt_time

SPAN_COLUMNS = ["rank", "stream", "kind", "mb", "chunk", "start_s", "end_s"]
STREAM_ORDER = ["compute", "comm", "pp", "dp"]
# Individual spans up to this many in the window (medium: ~300 a row, ~4 px each on the ~1,300 px
# chart); beyond it a span is a pixel or two wide, so time bins show the same picture with far
# fewer marks (4,224 exact spans cost headless Chromium ~3x the CPU of their ~300 merged bins,
# benchmarks/bench_studio.py). Narrowing the window brings the individual spans back.
MAX_EXACT_SPANS = 2500
GANTT_BINS = 320
# adjacent bins of a row whose phases' shares round to the same quarter are one bar (its shares are
# the run's own, exact): the binned view is an overview, a zoom re-bins the window finer. At 0.05 the
# medium preset's compute rows, whose F/B/TP pattern does not line up with the bins, drew 2,325
# marks (292 kB of chart data); at 0.25, 677 (86 kB)
MERGE_STEP = 0.25
MEMORY_POINTS = 1500          # per rank, at most
MEMORY_TOTAL_POINTS = 20_000  # all ranks together, at most (what the memory chart sends)
MAX_GANTT_RANKS = 64          # above this many ranks the Gantt draws a representative subset
GANTT_SUBSET = 16             # ranks in that subset (first, last, worst bubble, evenly spaced)


MIN_WINDOW_MS = 0.01          # the window slider's step: a narrower window is widened to this


def usable_window(lo: float, hi: float, total_ms: float) -> tuple[float, float]:
    """The time window (ms) the Gantt draws: the slider's, widened about its middle to at least
    ``MIN_WINDOW_MS`` (both handles on one point would draw an empty chart on a zero-width axis),
    kept inside [0, total_ms]."""
    lo, hi = min(lo, hi), max(lo, hi)
    width = min(MIN_WINDOW_MS, total_ms)
    if hi - lo >= width:
        return lo, hi
    mid = min(max((lo + hi) / 2.0, width / 2.0), total_ms - width / 2.0)
    return mid - width / 2.0, mid + width / 2.0


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
        if isinstance(obj, dict) and n in obj:
            return obj[n]
    return default


def _per_rank(value: Any, n: int) -> list:
    if value is None:
        return [None] * n
    if isinstance(value, (int, float)):
        return [value] * n
    out = list(value)
    return out + [None] * (n - len(out))


def _span_rows(spans: Any) -> list[tuple]:
    """Span rows read defensively (any object or dict with the fields, or their older names)."""
    rows = []
    for sp in spans:
        rows.append((
            int(_attr(sp, "rank", default=0)), str(_attr(sp, "stream", default="compute")),
            str(_attr(sp, "kind", "name", default="?")), int(_attr(sp, "mb", "microbatch", default=-1)),
            int(_attr(sp, "chunk", default=-1)), float(_attr(sp, "start_s", "start", default=0.0)),
            float(_attr(sp, "end_s", "end", default=0.0)),
        ))
    return rows


def timeline_tables(tl: Any) -> dict[str, Any]:
    """{'spans', 'ranks', 'memory' (DataFrames), 'step_time_s'} from a Timeline."""
    spans = _attr(tl, "spans", default=()) or ()
    if spans and tuple(getattr(spans[0], "_fields", ())) == tuple(SPAN_COLUMNS):  # the engine's Span
        sdf = pd.DataFrame.from_records(spans, columns=SPAN_COLUMNS)  # one pass in C, no per-field lookups
    else:
        sdf = pd.DataFrame(_span_rows(spans), columns=SPAN_COLUMNS)
    step = float(_attr(tl, "step_time_s", default=float(sdf["end_s"].max()) if len(sdf) else 0.0))
    memory = _attr(tl, "memory", "memory_over_time", default=()) or ()
    n_ranks = int(_attr(tl, "num_ranks", default=0) or 0) or max(
        (int(sdf["rank"].max()) + 1) if len(sdf) else 0, len(memory))
    bubble = _per_rank(_attr(tl, "bubble_fraction"), n_ranks)
    compute = _per_rank(_attr(tl, "compute_s"), n_ranks)
    exposed = _per_rank(_attr(tl, "exposed_comm_s"), n_ranks)
    hidden = _per_rank(_attr(tl, "hidden_comm_s"), n_ranks)
    peak = _per_rank(_attr(tl, "peak_memory_bytes"), n_ranks)
    critical = int(_attr(tl, "critical_rank", default=0) or 0)  # the engine's (sim/metrics.py), as Estimate
    rank_rows = []
    for r in range(n_ranks):
        row: dict[str, Any] = {"rank": r, "critical": r == critical, "bubble_fraction": bubble[r], "compute_s": compute[r],
                               "exposed_comm_s": sum((exposed[r] or {}).values()) if isinstance(exposed[r], dict) else exposed[r],
                               "hidden_comm_s": sum((hidden[r] or {}).values()) if isinstance(hidden[r], dict) else hidden[r],
                               "peak_gib": None if peak[r] is None else float(peak[r]) / 2**30}
        if isinstance(exposed[r], dict):
            for k, v in exposed[r].items():
                row[f"exposed:{k}"] = float(v)
        rank_rows.append(row)
    mem_rows = []
    for r, series in enumerate(memory):
        for point in series or ():
            t, b = point[0], point[1]
            mem_rows.append((r, float(t), float(b)))
    mdf = pd.DataFrame(mem_rows, columns=["rank", "t_s", "bytes"])
    return {"spans": sdf, "ranks": pd.DataFrame(rank_rows), "memory": mdf, "step_time_s": step}


RANK_COLUMN_NAMES = {"bubble_fraction": "bubble [%]", "compute_s": "compute [ms]", "exposed_comm_s": "exposed comm [ms]",
                     "hidden_comm_s": "hidden comm [ms]", "peak_gib": "peak [GiB]"}


def rank_column_name(col: str) -> str:
    """The per-rank table's header of a ``timeline_tables`` ranks column: readable words and the
    unit ("exposed:dp_comm" → "exposed DP comm [ms]", with the time breakdown's category names)."""
    if col in RANK_COLUMN_NAMES:
        return RANK_COLUMN_NAMES[col]
    if col.startswith("exposed:"):
        cat = col.removeprefix("exposed:")
        return f"exposed {TIME_LABELS.get(cat, cat.replace('_', ' ')).removesuffix(' (exposed)')} [ms]"
    return col


def exposed_words(rank: pd.Series, step_s: float) -> str:
    """A rank's exposed communication by kind, largest first, and its share of the step, from the
    ranks table (``timeline_tables``: sim/metrics.py's figures, as the Estimate page's breakdown):
    "TP comm 5.099 s, DP comm 68.51 ms, PP p2p 8.671 ms (27.3 % of the step)"."""
    kinds = sorted(((k.removeprefix("exposed:"), float(v)) for k, v in rank.items()
                    if str(k).startswith("exposed:") and pd.notna(v) and v > 0), key=lambda kv: -kv[1])
    words = ", ".join(f"{TIME_LABELS.get(k, k).removesuffix(' (exposed)')} {fmt_time(v)}" for k, v in kinds)
    share = fmt_pct(float(rank["exposed_comm_s"]) / step_s) if step_s > 0 else "—"
    return f"{words or 'none'} ({share} of the step)"


def per_rank_view(ranks: pd.DataFrame) -> pd.DataFrame:
    """The ranks table as the Timeline page shows it: readable headers, times in ms, the bubble in
    %, "yes" on the critical rank (blank elsewhere)."""
    view = ranks.copy()
    for col in view.columns:
        if col.endswith("_s") or col.startswith("exposed:"):
            view[col] = 1e3 * pd.to_numeric(view[col], errors="coerce")
    if "bubble_fraction" in view:
        view["bubble_fraction"] = 100 * pd.to_numeric(view["bubble_fraction"], errors="coerce")
    if "critical" in view:  # the rank the Estimate page's breakdown describes
        view["critical"] = view["critical"].map({True: "yes", False: ""})
    return view.rename(columns=rank_column_name)


def row_labels(spans: pd.DataFrame) -> list[str]:
    pairs = spans[["rank", "stream"]].drop_duplicates().to_records(index=False).tolist() if len(spans) else []
    order = {s: i for i, s in enumerate(STREAM_ORDER)}
    pairs.sort(key=lambda p: (p[0], order.get(p[1], 99), p[1]))
    return [f"rank {r} · {s}" for r, s in pairs]


def gantt_frame(spans: pd.DataFrame, t0_s: float | None = None, t1_s: float | None = None,
                max_spans: int = MAX_EXACT_SPANS, bins: int = GANTT_BINS,
                ranks: Any = None) -> tuple[pd.DataFrame, bool, list[str]]:
    """Spans in [t0, t1] as Gantt rows; aggregated into time bins beyond ``max_spans`` spans.

    Aggregated rows are one per (bar, phase running in it): the phase's share of the bar's time,
    the bar's busy share (``occupancy``) and the spans touching it (``_binned``), so any size
    renders in O(rows · bins · phases).
    ``ranks`` (an iterable of rank numbers) keeps only those ranks' rows: the page passes a
    representative subset of a deep pipeline, so rows × bins stays bounded too.
    """
    if ranks is not None:
        spans = spans[spans["rank"].isin(list(ranks))]
    rows = row_labels(spans)
    if not len(spans):
        return pd.DataFrame(columns=["row", "category", "start_ms", "end_ms", "kind", "mb", "chunk"]), False, rows
    t0 = float(spans["start_s"].min()) if t0_s is None else float(t0_s)
    t1 = float(spans["end_s"].max()) if t1_s is None else float(t1_s)
    if t1 <= t0:
        t1 = t0 + 1e-9
    sel = spans[(spans["end_s"] > t0) & (spans["start_s"] < t1)]
    start = sel["start_s"].clip(lower=t0).to_numpy(dtype=float)
    end = sel["end_s"].clip(upper=t1).to_numpy(dtype=float)
    # Rows and categories as integer codes over the distinct (rank, stream) and (kind, stream)
    # pairs: the labels are built once per pair, not once per span (string work on every span
    # was most of this function's time).
    rank = sel["rank"].to_numpy(dtype=np.int64)
    stream_code, streams = pd.factorize(sel["stream"], sort=False)
    kind_code, kinds = pd.factorize(sel["kind"], sort=False)
    row_id, row_pairs = _pairs(rank, stream_code, len(streams))
    row_names = np.array([f"rank {r} · {streams[s]}" for r, s in row_pairs], dtype=object)
    cat_id, cat_pairs = _pairs(kind_code, stream_code, len(streams))
    cat_names = np.array([span_category(str(kinds[k]), str(streams[s])) for k, s in cat_pairs], dtype=object)
    if len(sel) <= max_spans:
        mb = sel["mb"].to_numpy()
        chunk = sel["chunk"].to_numpy()
        kind = np.asarray(kinds.astype(str), dtype=object)[kind_code]
        # label compute spans wide enough to read (~1/70 of the window): the micro-batch number;
        # the phase is the colour
        wide = (end - start) >= (t1 - t0) / 70
        label = np.where((mb >= 0) & wide & np.isin(kind, ["F", "B", "W", "R"]), mb.astype(str), "")
        df = pd.DataFrame({"row": row_names[row_id], "category": cat_names[cat_id], "kind": kind, "mb": mb,
                           "chunk": chunk, "start_ms": start * 1e3, "end_ms": end * 1e3,
                           "dur_ms": (end - start) * 1e3, "mid_ms": (start + end) * 0.5e3, "label": label})
        return df, False, rows
    return _binned(start, end, row_id, cat_id, t0, (t1 - t0) / bins, bins, row_names, cat_names), True, rows


def _pairs(a: np.ndarray, b: np.ndarray, nb: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(index of each element's distinct (a, b) pair, the pairs in (a, b) order)."""
    uniq, inv = np.unique(a.astype(np.int64) * max(nb, 1) + b, return_inverse=True)
    return inv.reshape(-1), [(int(u // max(nb, 1)), int(u % max(nb, 1))) for u in uniq]


def _binned(start: np.ndarray, end: np.ndarray, row_id: np.ndarray, cat_id: np.ndarray, t0: float, width: float,
            bins: int, row_names: np.ndarray, cat_names: np.ndarray) -> pd.DataFrame:
    """Spans aggregated into ``bins`` time bins per row, each bin split by phase, look-alike
    neighbours merged.

    One row per (bar, phase that runs in it): the phase's share of the bar's time (``share``,
    drawn stacked on the shares of the phases before it, ``below``; the order of ``theme.scale``),
    the bar's busy share (``occupancy``; the rest is idle) and the spans touching the bar. So a
    phase that dominates no bin keeps its share: the exposed TP collectives between the medium
    preset's kernels are 27 % of its step. Adjacent bins of a row whose phases' shares agree to
    ``MERGE_STEP`` are one bar (medium: 2,565 touched bins → 200 bars of 477 pieces); a
    bar's ``spans`` counts each span touching it once. Dense arrays over rows × bins × categories
    (bincount), so any size costs O(spans + cells · categories)."""
    n_rows, n_cats, n = len(row_names), len(cat_names), len(start)
    idx, b, busy = _pieces(start, end, t0, width, bins)
    cell = row_id[idx] * bins + b  # row-major: (row, bin)
    by_cat = np.bincount(cell * n_cats + cat_id[idx], weights=busy, minlength=n_rows * bins * n_cats)
    by_cat = by_cat.reshape(n_rows * bins, n_cats)
    cells = np.flatnonzero(np.bincount(cell, minlength=n_rows * bins))  # bins some span touches
    r, bb = cells // bins, cells % bins
    run = _runs(r, bb, np.round(by_cat[cells] / width / MERGE_STEP))
    heads = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    first, last = bb[heads], bb[np.r_[heads[1:] - 1, len(cells) - 1]]
    cat_busy = np.zeros((len(heads), n_cats))
    np.add.at(cat_busy, run, by_cat[cells])
    share = cat_busy / ((last - first + 1) * width)[:, None]
    occupancy = np.minimum(share.sum(axis=1), 1.0)
    share /= np.maximum(share.sum(axis=1), 1.0)[:, None]  # overlapping spans of a row fill the bar, no more
    run_of_cell = np.full(n_rows * bins, -1, dtype=np.int64)
    run_of_cell[cells] = run
    touching = np.unique(run_of_cell[cell] * n + idx) // n  # each (run, span) pair once
    spans = np.bincount(touching, minlength=len(heads))
    legend = scale(list(cat_names))[0]
    order = np.argsort([legend.index(c) for c in cat_names])
    below = np.zeros_like(share)
    below[:, order] = np.cumsum(share[:, order], axis=1) - share[:, order]
    h, c = np.nonzero(cat_busy > 0)
    return pd.DataFrame({"row": row_names[r[heads][h]], "category": cat_names[c], "share": share[h, c],
                         "below": below[h, c], "occupancy": occupancy[h], "spans": spans[h],
                         "start_ms": (t0 + first[h] * width) * 1e3, "end_ms": (t0 + (last[h] + 1) * width) * 1e3,
                         "kind": cat_names[c], "mb": -1, "chunk": -1})


def _pieces(start: np.ndarray, end: np.ndarray, t0: float, width: float,
            bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(span index, bin, busy time) of every (span, bin it touches) pair."""
    b0 = np.clip(((start - t0) / width).astype(np.int64), 0, bins - 1)
    b1 = np.clip(((end - t0) / width).astype(np.int64), 0, bins - 1)
    counts = b1 - b0 + 1
    idx = np.repeat(np.arange(len(start)), counts)
    b = b0[idx] + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    busy = np.clip(np.minimum(end[idx], t0 + (b + 1) * width) - np.maximum(start[idx], t0 + b * width), 0.0, None)
    return idx, b, busy


def _runs(r: np.ndarray, bb: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Run number of each touched (row, bin) cell, in order: a run goes on while the row is the
    same, the bins adjacent and every phase's share level (``levels``, cells × categories) equal."""
    new = np.ones(len(r), dtype=bool)
    new[1:] = (r[1:] != r[:-1]) | (bb[1:] != bb[:-1] + 1) | (levels[1:] != levels[:-1]).any(axis=1)
    return np.cumsum(new) - 1


def memory_frame(mem: pd.DataFrame, max_points: int = MEMORY_POINTS, max_total: int = MEMORY_TOTAL_POINTS,
                 end_s: float | None = None) -> pd.DataFrame:
    """(rank, t_ms, GiB) with at most ~``max_points`` points per rank and ~``max_total`` in all.

    A rank's step series longer than its share (``min(max_points, max_total // ranks)``, at least
    2) is cut into equal time bins, each drawn at its first time with its *maximum* (the peaks
    survive), and its last sample is kept as a point of its own: a bin's first time is before the
    series ends, so without it the curve stopped short. ``end_s`` (the step time) adds a point
    holding each rank's last value there, so the step-after curve reaches the step's end.
    Vectorised: a million points take well under a second."""
    if not len(mem):
        return pd.DataFrame(columns=["rank", "t_ms", "GiB"])
    m = mem[["rank", "t_s", "bytes"]].sort_values(["rank", "t_s"], kind="stable")
    ranks = m["rank"].to_numpy()
    t = m["t_s"].to_numpy(dtype=float)
    n_ranks = int(pd.unique(ranks).size)
    per_rank = max(2, min(max_points, max_total // max(n_ranks, 1)))
    nbins = max(1, per_rank - 1 - (end_s is not None))  # room for the last sample and the end point
    g = m.groupby("rank", sort=False)["t_s"]
    count = g.transform("size").to_numpy()
    t0 = g.transform("min").to_numpy(dtype=float)
    span = g.transform("max").to_numpy(dtype=float) - t0
    pos = m.groupby("rank", sort=False).cumcount().to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(span > 0, (t - t0) / span, 0.0)
    binned = np.minimum((frac * nbins).astype(np.int64), nbins - 1)
    key = np.where(count > per_rank, binned, pos)
    out = (pd.DataFrame({"rank": ranks, "bin": key, "t_s": t, "bytes": m["bytes"].to_numpy(dtype=float)})
           .groupby(["rank", "bin"], sort=True).agg(t_s=("t_s", "min"), bytes=("bytes", "max")).reset_index())
    last = m.groupby("rank", sort=True).tail(1)
    tails = [last]
    if end_s is not None:
        tails.append(last[last["t_s"] < end_s].assign(t_s=float(end_s)))
    out = (pd.concat([out[["rank", "t_s", "bytes"]], *tails], ignore_index=True)
           .drop_duplicates(["rank", "t_s"], keep="first").sort_values(["rank", "t_s"], kind="stable"))
    return pd.DataFrame({"rank": out["rank"].to_numpy(), "t_ms": out["t_s"].to_numpy(dtype=float) * 1e3,
                         "GiB": out["bytes"].to_numpy(dtype=float) / 2**30})


def representative_ranks(ranks: pd.DataFrame, n_ranks: int, limit: int = GANTT_SUBSET) -> list[int]:
    """A few ranks that stand for a deep pipeline: the first and last two, the worst bubbles,
    and evenly spaced ranks in between; all ranks when there are at most ``MAX_GANTT_RANKS``."""
    if n_ranks <= MAX_GANTT_RANKS:
        return list(range(n_ranks))
    chosen: dict[int, None] = dict.fromkeys([0, 1, n_ranks - 2, n_ranks - 1])
    if len(ranks) and "bubble_fraction" in ranks:
        bubble = pd.to_numeric(ranks["bubble_fraction"], errors="coerce")
        worst = ranks.assign(_b=bubble).dropna(subset=["_b"]).sort_values(["_b", "rank"], ascending=[False, True])
        worst = worst[worst["_b"] > worst["_b"].median()]   # equal bubbles single out no rank
        for r in worst["rank"].head(limit // 2):
            if len(chosen) >= limit // 2 + 4:
                break
            chosen.setdefault(int(r), None)
    free = limit - len(chosen)   # the rest evenly spaced over the whole pipeline (not the low end first)
    for r in np.linspace(0, n_ranks - 1, free + 2)[1:-1].round().astype(int) if free > 0 else ():
        chosen.setdefault(int(r), None)
    return sorted(chosen)


def compact_spans(spans: pd.DataFrame) -> pd.DataFrame:
    """Same spans in small dtypes (categories for the names, 32-bit integers): about 30 bytes a
    span instead of ~90, which is what the timeline cache holds."""
    if not len(spans):
        return spans
    out = spans.copy()
    for c in ("stream", "kind"):
        out[c] = out[c].astype("category")
    for c in ("rank", "mb", "chunk"):
        out[c] = pd.to_numeric(out[c], downcast="integer")
    return out


def frame_bytes(*frames: pd.DataFrame) -> int:
    return int(sum(f.memory_usage(index=True, deep=True).sum() for f in frames))
