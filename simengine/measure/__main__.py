"""``python -m simengine.measure gemm|grouped-gemm|attention|memory|nccl`` (see README.md here).

Bad input exits with status 2 and one line; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

from ..errors import ConfigError

SWEEPS = ("gemm", "grouped-gemm", "attention", "memory")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError([("arguments", message)])


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m simengine.measure", description="measure GEMM / attention / memory / NCCL for simengine")
    p.add_argument("what", choices=(*SWEEPS, "nccl"))
    p.add_argument("--for-scenario", metavar="FILE", help="scenario JSON {model, system, strategy}: sweep its shapes")
    p.add_argument("--out", metavar="PATH", help="CSV to write (nccl: folder for the logs with --run)")
    p.add_argument("--backend", choices=("torch", "numpy"), default="torch", help="torch (GPU) or numpy (CPU)")
    p.add_argument("--device", default=None, help="torch device, e.g. cuda:0 (one process per GPU: cuda:$LOCAL_RANK)")
    p.add_argument("--dtype", default=None, choices=("bf16", "fp16", "fp32"), help="torch dtype (default bf16)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--max-flops", type=float, default=None, help="skip shapes above this many FLOPs")
    p.add_argument("--limit", type=int, default=None, help="measure at most this many shapes")
    p.add_argument("--nccl-tests-dir", metavar="DIR", help="nccl-tests checkout (its build/ holds the *_perf binaries)")
    p.add_argument("--launcher", choices=("mpirun", "srun"), default="mpirun")
    p.add_argument("--run", action="store_true", help="nccl: run the commands and save each log under --out")
    return p


def _scenario(path: str | None):
    from .. import presets
    from ..config import load_scenario

    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError([("--for-scenario", f"cannot read {path[:200]}: {type(exc).__name__}")]) from None
    if not isinstance(data, dict):
        raise ConfigError([("--for-scenario", "expected a JSON object {model, system, strategy}")])
    kinds = {"model": "models", "system": "systems", "strategy": "strategies"}
    cfg = {k: presets.load_preset(kinds[k], v) if isinstance(v, str) else v for k, v in data.items() if k in kinds}
    return load_scenario(cfg)


def _shapes(what: str, sc):
    from .shapes import default_needs, scenario_needs

    needs = scenario_needs(sc) if sc is not None else default_needs()
    return {"gemm": needs.gemm, "grouped-gemm": needs.grouped, "attention": needs.attention,
            "memory": needs.memory_bytes}[what], needs


def _nccl(args, sc) -> int:
    from .nccl import commands
    from .shapes import scenario_needs
    from .sweeps import write_atomic

    if sc is None or not args.nccl_tests_dir:
        raise ConfigError([("arguments", "nccl needs --for-scenario FILE and --nccl-tests-dir DIR")])
    cmds = commands(scenario_needs(sc).collectives, args.nccl_tests_dir, sc.system.gpus_per_node, args.launcher)
    if not cmds:
        print("# the scenario runs no collective (one GPU per group)")
    for c in cmds:
        print(f"# {c.need.kind} on {c.need.ranks} ranks -> {c.log_name}\n{c.line}")
    if args.run:
        if not args.out:
            raise ConfigError([("--out", "--run needs --out DIR for the logs")])
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for c in cmds:
            res = subprocess.run(list(c.argv), capture_output=True, text=True, check=False)
            write_atomic(out / c.log_name, (res.stdout + res.stderr).splitlines())
            print(f"ran: {c.log_name} (exit {res.returncode})")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        sc = _scenario(args.for_scenario)
        if args.what == "nccl":
            return _nccl(args, sc)
        if not args.out:
            raise ConfigError([("--out", "give --out FILE for the CSV")])
        if args.warmup < 0 or args.repeats < 1:
            raise ConfigError([("--repeats", "warm-up must be ≥ 0 and repeats ≥ 1")])
        from .backends import make_backend
        from .sweeps import run_sweep, write_atomic

        try:
            backend = make_backend(args.backend, args.device, args.dtype)
        except ImportError:
            raise ConfigError([("--backend", "torch is not installed; pip install torch, or use --backend numpy")]) from None
        shapes, _ = _shapes(args.what, sc)
        shapes = shapes[: args.limit] if args.limit is not None else shapes
        lines, notes = run_sweep(backend, args.what, shapes, warmup=args.warmup, repeats=args.repeats,
                                 max_flops=args.max_flops)
        path = write_atomic(args.out, lines)
        print(f"wrote {path}: {len(shapes) - len(notes)} shapes measured, {len(notes)} skipped")
        return 0
    except ConfigError as e:
        print(f"error: {str(e)}".replace("\n", " "), file=sys.stderr)
        return 2
    except (OSError, RuntimeError, MemoryError) as e:  # a file that cannot be written, CUDA out of memory …
        print(f"error: {type(e).__name__}: {e}".replace("\n", " ")[:500], file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
