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
from .hf_values import MAX_BYTES


def add_parser(sub) -> None:
    p = sub.add_parser("import-hf", help="map a Hugging Face config.json onto a ModelSpec")
    p.add_argument("path", help="path to a config.json ('-' reads stdin)")
    p.add_argument("--json", action="store_true", help="print one JSON object: model, warnings, unmapped")


def _read(path: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read(MAX_BYTES + 1)
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
        print(f"warning: {w}", file=sys.stderr)
    return json.dumps(res.model, indent=1)
