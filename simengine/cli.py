"""Command line: ``python -m simengine estimate|simulate|presets|schema|validate|import-hf|calibrate|check-run|coverage``.

Bad input exits with status 2 and one line naming the field; never a traceback. Output that
cannot be written (a full disk, ``> /dev/full``) is one line and status 2; a closed pipe
(``| head -1``) ends quietly. Subcommands that live in their own module register with
``add_parser(sub)`` and run with ``run(args) -> str`` (see ``_MODULE_COMMANDS``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, NoReturn

from .calibration import cli as calibration_cli
from .search import cli as search_cli
from .checkrun import cli as checkrun_cli
from .errors import ConfigError
from .terminal.cli import OutputError, StdoutGuard, one_line

KINDS = {"model": "models", "system": "systems", "strategy": "strategies"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage otherwise)
        raise ConfigError([("arguments", message)])


def _parse_value(text: str) -> Any:
    """JSON literal if it parses (numbers, true/false/null, lists, objects), else the raw string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def apply_sets(config: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """Apply ``section.field[.sub]=value`` overrides to a scenario dict (no eval)."""
    for item in sets:
        if "=" not in item:
            raise ConfigError([("--set", f"'{item}' is not of the form section.field=value")])
        path, raw = item.split("=", 1)
        keys = [k.strip() for k in path.strip().split(".")]
        if len(keys) < 2 or keys[0] not in KINDS:
            raise ConfigError([("--set", f"'{path}' must start with model., system. or strategy.")])
        if not all(keys):   # "strategy..tp" starts right: its empty name is what is wrong
            raise ConfigError([("--set", f"'{path}' has an empty field name (two dots in a row, or a dot at the end)")])
        node = config[keys[0]]
        for k in keys[1:-1]:
            nxt = node.get(k) if isinstance(node, dict) else None
            if not isinstance(nxt, dict):
                nxt = {}
                node[k] = nxt
            node = nxt
        node[keys[-1]] = _parse_value(raw)
    return config


def _load(kind: str, ref: str, user_systems=None) -> dict[str, Any]:
    from . import presets

    spec = presets.load_spec(KINDS[kind], ref, user_systems=user_systems)
    return spec.model_dump(mode="json", exclude_unset=False)


def build_config(args: argparse.Namespace) -> dict[str, Any]:
    from .calibration.cli import systems_dir

    cfg = {"model": _load("model", args.model), "system": _load("system", args.system, systems_dir(args)),
           "strategy": _load("strategy", args.strategy)}
    return apply_sets(cfg, args.set or [])


def _table(rep) -> str:
    lo, hi = rep.uncertainty.get("step_time_s", (rep.step_time_s, rep.step_time_s))
    lines = [
        f"step time        {rep.step_time_s * 1e3:12.1f} ms   (likely {lo * 1e3:.0f} – {hi * 1e3:.0f} ms)",
        f"tokens/s         {rep.tokens_per_s:12,.0f}   ({rep.tokens_per_s_per_gpu:,.0f} per GPU)",
        f"MFU / HFU        {rep.mfu * 100:11.1f}% / {rep.hfu * 100:.1f}%",
        f"peak memory      {rep.peak_memory_gib:12.2f} GiB allocated, {rep.reserved_memory_gib:.2f} reserved of {rep.memory_capacity_gib:.1f}  -> {'fits' if rep.fits else 'DOES NOT FIT'}",
        f"parameters       {rep.num_parameters / 1e9:12.2f} B  ({rep.num_active_parameters / 1e9:.2f} B active"
        + (f", {rep.num_trainable_parameters / 1e6:.1f} M trained" if rep.num_trainable_parameters < rep.num_parameters else "") + ")",
        f"micro-batches    {rep.num_microbatches:12d}   dp={rep.dp}, gpus={rep.num_gpus}",
        f"per launch       {rep.gpu_us_per_launch:12.1f} µs of GPU work per kernel (critical rank)",
        f"cost             {rep.cost_per_step_usd:12.4f} USD/step, {rep.cost_per_million_tokens_usd:.4f} USD per 1M tokens",
        f"energy           {rep.energy_per_step_j / 1e3:12.1f} kJ/step",
        "",
        f"time breakdown (critical rank {rep.critical_rank}: the one with the least bubble; sums to the step)",
    ]
    for k, v in rep.breakdown_s.items():
        lines.append(f"  {k:18s} {v * 1e3:10.1f} ms  {v / rep.step_time_s * 100:5.1f}%")
    if rep.bubble_fraction_max - rep.bubble_fraction >= 0.001:   # the critical rank waits the least
        lines.append(f"  (bubble up to {rep.bubble_fraction_max * 100:.1f}% on another rank)")
    lines += ["", "memory per stage (GiB)   peak  weights  grads  optim  activ  other  in-flight   free"]
    for s in rep.memory_by_stage:
        lines.append(f"  stage {s.stage:<3d}            {s.peak_gib:7.2f} {s.weights_gib:7.2f} {s.grads_gib:6.2f} {s.optimizer_gib:6.2f} "
                     f"{s.activations_gib:6.2f} {s.other_gib:6.2f} {s.inflight_microbatches:6d} {s.free_gib:7.2f}")
    lines += [f"warning: {w}" for w in rep.warnings]
    lines += [f"note: {n}" for n in rep.notes]
    return "\n".join(lines)


def _report_json(rep) -> dict[str, Any]:
    return rep.model_dump(mode="json")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (captured in tests)
        pass


def emit(text: str) -> None:
    """Write ``text`` and a newline to stdout and flush, so write errors surface here
    (``terminal.StdoutGuard``: control characters escaped, a failed write an ``OutputError``)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _write_trace(path: str, timeline: Any, name: str) -> None:
    from . import api

    try:
        api.write_chrome_trace(timeline, path, name)
    except OSError as e:
        raise ConfigError([("--trace", f"cannot write {path}: {e.strerror or e}")]) from e


def _module_commands() -> dict[str, Any]:
    """Subcommands defined in their own modules: name -> module with add_parser(sub) and run(args)."""
    from .importers import cli as importers_cli
    from .validation import cli as validation_cli

    return {"validate": validation_cli, "import-hf": importers_cli}


def main(argv: list[str] | None = None) -> int:
    raw = sys.stdout
    sys.stdout = StdoutGuard(raw)   # every subcommand's output: control characters escaped, write errors caught
    try:
        code = _main(argv)
        sys.stdout.flush()   # a full disk surfaces here, not in the interpreter's last flush
        return code
    except BrokenPipeError:  # the reader went away (| head -1): stop quietly
        sys.stdout = raw
        _silence_stdout()
        return 0
    except OutputError as e:
        sys.stdout = raw
        _silence_stdout()
        print(one_line(f"error: cannot write output: {e}"), file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory: the scenario or input is too large for this machine", file=sys.stderr)
        return 2
    except KeyboardInterrupt:   # Ctrl-C during a long search: one line, not Python's traceback
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout = raw


def _parser() -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    p = _Parser(prog="python -m simengine", description="LLM-training performance simulator")
    sub = p.add_subparsers(dest="cmd")
    for name in ("estimate", "simulate"):
        e = sub.add_parser(name, help=f"{name} one training step")
        e.add_argument("--model", required=True, help="preset name or path to a ModelSpec JSON")
        e.add_argument("--system", required=True, help="preset name, saved user system or path to a SystemSpec JSON")
        e.add_argument("--strategy", required=True, help="preset name or path to a StrategySpec JSON")
        e.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="override a field (repeatable)")
        e.add_argument("--json", action="store_true", help="print one JSON object")
        calibration_cli.add_systems_dir(e)
        if name == "simulate":
            e.add_argument("--trace", metavar="PATH", help="write a Chrome trace (Perfetto / chrome://tracing)")
    sub.add_parser("presets", help="list the preset names").add_argument("--json", action="store_true")
    sch = sub.add_parser("schema", help="print the JSON schema of a config section")
    sch.add_argument("section", choices=sorted(KINDS), help="model, system or strategy")
    modules = _module_commands()
    for mod in modules.values():
        mod.add_parser(sub)
    calibration_cli.add_parser(sub)
    checkrun_cli.add_parser(sub)
    search_cli.add_parser(sub)
    return p, modules


def _main(argv: list[str] | None) -> int:
    p, modules = _parser()
    try:
        args = p.parse_args(argv)
        if args.cmd is None:
            raise ConfigError([("arguments", "choose a command: estimate, simulate, presets, schema, "
                                + ", ".join(modules) + ", search, calibrate, check-run or coverage")])
        if args.cmd in modules:
            emit(modules[args.cmd].run(args))
            return 0
        if args.cmd == "search":
            return search_cli.run(args)
        if args.cmd == "calibrate":
            return calibration_cli.run(args)
        if args.cmd in ("check-run", "coverage"):
            return checkrun_cli.run(args)
        if args.cmd == "schema":
            from .config import ModelSpec, StrategySpec, SystemSpec

            classes: dict[str, type[ModelSpec] | type[SystemSpec] | type[StrategySpec]] = {
                "model": ModelSpec, "system": SystemSpec, "strategy": StrategySpec}
            cls = classes[args.section]
            emit(json.dumps(cls.model_json_schema(), indent=1))
            return 0
        if args.cmd == "presets":
            from . import presets

            data = {kind: presets.list_presets(kind) for kind in KINDS.values()}
            emit(json.dumps(data, indent=1) if args.json else "\n".join(f"{k}: {', '.join(v)}" for k, v in data.items()))
            return 0
        from . import api

        cfg = build_config(args)
        if args.cmd == "estimate":
            rep = api.estimate(cfg)
            emit(json.dumps(_report_json(rep)) if args.json else _table(rep))
            return 0
        if args.trace is not None and not args.trace.strip():   # checked before the work, not silently skipped after it
            raise ConfigError([("--trace", "an empty path: give the file to write the trace to")])
        tl = api.simulate(cfg)
        if args.trace:
            _write_trace(args.trace, tl, cfg["model"].get("name", "simengine"))
        summary = {"step_time_s": tl.step_time_s, "bubble_fraction": list(tl.bubble_fraction),
                   "peak_memory_gib": [b / 2**30 for b in tl.peak_memory_bytes], "spans": len(tl.spans),
                   "fits": api.estimate(cfg).fits}   # the estimate's verdict (StageMemory.fits), as the estimate prints it
        emit(json.dumps(summary) if args.json else "\n".join(f"{k}: {v}" for k, v in summary.items()))
        return 0
    except ConfigError as e:
        print(one_line(f"error: {e}"), file=sys.stderr)   # one line, control characters escaped, capped
        return 2
    except RecursionError:
        print("error: input nested too deeply", file=sys.stderr)
        return 2
    except (BrokenPipeError, OutputError, MemoryError):
        raise
    except Exception as e:  # never a traceback for the user; tests assert this path is unused
        print(one_line(f"internal error: {type(e).__name__}: {e}"), file=sys.stderr)
        return 1
