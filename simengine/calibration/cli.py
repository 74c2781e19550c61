"""``python -m simengine calibrate``: measured files → a named, saved user system.

Prints what was read (format, rows, sha256), each fit with its error, and what was refused (rows
dropped, tables not used, warnings). A file it cannot use raises ``ConfigError`` (the main CLI
prints one line and exits 2); nothing is saved then, so a good saved system is never overwritten.
The folder of saved systems is chosen here, in the CLI layer: ``--systems-dir`` or
``~/.simengine/systems``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import ConfigError


def default_systems_dir() -> Path:
    return Path.home() / ".simengine" / "systems"


def systems_dir(args: argparse.Namespace) -> Path:
    given = getattr(args, "systems_dir", None)
    return Path(given) if given else default_systems_dir()


def add_systems_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--systems-dir", metavar="DIR",
                   help="folder of saved user systems (default ~/.simengine/systems)")


def add_parser(sub) -> None:
    c = sub.add_parser("calibrate", help="fit measured GEMM / attention / nccl-tests files into a named system")
    c.add_argument("--gemm", metavar="FILE", help="GEMM sweep CSV (generic m,n,k; OpenXLA table; SimuMax op table)")
    c.add_argument("--nccl", metavar="FILE", nargs="+", action="extend", help="nccl-tests stdout log(s)")
    c.add_argument("--attention", metavar="FILE", help="flash-attention sweep CSV")
    c.add_argument("--grouped-gemm", metavar="FILE", help="grouped (MoE) GEMM sweep CSV")
    c.add_argument("--memory", metavar="FILE", help="memory-bandwidth (copy) sweep CSV")
    c.add_argument("--base", required=True, help="system preset (or JSON file, or saved system) to calibrate")
    c.add_argument("--name", required=True, help="name to save the calibrated system under ([A-Za-z0-9._-]{1,64})")
    c.add_argument("--out", metavar="PATH", help="also write the calibrated SystemSpec JSON to PATH")
    c.add_argument("--replace", action="store_true", help="overwrite a saved system of the same name (else refused)")
    add_systems_dir(c)


# the engine's field of each input (calibrate.py read_input) → the flag that gave it
_FLAG_OF = {"gemm_csv": "--gemm", "nccl_log": "--nccl", "attention_csv": "--attention",
            "grouped_gemm_csv": "--grouped-gemm", "memory_csv": "--memory"}


def _path(raw: str | None, field: str) -> Path | None:
    return None if raw is None else _file(raw, field)


def _file(raw: str, field: str) -> Path:
    from ..presets import not_a_file  # why a named path is no regular file (fileio.py)

    if what := not_a_file(raw):
        raise ConfigError([(field, f"{what}: {raw[:200]}")])
    return Path(raw)


def run(args: argparse.Namespace) -> int:
    from .. import presets
    from ..config import SystemSpec
    from .calibrate import calibrate_with_summary
    from .store import check_not_preset, is_saved, save_system, saved_text

    name = check_not_preset(args.name)   # before the work: a preset's name could never pick the result
    if args.out is not None and not args.out.strip():   # checked before the work, not silently skipped after it
        raise ConfigError([("--out", "an empty path: give the file to write the calibrated system to")])
    folder = systems_dir(args)
    if not getattr(args, "replace", False) and is_saved(folder, name):   # as the studio: never silently
        raise ConfigError([("--name", f"a system named {name} is already saved in {str(folder)[:200]}; pass --replace "
                                      "to overwrite it, or choose another name")])
    base = presets.load_spec("systems", args.base, user_systems=folder)
    if not isinstance(base, SystemSpec):  # load_spec("systems", …) always builds a SystemSpec
        raise ConfigError([("--base", f"{args.base[:200]} is not a system")])
    gemm, att, grp = _path(args.gemm, "--gemm"), _path(args.attention, "--attention"), _path(args.grouped_gemm, "--grouped-gemm")
    mem = _path(args.memory, "--memory")
    logs = [_file(f, "--nccl") for f in (args.nccl or [])]
    if not (gemm or att or grp or mem or logs):
        raise ConfigError([("arguments", "give at least one of --gemm, --nccl, --attention, --grouped-gemm, --memory")])
    if args.out:
        _check_out(args.out, [f for f in (gemm, att, grp, mem, *logs) if f is not None])
    try:
        system, summary = calibrate_with_summary(base.model_copy(update={"name": name}), gemm, logs or None,
                                                 attention_csv=att, grouped_gemm_csv=grp, memory_csv=mem)
    except ConfigError as e:   # the flag that gave the file, not the engine's field (gemm_csv, nccl_log)
        raise ConfigError([(_FLAG_OF.get(f, f), m) for f, m in e.issues]) from None
    for line in summary_lines(summary):
        print(line)
    saved_text(name, system, summary.provenance)   # a system the loader could not read back fails before any write
    if args.out:   # then --out: a path it cannot write fails the command before anything is saved
        _write_json(Path(args.out), system.model_dump(mode="json"))
        print(f"wrote: {args.out}")
    path = save_system(folder, name, system, summary.provenance)
    print(f"saved: {name} -> {path}   (coverage of a scenario: python -m simengine coverage --system {name} ...)")
    return 0


def summary_lines(summary) -> list[str]:
    """Readable lines: what was read, each fit with its error, what was refused."""
    out = ["read:"]
    for p in summary.provenance:
        err = "" if p.fit_error is None else f", fit error {p.fit_error * 100:.1f}%"
        out.append(f"  {p.target:44s} {p.file or '(content)'}: {p.rows_used} rows used{err}; sha256 {p.sha256[:12]}")
    if summary.gemm_format:
        out.append(f"  GEMM format {summary.gemm_format}: {summary.gemm_points} points {summary.gemm_points_by_dtype}")
    for f in summary.collective_fits:
        out.append(f"  {'used' if f.used else 'not used':8s} {f.source} table {f.table}: {f.kind} on {f.n_ranks} ranks, "
                   f"{f.tier}: busbw {f.busbw_gbs:.1f} GB/s ({f.efficiency:.2f} of {f.tier_bandwidth_gbs:g}), "
                   f"alpha {f.alpha_us:.1f} us, RMS error {f.rel_rms_error * 100:.1f}% over {f.n_points} sizes")
    if summary.gemm_rows_skipped:
        out.append(f"refused: GEMM rows by dtype {summary.gemm_rows_skipped} (simengine trains in bf16, fp8 or nvfp4)")
    out += [f"refused/warning: {w}" for w in summary.warnings]
    return out


def _check_out(raw: str, inputs: list[Path]) -> None:
    """Before any work: --out names a file in a folder that exists (it creates none: a typo made a
    folder at the file system's root) and none of the measured files read (``--out sweep.csv``
    replaced the measurements with the JSON)."""
    out = Path(raw)
    try:
        folder = out.parent.is_dir()
    except OSError as e:   # a name longer than the file system's limit: is_dir raises, not False
        raise ConfigError([("--out", f"cannot write {raw[:200]}: {e.strerror or e}")]) from None
    if not folder:
        raise ConfigError([("--out", f"no folder {str(out.parent)[:200]}: create it first (--out creates no folders)")])
    real = os.path.realpath(out)
    for f in inputs:
        if real == os.path.realpath(f):
            raise ConfigError([("--out", f"{raw[:200]} is a measured file this command reads: writing the system "
                                         "there would replace the measurements; give another path")])


def _write_json(path: Path, data: object) -> None:
    """Atomic write (temp file in the same folder + os.replace)."""
    from .store import write_json

    try:
        write_json(path, data)
    except OSError as exc:
        raise ConfigError([("--out", f"cannot write {str(path)[:200]}: {exc.strerror or exc}")]) from None
