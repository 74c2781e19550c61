"""``python -m simengine check-run --log FILE --model … --system … --strategy … [--set …]`` and
``python -m simengine coverage --model … --system … --strategy …`` — the two commands that hold a
scenario against measurements.

check-run prints the measured and predicted step time and memory, the residual by component, and
with ``--refit`` the fitted compute-efficiency scale with its fit and hold-out errors (provenance).
coverage prints the share of op time priced from measured, interpolated, extrapolated or default
efficiencies per op kind (``simengine.coverage``); a saved user system's provenance says which
scalar fields were measured.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError
from ..presets import read_bounded   # fileio.py's bounded read (no device, no pipe, a size limit)

MAX_RUNS_BYTES = 1 << 20   # --runs: a JSON list of 1-50 small objects
FACTORS_DEFAULT = "compute,scale_up,scale_out"
RUN_KEYS = ("log", "model", "system", "strategy", "set", "warmup")


def add_parser(sub) -> None:
    from ..calibration.cli import add_systems_dir

    v = sub.add_parser("coverage", help="share of a scenario's op time priced from measured data")
    for name in ("model", "system", "strategy"):
        v.add_argument(f"--{name}", required=True)
    v.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="override a field (repeatable)")
    add_systems_dir(v)

    c = sub.add_parser("check-run", help="compare a Megatron-LM / torchtitan training log with the prediction")
    c.add_argument("--log", help="training log (stdout of Megatron-LM or torchtitan)")
    c.add_argument("--model")
    c.add_argument("--system")
    c.add_argument("--strategy")
    c.add_argument("--runs", metavar="FILE", help="JSON list of runs [{log, model, system, strategy, set?, warmup?}] "
                   "(paths relative to FILE): with --refit, fit --factors on all of them, each held out in turn")
    c.add_argument("--factors", default=FACTORS_DEFAULT,
                   help="with --runs --refit: factors to fit (compute, scale_up, scale_out)")
    c.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="override a field (repeatable)")
    c.add_argument("--warmup", type=int, default=None,
                   help="logged iterations to skip, i.e. iteration lines (Megatron logs one every --log-interval; default: 10%%, at least 1)")
    c.add_argument("--refit", action="store_true", help="fit the compute-efficiency scale (held-out check)")
    c.add_argument("--holdout-log", metavar="FILE", help="a second log of the same scenario to check the refit on")
    add_systems_dir(c)


def _read_log(raw: str, field: str):
    from ..presets import not_a_file  # why a named path is no regular file (fileio.py)
    from .logs import parse_training_log

    if what := not_a_file(raw):
        raise ConfigError([(field, f"{what}: {raw[:200]}")])
    path = Path(raw)
    return parse_training_log(path, field_name=field), path


def run_coverage(args: argparse.Namespace) -> int:
    from ..api import coverage, list_user_systems, user_system_provenance
    from ..calibration.cli import systems_dir
    from ..cli import build_config

    cfg = build_config(args)
    folder = systems_dir(args)
    measured: list[str] = []
    if args.system in list_user_systems(folder):
        measured = [p.get("target", "") for p in user_system_provenance(folder, args.system) if isinstance(p, dict)]
    print("coverage (share of op time)    measured  interpolated  extrapolated  default      op ms")
    for kind, row in coverage(cfg, measured).items():
        print(f"  {kind:26s} {row['measured']:9.1%} {row['interpolated']:13.1%} {row['extrapolated']:13.1%} "
              f"{row['default']:8.1%} {row['seconds'] * 1e3:10.1f}")
    return 0


def _factors(args: argparse.Namespace) -> list[str]:
    """--factors as names (refit.py refuses unknown ones); ConfigError when it names none (',,,'
    fitted nothing and printed a refit)."""
    names = [f.strip() for f in args.factors.split(",") if f.strip()]
    if not names:
        raise ConfigError([("--factors", f"name at least one of {FACTORS_DEFAULT.replace(',', ', ')}")])
    return names


def _check_run_item(n: int, item: dict) -> None:
    """A --runs entry's keys and its warm-up: a misspelt key ("warmpu") was ignored, ``true`` read as 1."""
    unknown = sorted(set(item) - set(RUN_KEYS))
    if unknown:
        raise ConfigError([("--runs", f"run {n}: unknown key {str(unknown[0])[:40]!r} (keys: {', '.join(RUN_KEYS)})")])
    w = item.get("warmup")
    if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
        raise ConfigError([("--runs", f"run {n}: 'warmup' must be a whole number of steps >= 0")])


