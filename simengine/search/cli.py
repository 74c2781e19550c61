"""``python -m simengine search``: rank the layouts of a model on a system.

``--set strategy.tp=8`` pins a dimension, ``--space strategy.pp=1,2,4`` restricts one, ``--space
system.num_gpus=64,128`` (or ``64..512``, doubling) searches several GPU counts. A progress bar
goes to stderr on a terminal; ``--json`` prints one object and nothing else. ``--time-limit S``
stops the search after S seconds (checked between batches of work) and reports the best layouts
timed by then, marked as not proven the best (``"partial"`` in the JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ..calibration.cli import add_systems_dir, systems_dir
from ..errors import ConfigError
from ..terminal.cli import warn
from .space import DIMS, LAYER_SPLIT_FIELDS
from .rank import TIE_MARK, TIE_ON, WHAT_IF_MARK, rank_label


def add_parser(sub) -> None:
    p = sub.add_parser("search", help="rank every feasible parallel layout")
    p.add_argument("--model", required=True, help="preset name or path to a ModelSpec JSON")
    p.add_argument("--system", required=True, help="preset name, saved user system or path to a SystemSpec JSON")
    p.add_argument("--strategy", help="preset/path whose fixed fields (dtype, …) the search keeps; reports the smallest changes to fit it")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override a field or pin a dimension")
    p.add_argument("--space", action="append", default=[], metavar="strategy.DIM=V1,V2",
                   help="restrict a dimension to a list (also system.num_gpus=V1,V2 or a doubling range system.num_gpus=A..B)")
    p.add_argument("--global-batch", type=int, help="sequences per step")
    p.add_argument("--global-batch-tokens", type=int, help="tokens per step (a multiple of --seq-len)")
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--token-budget", type=float, help="tokens to train: adds time and cost to train")
    p.add_argument("--objective", default="tokens_per_s")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--workers", type=int, help="local worker processes")
    p.add_argument("--executor", choices=("inprocess", "process", "ray"))
    p.add_argument("--address", help="Ray cluster address (with --executor ray)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="stop after this many seconds and report the best layouts timed by then (not proven the best)")
    add_systems_dir(p)


def _values(text: str) -> list[Any]:
    from ..cli import _parse_value

    if ".." in text and "," not in text:
        try:
            a, b = (int(x) for x in text.split("..", 1))
        except ValueError:
            raise ConfigError([("--space", f"'{text[:60]}' is not a range A..B of integers")]) from None
        if a < 1 or b < a:
            raise ConfigError([("--space", f"'{text}' is not a range A..B with 1 <= A <= B")])
        out = []
        while a <= b:
            out.append(a)
            a *= 2
        return out
    return [_parse_value(v.strip()) for v in text.split(",") if v.strip()]


def build(args: argparse.Namespace) -> tuple[Any, dict[str, Any] | None]:
    """(SearchSpace, the --strategy scenario dict or None)."""
    from ..cli import _load, _parse_value, apply_sets
    from .make import fixed_fields, make_space

    cfg = {"model": _load("model", args.model), "system": _load("system", args.system, systems_dir(args)),  # saved systems too
           "strategy": _load("strategy", args.strategy) if args.strategy else {}}
    choices: dict[str, list] = {}
    pins: dict[str, Any] = {}   # --set strategy.<dim>: also the --strategy scenario's, for its fit changes
    gpus = None
    plain = []
    for item in args.set:
        path, _, raw = item.partition("=")
        key = path.strip().removeprefix("strategy.")
        if path.strip() in _FLAG_OWNED:   # the search sets these itself: a --set of one would be ignored
            raise ConfigError([("--set", f"{path.strip()} is not set with --set in a search: {_FLAG_OWNED[path.strip()]}")])
        if path.strip().startswith("strategy.") and key in DIMS:
            _once(choices, key, "--set")
            choices[key] = [_parse_value(raw)]
            pins[key] = choices[key][0]
        else:
            plain.append(item)
    apply_sets(cfg, plain)
    for item in args.space:
        path, eq, raw = item.partition("=")
        path = path.strip()
        if not eq:
            raise ConfigError([("--space", f"'{item}' is not of the form strategy.DIM=V1,V2")])
        if path == "system.num_gpus":
            if gpus is not None:
                raise ConfigError([("--space", "system.num_gpus is given twice; list its values once (system.num_gpus=V1,V2)")])
            gpus = _values(raw)   # make_space refuses what is not a GPU count (8.7, true, NaN, 10**30)
        elif path.startswith("strategy.") and path[9:] in DIMS:
            _once(choices, path[9:], "--space")
            choices[path[9:]] = _values(raw)
        else:
            raise ConfigError([("--space", f"'{path}' is not searchable (system.num_gpus or strategy.<{'|'.join(DIMS)}>)")])
    # the --strategy file's fields as the studio's Search page reads a scenario's (fixed_fields);
    # a field given with --set is the user's pin, kept whatever it is
    base, split_dropped = fixed_fields(cfg["strategy"])
    for item in plain:
        path = item.partition("=")[0].strip()
        name = path[9:].split(".")[0].strip() if path.startswith("strategy.") else ""
        if name and name in cfg["strategy"] and name not in DIMS and name not in ("global_batch_size", "seq_len"):
            base[name] = cfg["strategy"][name]
    if split_dropped and not any(k in base for k in LAYER_SPLIT_FIELDS):
        warn("the --strategy file's layer split is for its own pp·vpp: the search places the layers itself for each depth")
    space = make_space(cfg["model"], cfg["system"], global_batch=args.global_batch, global_batch_tokens=args.global_batch_tokens,
                       seq_len=args.seq_len, gpus=gpus, token_budget=args.token_budget, choices=choices, base=base)
    scen = None
    if args.strategy:
        from ..config import load_scenario

        as_filed = dict(cfg["strategy"], global_batch_size=space.base["global_batch_size"], seq_len=args.seq_len)
        pinned = dict(as_filed, **pins)
        if "tp" in pins or "pp" in pins or "cp" in pins:
            pinned.pop("dp", None)   # the file's dp was for its own tp/pp/cp
        try:
            load_scenario(dict(cfg, strategy=pinned))
            scen = dict(cfg, strategy=pinned)   # the fit check of the layout the pins make of it
        except ConfigError as e:
            load_scenario(dict(cfg, strategy=as_filed))   # an invalid --strategy is said before the search, not after
            if not pins:
                raise
            # a partial pin (vpp alone: the file's schedule is 1f1b) still searches; only the fit check goes
            warn(f"--strategy with the --set pins is no valid layout ({e.issues[0][1]}): no fit changes for it")
    return space, scen


_FLAG_OWNED = {
    "strategy.seq_len": "use --seq-len",
    "strategy.global_batch_size": "use --global-batch (sequences) or --global-batch-tokens",
    "strategy.dp": "the data-parallel size follows from each layout's GPU count, tp, pp and cp",
}


def _once(choices: dict[str, list], key: str, flag: str) -> None:
    """A dimension pinned or restricted twice (two --set, two --space, or one of each) is refused:
    which one was meant is not ours to guess."""
    if key in choices:
        raise ConfigError([(flag, f"strategy.{key} is pinned or restricted twice; give it once "
                                  f"(--set strategy.{key}=V or --space strategy.{key}=V1,V2)")])


def _bar(enabled: bool):
    if not enabled:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=1, unit="group", file=sys.stderr, leave=False)

    def tick(done: int, total: int) -> bool:
        bar.total = total
        bar.n = done
        bar.refresh()
        return False

    return bar, tick


_now = time.monotonic  # the clock --time-limit reads (tests replace it)
MAX_TOP = 1000   # --top's limit (the studio's is 500, ui/search_inputs.py INPUT_RANGES)


def _limited(tick, seconds: float | None):
    """``tick`` (or none) that also asks the search to stop once ``seconds`` have passed."""
    if seconds is None:
        return tick
    deadline = _now() + seconds

    def limited(done: int, total: int) -> bool:
        if tick is not None:
            tick(done, total)
        return _now() > deadline
    return limited


def _search(space, args, tick, ex):
    """(result, why it is partial or ''): the search, or with ``--time-limit`` the best timed when it
    ran out (ConfigError when nothing was timed by then)."""
    from . import search
    from .executors import Cancelled

    if args.objective in ("time_to_train", "cost_to_train") and space.token_budget is None:
        # without a budget the ranking is the tokens/s one, and no candidate gets its days or cost
        raise ConfigError([("--objective", f"--objective {args.objective} needs --token-budget (the tokens to train)")])
    if args.time_limit is not None and not args.time_limit >= 0:
        raise ConfigError([("--time-limit", f"--time-limit={args.time_limit} must be a number of seconds >= 0")])
    if args.top is not None and args.top > MAX_TOP:
        # the bound prunes nothing until ``top`` layouts are timed (run.py ``_kth``): --top 10,000 times
        # nearly every layout of a small space (> 2 min), where --top 1,000 takes seconds
        raise ConfigError([("--top", f"--top={args.top} is more than the {MAX_TOP:,} a search ranks (a larger top "
                                     "times nearly every layout); use api.search(space, top=None) to rank them all")])
    best: list = [None]
    try:
        return search(space, objective=args.objective, top=args.top, progress=_limited(tick, args.time_limit), executor=ex,
                      best_so_far=best.append if args.time_limit is not None else None), ""
    except Cancelled:
        if len(best) == 1:
            raise ConfigError([("--time-limit", f"no layout was timed within {args.time_limit:g} s; allow more time or "
                                                "restrict the space (--set, --space)")]) from None
        return best[-1], (f"stopped after {args.time_limit:g} s (--time-limit): the best of the {best[-1].evaluated:,} "
                          "layouts timed by then, not proven the best of the space; rejections not counted")


def run(args: argparse.Namespace) -> int:
    from . import fit_changes, make_executor

    space, scen = build(args)
    ex = make_executor(args.executor, args.workers, args.address)
    bar, tick = _bar(not args.json and sys.stderr.isatty())
    try:
        res, partial = _search(space, args, tick, ex)
    finally:
        if bar is not None:
            bar.close()
    from ..api import estimate

    fits = fit_changes(scen, top=5) if scen is not None else []
    scen_fits = None if scen is None else estimate(scen).fits
    if args.json:
        out = res.to_json()
        if partial:
            out["partial"] = partial
        out["fit_changes"] = fits
        if scen is not None:
            out["strategy_fits"] = scen_fits
        print(json.dumps(out))
        return 0
    if partial:
        warn(partial)
    print(_table(res, space.token_budget, fits, scen_fits))
    return 0


def _table(res, budget: float | None, fits: list[dict[str, Any]], scen_fits: bool | None = None) -> str:
    from ..api import time_and_cost_to_train

    lines = [f"{'#':10s} {'layout':78s} {'tokens/s':>10} {'(band)':>19} {'MFU':>6} {'$/1M tok':>9} {'peak GiB':>8} {'free':>6}"]
    for i, c in enumerate(res.candidates):
        lo, hi = c.band.get("tokens_per_s", (c.tokens_per_s, c.tokens_per_s))
        tied = i in res.ties and len(res.ties) > 1   # #1 is in its own band: a tie needs a second
        lines.append(f"{rank_label(i, tied, bool(c.what_if)):10s} {c.label():78s} {c.tokens_per_s:10,.0f} {lo:9,.0f}–{hi:<9,.0f} {c.mfu * 100:5.1f}% "
                     f"{c.cost_per_million_tokens_usd:9.4f} {c.peak_memory_gib:8.2f} {c.headroom_gib:6.2f}")
        if budget:
            seconds, usd = time_and_cost_to_train(budget, c.tokens_per_s, c.cost_per_million_tokens_usd)
            lines.append(f"     to train {budget:.3g} tokens: {seconds / 86400:.2f} days, {usd:,.0f} USD")
    if not res.candidates:
        lines.append("  no layout of this space is valid and fits: the rejections below say why")
    if len(res.ties) > 1:
        lines.append(f"{TIE_MARK} : a tie with #1, within the best one's uncertainty band of {TIE_ON.get(res.objective, res.objective)} "
                     f"({len(res.ties)} candidates): not a winner")
    lines += _what_if_lines(res)
    lines += ["", f"space {res.space_size:,} candidates, {res.memory_checked:,} memory checks, {res.evaluated:,} timed, "
              f"{res.seconds:.2f} s; Pareto front {len(res.pareto)}", "rejected:"]
    for k, (n, first) in list(res.rejected_by_key().items())[:10]:
        lines.append(f"  {n:>9,}  {k}")
        if first.reason not in k:   # the numbers generalised away: one case with its own
            lines.append(f"{'':13s}e.g. {first.reason}")
    if fits:
        lines += ["", "smallest changes to fit --strategy (by tokens/s per GPU):"]
        lines += [f"  {f['change']:50s} {f['tokens_per_s']:10,.0f} tokens/s on {f['num_gpus']:,} GPUs "
                  f"({round(f['throughput_lost'] * 100, 1) + 0.0:+.1f} % per GPU lost)" for f in fits]
    elif scen_fits is not None:
        lines += ["", "--strategy fits in memory: nothing to change" if scen_fits
                  else "--strategy does not fit, and no single change (or pair of changes) tried makes it fit"]
    return "\n".join(lines)


def _what_if_lines(res) -> list[str]:
    """The footnote of the candidates whose schedule their stack does not ship (``what_if.summary``),
    with the ``--space`` that keeps the stack's own where none of them runs on it."""
    w = res.what_if()
    if not w["what_if_summary"]:
        return []
    out = [f"{WHAT_IF_MARK} : a what-if: {w['what_if_summary']}"]
    if w["first_shipped"] is None and w["shipped_schedules"]:
        out.append(f"  add --space strategy.schedule={','.join(w['shipped_schedules'])} for the best one it runs")
    return out
