"""``python -m simengine import-hf config.json [--json]``: a Hugging Face config.json as a
ModelSpec JSON (registered by ``simengine/cli.py``).

Without ``--json`` stdout is the ModelSpec alone (save it and pass it to ``--model``) and each
warning goes to stderr as one ``warning:`` line; ``--json`` prints one object
``{model, warnings, unmapped}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import ConfigError
from ..terminal.cli import warn
from .hf_values import MAX_BYTES


def add_parser(sub) -> None:
    p = sub.add_parser("import-hf", help="map a Hugging Face config.json onto a ModelSpec")
    p.add_argument("path", help="path to a config.json ('-' reads stdin)")
    p.add_argument("--json", action="store_true", help="print one JSON object: model, warnings, unmapped")


def _read(path: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read(MAX_BYTES + 1)
        from ..presets import not_a_file   # why a named path is no regular file (fileio.py)

        why = not_a_file(path)   # a device or pipe would never end (or never open)
        if why:
            raise ConfigError([("config.json", f"cannot read {path[:200]}: {why}")])
        with Path(path).open("rb") as fh:
            return fh.read(MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError([("config.json", f"cannot read {path}: {e.strerror or e}")]) from None


def run(args: argparse.Namespace) -> str:
    from ..api import import_hf_config

    res = import_hf_config(_read(args.path))
    if args.json:
        return res.model_dump_json()
    for w in res.warnings:
        warn(w)   # a key of the user's config.json may hold a newline or an escape: one inert line
    return json.dumps(res.model, indent=1)