def run_many(args: argparse.Namespace) -> int:
    """``--runs FILE``: compare every run; with ``--refit`` fit the factors on all of them."""
    import json

    from ..cli import build_config
    from .compare import compare, measure
    from .refit import fit_factors

    path = Path(args.runs)
    try:
        raw = read_bounded(path, MAX_RUNS_BYTES)   # a list of up to 50 small objects: no device, no huge file
    except (OSError, ValueError) as exc:
        raise ConfigError([("--runs", f"cannot read {args.runs[:200]}: {exc if isinstance(exc, ValueError) else type(exc).__name__}")]) from None
    try:
        items = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ConfigError([("--runs", f"cannot read {args.runs[:200]}: {type(exc).__name__}")]) from None
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items) or len(items) > 50:
        raise ConfigError([("--runs", "expected a JSON list of 1-50 objects {log, model, system, strategy}")])
    runs, names = [], []
    for n, item in enumerate(items, start=1):
        _check_run_item(n, item)
        missing = [k for k in ("log", "model", "system", "strategy") if not isinstance(item.get(k), str)]
        if missing:
            raise ConfigError([("--runs", f"run {n}: missing {', '.join(missing)}")])
        sets = item.get("set", [])
        if not isinstance(sets, list) or not all(isinstance(x, str) for x in sets):
            raise ConfigError([("--runs", f"run {n}: 'set' must be a list of \"path=value\" strings")])
        ns = argparse.Namespace(model=item["model"], system=item["system"], strategy=item["strategy"],
                                set=sets, systems_dir=args.systems_dir)
        cfg = build_config(ns)
        log, lp = _read_log(str(path.parent / item["log"]), f"--runs[{n}].log")
        m = measure(log, cfg, item.get("warmup", args.warmup))
        c = compare(cfg, m)
        print(f"run {n} {lp.name}: measured {m.step_time_s * 1e3:.1f} ms, predicted {c.predicted_step_s * 1e3:.1f} ms "
              f"({c.rel_error:+.1%})")
        runs.append((cfg, m.step_time_s))
        names.append(lp.name)
    if not args.refit:
        return 0
    fit = fit_factors(runs, _factors(args))
    shown = ", ".join(f"{k} = {v:.4f}" + ("" if k in fit.identifiable else " (not identifiable: no run moves it)")
                      for k, v in fit.values.items())
    print(f"refit           {shown} ({fit.evaluations} estimates)")
    print(f"fit error       RMS {fit.rms:.2%}: " + ", ".join(f"{n} {e:+.1%}" for n, e in zip(names, fit.errors, strict=True)))
    if fit.holdout_rms is not None:
        print(f"held out        RMS {fit.holdout_rms:.2%} (each run predicted by the others' fit): "
              + ", ".join(f"{n} {e:+.1%}" for n, e in zip(names, fit.holdout_errors, strict=True)))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.cmd == "coverage":
        return run_coverage(args)
    if getattr(args, "holdout_log", None) and not getattr(args, "refit", False):   # said before any output, not ignored
        raise ConfigError([("--holdout-log", "--holdout-log checks a refit: give --refit with it")])
    if args.factors != FACTORS_DEFAULT and not (args.runs and args.refit):
        raise ConfigError([("--factors", "--factors chooses what --runs FILE --refit fits: give those with it")])
    if args.runs and args.refit:
        _factors(args)   # before every run is compared and printed
    if args.runs:
        given = [f"--{k.replace('_', '-')}" for k in ("log", "model", "system", "strategy", "holdout_log", "set")
                 if getattr(args, k, None)]
        if given:   # each run of the file names its own: these would be ignored
            raise ConfigError([("--runs", f"--runs FILE names every run's log and scenario: {', '.join(given)} would be ignored")])
        return run_many(args)
    missing = [f"--{k}" for k in ("log", "model", "system", "strategy") if not getattr(args, k)]
    if missing:
        raise ConfigError([("arguments", f"check-run needs {', '.join(missing)} (or --runs FILE)")])
    from ..cli import build_config
    from ..api import scenario_from
    from .compare import compare, measure, refit_compute_scale
    from .flops import logged_check
    from .flops import mismatch as flops_mismatch
    from .stated import disagreements
    from .summary import halves

    log, path = _read_log(args.log, "--log")
    cfg = build_config(args)
    m = measure(log, cfg, args.warmup)
    c = compare(cfg, m)
    print(f"log             {path.name}: {log.framework}, {len(log.iterations)} iterations, "
          f"{m.iterations_skipped} skipped as warm-up, {len(m.iterations_used)} used (spread {m.spread:.1%})")
    if log.stated:
        print("log states      " + ", ".join(f"{k} {v}" for k, v in log.stated.items()))
    for d in disagreements(log.stated, cfg):
        print(f"mismatch        {d}: the comparison is not of the logged run")
    sc = scenario_from(cfg)
    fc = logged_check(log, m.iterations_used, sc)
    if fc is not None and (why := flops_mismatch(fc, sc)):
        print(f"mismatch        {why}")
    print(f"step time       measured {m.step_time_s * 1e3:10.1f} ms   predicted {c.predicted_step_s * 1e3:10.1f} ms   "
          f"error {c.rel_error:+.1%}")
    if m.allocated_gib is not None:
        print(f"memory alloc    measured {m.allocated_gib:10.2f} GiB  predicted {c.predicted_allocated_gib:10.2f} GiB  "
              f"error {c.predicted_allocated_gib / m.allocated_gib - 1:+.1%}")
    if m.reserved_gib is not None:
        print(f"memory reserved measured {m.reserved_gib:10.2f} GiB  predicted {c.predicted_reserved_gib:10.2f} GiB  "
              f"error {c.predicted_reserved_gib / m.reserved_gib - 1:+.1%}")
    print(f"residual        {c.residual_s * 1e3:+.1f} ms (measured − predicted); by component "
          "(predicted, and the scale it alone would need):")
    for k, v in c.breakdown_s.items():
        need = c.scale_to_close.get(k)
        small = v < 0.01 * c.predicted_step_s  # under 1 % of the step: no scale of it closes a real gap
        shown = f"x{need:.2f}" if need is not None and need > 0 and not small else "cannot close it alone"
        print(f"  {k:18s} {v * 1e3:10.1f} ms  {shown}")
    for w in log.warnings:
        print(f"warning: {w}")
    if not args.refit:
        return 0
    if args.holdout_log:
        hlog, hpath = _read_log(args.holdout_log, "--holdout-log")
        fit_on, hold, label = m, measure(hlog, cfg, args.warmup), f"log {hpath.name}"
    else:
        fit_on, hold, label = halves(log, cfg, args.warmup, m, "--refit")
    r = refit_compute_scale(cfg, fit_on, hold, label, log.sha256)
    print(f"refit           {r.factor} = {r.value:.4f} ({r.evaluations} estimates): fit error {r.fit_error:+.2%}, "
          f"held-out ({r.holdout}) error {r.holdout_error:+.2%}")
    print(f"provenance      log sha256 {r.provenance['log_sha256'][:16]}, iterations {list(fit_on.iterations_used)[:8]}"
          f"{' …' if len(fit_on.iterations_used) > 8 else ''}")
    return 0
