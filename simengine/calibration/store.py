"""Saved user systems: a calibrated SystemSpec and its provenance as one JSON file per name.

The caller passes the folder (the engine reads no environment variables; the CLI and the studio
choose it, by default ``~/.simengine/systems/``). Names are ``[A-Za-z0-9._-]{1,64}`` without a
leading dot or ``..`` (no path traversal). Writes are atomic (a temp file in the same folder, then
``os.replace``), and the system is validated before anything is written, so a failed or partial
calibration never overwrites a good saved system.

File layout: ``{"format": "simengine-user-system/1", "name": ..., "system": {SystemSpec},
"provenance": [{Provenance}, ...]}``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from ..config.system import SystemSpec
from ..errors import ConfigError, from_pydantic
from ..fileio import read_bounded, write_atomic
from .provenance import Provenance

FORMAT = "simengine-user-system/1"
NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")   # whole name (fullmatch: '$' also matched before a final newline)
MAX_FILE_BYTES = 32 * 2**20
MAX_SYSTEMS = 1000


def check_name(name: object) -> str:
    """The name itself when it is a safe file stem; ConfigError("name", …) otherwise."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name.startswith(".") or ".." in name:
        shown = repr(name)[:70]
        raise ConfigError([("name", f"{shown} is not a valid system name: use 1-64 of A-Z a-z 0-9 . _ - "
                                    "(no leading dot, no '..')")])
    return name


def check_not_preset(name: object) -> str:
    """``check_name``, and not a built-in system preset's name: presets resolve first
    (``presets.load_spec``), so a saved system of that name could never be picked by it."""
    from ..presets import list_presets

    name = check_name(name)
    if name in list_presets("systems"):
        raise ConfigError([("name", f"{name!r} is a built-in system preset: a saved system of that name could never "
                                    "be picked by it; choose another name")])
    return name


def _path(folder: str | os.PathLike, name: str) -> Path:
    if not isinstance(folder, (str, os.PathLike)):   # (None, 3: Path's TypeError)
        raise ConfigError([("systems_dir", f"expected a folder path, got {type(folder).__name__}")])
    return Path(folder) / f"{check_name(name)}.json"


def saved_text(name: str, system: SystemSpec, provenance: Sequence[Provenance] = ()) -> str:
    """The file ``save_system`` writes for ``system``: validated, and refused when the loader could
    not read it back (over ``MAX_FILE_BYTES``: never saved, nor over a good one). A CLI checks it
    before it writes anything else."""
    try:
        system = SystemSpec.model_validate(system.model_dump(mode="json"))
        prov = [Provenance.model_validate(p if isinstance(p, dict) else p.model_dump()) for p in provenance]
    except ValidationError as exc:
        raise from_pydantic(exc, "system") from None
    doc = {"format": FORMAT, "name": name, "system": system.model_dump(mode="json"),
           "provenance": [p.model_dump(mode="json") for p in prov]}
    data = json.dumps(doc, indent=1)
    if len(data.encode()) > MAX_FILE_BYTES:
        raise ConfigError([("system", f"not saved: the system with its tables is {len(data.encode()):,} bytes, more than "
                                      f"the {MAX_FILE_BYTES:,} a saved system may hold; sample the sweeps (fewer rows)")])
    return data


def save_system(folder: str | os.PathLike, name: str, system: SystemSpec,
                provenance: Sequence[Provenance] = ()) -> Path:
    """Validate and write ``system`` as ``folder/name.json`` atomically; returns the path."""
    path = _path(folder, name)
    _check_folder(folder)
    data = saved_text(name, system, provenance)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda fh: fh.write(data))
    except OSError as exc:
        raise ConfigError([("name", f"cannot save {name!r}: {exc.strerror or exc}")]) from None
    return path


def _check_folder(folder: str | os.PathLike) -> None:
    """ConfigError unless ``folder`` is a folder or may become one: a file there (/dev/null: "cannot
    save: File exists"), or a path the file system refuses (a name over its length limit, a NUL)."""
    shown = repr(str(folder)[:200])
    if "\x00" in str(folder):   # exists() says False (Python 3.11), then mkdir raises ValueError
        raise ConfigError([("systems_dir", f"{shown}: a NUL character in the path")])
    try:
        taken = Path(folder).exists() and not Path(folder).is_dir()
    except OSError as exc:   # ENAMETOOLONG: exists() raises it rather than say False
        raise ConfigError([("systems_dir", f"{shown}: {exc.strerror or exc}")]) from None
    if taken:
        raise ConfigError([("systems_dir", f"{str(folder)[:200]} is not a folder: saved systems go in a folder")])


def write_json(path: Path, data: object) -> None:
    """``data`` as indented JSON at ``path``, atomically (simengine/fileio.py)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda fh: json.dump(data, fh, indent=1))


def load_document(folder: str | os.PathLike, name: str) -> dict:
    """The saved file's JSON (format, name, system, provenance); ConfigError if missing or broken."""
    path = _path(folder, name)
    try:
        if not path.is_file():
            raise ConfigError([("system", f"no saved system named {name!r}")])
        try:
            raw = read_bounded(path, MAX_FILE_BYTES)
        except ValueError:   # swapped for a device, or larger than the limit
            raise ConfigError([("system", f"saved system {name!r} is no regular file of at most {MAX_FILE_BYTES // 2**20} MiB")]) from None
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError([("system", f"saved system {name!r} is unreadable ({type(exc).__name__})")]) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("system"), dict):
        raise ConfigError([("system", f"saved system {name!r} is not a {FORMAT} file")])
    return doc


def load_system(folder: str | os.PathLike, name: str) -> SystemSpec:
    """The saved, validated SystemSpec ``name``."""
    doc = load_document(folder, name)
    try:
        return SystemSpec.model_validate(doc["system"])
    except ValidationError as exc:
        raise from_pydantic(exc, "system") from None


def load_provenance(folder: str | os.PathLike, name: str) -> list[dict]:
    """The saved system's provenance, each entry validated (``Provenance``): a hand-edited or
    damaged file is a ConfigError naming the system, never a TypeError in whoever reads it."""
    prov = load_document(folder, name).get("provenance", [])
    try:
        if not isinstance(prov, list):
            raise TypeError
        return [Provenance.model_validate(p).model_dump(mode="json") for p in prov]
    except (TypeError, ValidationError):
        raise ConfigError([("system", f"saved system {name!r} has an unreadable provenance list")]) from None


def is_saved(folder: str | os.PathLike, name: str) -> bool:
    """Whether ``folder`` holds a saved system ``name`` (a valid name whose file exists): looked up
    directly, not in ``list_systems``, which lists at most ``MAX_SYSTEMS`` (a 1,001st saved system
    could not be used by its name)."""
    try:
        return Path(folder, f"{check_name(name)}.json").is_file()
    except (ConfigError, OSError, ValueError, TypeError):
        return False


def list_systems(folder: str | os.PathLike | None) -> list[str]:
    """Sorted names of the saved systems in ``folder`` (none when it does not exist)."""
    if folder is None:
        return []
    if not isinstance(folder, (str, os.PathLike)):
        raise ConfigError([("systems_dir", f"expected a folder path, got {type(folder).__name__}")])
    try:
        paths = sorted(Path(folder).glob("*.json"))[:MAX_SYSTEMS]
    except (OSError, ValueError):   # a path the file system refuses, an embedded NUL
        return []
    return [p.stem for p in paths if p.is_file() and NAME_RE.fullmatch(p.stem) and not p.stem.startswith(".")]
