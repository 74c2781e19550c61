"""The preset catalogue: ``presets/{models,systems,strategies}/*.json`` next to the package.

One JSON file per preset; the file name (without ``.json``) is the preset name. Every model and
system preset carries a ``source`` citing the paper, config.json or datasheet its figures come
from. The size presets ``small``, ``medium`` and ``large`` exist under all three kinds and combine
into a valid scenario (:func:`size_scenario`).

Pure functions: nothing here prints, reads environment variables or imports the UI. File reads
are cached (``functools.lru_cache``); callers always receive deep copies, so mutating a returned
dict never changes what the next caller sees.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache, cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .config import ModelSpec, StrategySpec, SystemSpec
from .errors import ConfigError, from_pydantic
from .fileio import not_a_file, read_bounded


def _preset_dir() -> Path:
    """``simengine/_presets`` in an installed wheel (pyproject maps the top-level ``presets/``
    folder there as package data), else ``<checkout>/presets`` next to the package."""
    here = Path(__file__).resolve().parent
    installed = here / "_presets"
    return installed if installed.is_dir() else here.parent / "presets"


PRESET_DIR: Path = _preset_dir()
"""Root of the catalogue: ``<repo>/presets`` in a checkout, ``simengine/_presets`` when installed."""

KINDS: tuple[str, ...] = ("models", "systems", "strategies")
SCENARIO_SIZES: tuple[str, ...] = ("small", "medium", "large")

_SPEC_CLASS: dict[str, type[ModelSpec] | type[SystemSpec] | type[StrategySpec]] = {"models": ModelSpec, "systems": SystemSpec, "strategies": StrategySpec}
# Section of a scenario each kind fills; used as the field prefix of validation errors.
_SECTION: dict[str, str] = {"models": "model", "systems": "system", "strategies": "strategy"}
# A preset name is one file name in one folder: no separators, no leading dot, no "..".
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")   # fullmatch ($ matched before a final newline)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError([("kind", f"unknown preset kind {kind!r}; known: {', '.join(KINDS)}")])


@cache
def _names(kind: str) -> tuple[str, ...]:
    folder = PRESET_DIR / kind
    if not folder.is_dir():
        return ()
    return tuple(sorted(p.stem for p in folder.glob("*.json") if p.is_file()))


@lru_cache(maxsize=256)
def _read_preset(kind: str, name: str) -> Any:
    return _parse_file(PRESET_DIR / kind / f"{name}.json", _SECTION[kind])


MAX_SPEC_BYTES = 16 * 2**20


def _parse_file(path: Path, field: str) -> Any:
    try:
        raw = read_bounded(path, MAX_SPEC_BYTES)   # no device or pipe, never past the limit
        text = raw.decode("utf-8-sig")   # a byte-order mark (Windows editors) is dropped
    except OSError as e:
        raise ConfigError([(field, f"cannot read {path}: {e.strerror or e}")]) from None
    except UnicodeDecodeError:
        raise ConfigError([(field, f"{path}: not UTF-8 text")]) from None
    except ValueError as e:   # read_bounded's reason: no regular file, or larger than the limit
        raise ConfigError([(field, f"cannot read {path}: {e}; not a spec file")]) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError([(field, f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}")]) from None
    except (ValueError, RecursionError) as e:  # e.g. an integer beyond Python's 4300-digit limit
        raise ConfigError([(field, f"{path}: unreadable JSON ({str(e)[:80]})")]) from None


def list_presets(kind: str) -> list[str]:
    """Sorted preset names of ``kind`` ("models", "systems" or "strategies")."""
    _check_kind(kind)
    return list(_names(kind))


def load_preset(kind: str, name: str) -> dict[str, Any]:
    """The raw JSON dict of preset ``name`` (a deep copy; not yet validated).

    Raises ConfigError for an unknown kind, a name that is not a plain file name (path
    separators, leading dot, "..") or a preset that does not exist.
    """
    _check_kind(kind)
    field = _SECTION[kind]   # the scenario section the preset fills (the CLI's --model / --system / --strategy)
    if not isinstance(name, str):
        raise ConfigError([(field, f"preset name must be a string, got {type(name).__name__}")])
    stem = name[:-5] if name.endswith(".json") else name
    if not _NAME_RE.fullmatch(stem) or ".." in stem:
        raise ConfigError([(field, f"invalid preset name {name!r}: use a name from the catalogue, not a path")])
    known = _names(kind)
    if stem not in known:
        raise ConfigError([(field, f"unknown {field} preset {name!r}; known: {', '.join(known) or '(none)'}")])
    data = _read_preset(kind, stem)
    if not isinstance(data, dict):
        raise ConfigError([(field, f"{PRESET_DIR / kind / (stem + '.json')}: expected a JSON object")])
    return copy.deepcopy(data)


def _looks_like_path(name_or_path: str | Path) -> bool:
    """A Path, a string with a path separator, or an existing ``*.json`` file in the working directory."""
    if isinstance(name_or_path, Path):
        return True
    s = str(name_or_path)
    if "/" in s or "\\" in s:
        return True
    return s.endswith(".json") and not not_a_file(s)


def load_spec(kind: str, name_or_path: str | Path, *, user_systems: str | Path | None = None,
              ) -> ModelSpec | SystemSpec | StrategySpec:
    """A validated spec from a preset name or from a path to a ``.json`` file.

    A ``Path``, a string with a path separator, or an existing ``*.json`` file in the working
    directory is read as a file (never cached: users edit their files; meant for the CLI, not for
    names arriving from a browser, which should go through :func:`load_preset`); anything else
    is a preset name. A system name that is no preset is then looked up among the saved user
    systems in the folder ``user_systems`` (``simengine.calibration.store``; the caller picks the
    folder). Errors (missing file, bad JSON, invalid field) raise ConfigError with dotted field
    paths such as ``model.hidden_size``.
    """
    _check_kind(kind)
    section = _SECTION[kind]
    if _looks_like_path(name_or_path):
        path = Path(name_or_path)
        if what := not_a_file(path):   # a directory or a device (/dev/zero would never end) is no spec file either
            raise ConfigError([(section, f"{what}: {str(path)[:200]}")])
        data = _parse_file(path, section)
        origin = str(path)
    elif kind == "systems" and user_systems is not None and str(name_or_path) not in _names(kind):
        from .calibration.store import is_saved, load_system

        if is_saved(user_systems, str(name_or_path)):
            return load_system(user_systems, str(name_or_path))
        try:
            data = load_preset(kind, str(name_or_path))
        except ConfigError as e:   # say where the saved systems were looked for too
            raise ConfigError([(f, m + (f"; no saved system of that name in {str(user_systems)[:200]}" if m.startswith("unknown") else ""))
                               for f, m in e.issues]) from None
        origin = f"preset {kind}/{name_or_path}"
    else:
        data = load_preset(kind, str(name_or_path))
        origin = f"preset {kind}/{name_or_path}"
    if not isinstance(data, dict):
        raise ConfigError([(section, f"{origin}: expected a JSON object")])
    try:
        return _SPEC_CLASS[kind].model_validate(data)
    except ValidationError as e:
        raise from_pydantic(e, section) from None


def size_scenario(size: str) -> dict[str, dict[str, Any]]:
    """``{"model": ..., "system": ..., "strategy": ...}`` plain dicts of a size preset
    ("small", "medium" or "large"), ready for ``simengine.config.load_scenario``."""
    if size not in SCENARIO_SIZES:
        raise ConfigError([("size", f"unknown scenario size {size!r}; known: {', '.join(SCENARIO_SIZES)}")])
    return {_SECTION[kind]: load_preset(kind, size) for kind in KINDS}


__all__ = [
    "KINDS", "PRESET_DIR", "SCENARIO_SIZES", "list_presets", "load_calibration", "load_preset", "load_spec", "not_a_file",
    "size_scenario",
]


def named_scenarios() -> dict[str, dict[str, Any]]:
    """``presets/scenarios.json``: for each named scenario the model, system and strategy preset
    names and the job size (``num_gpus`` overrides the system preset's)."""
    data = _parse_file(PRESET_DIR / "scenarios.json", "scenarios")
    return copy.deepcopy(data["scenarios"])


def load_calibration(name: str) -> dict[str, Any]:
    """``presets/calibration/<name>.json``: measured calibration data shipped with the catalogue
    (e.g. ``b200-nccl-fits``, the alpha-beta NCCL fits of the B200 validation node)."""
    stem = name[:-5] if name.endswith(".json") else name
    folder = PRESET_DIR / "calibration"
    known = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
    if not _NAME_RE.fullmatch(stem) or stem not in known:
        raise ConfigError([("calibration", f"unknown calibration preset {name!r}; known: {', '.join(known) or '(none)'}")])
    data = _parse_file(folder / f"{stem}.json", "calibration")
    if not isinstance(data, dict):
        raise ConfigError([("calibration", f"{folder / (stem + '.json')}: expected a JSON object")])
    return data


def scenario_preset(name: str) -> dict[str, Any]:
    """The {"model", "system", "strategy"} dicts of a named scenario (see :func:`named_scenarios`)."""
    table = named_scenarios()
    if name not in table:
        raise ConfigError([("scenario", f"unknown scenario '{name}'; known: {', '.join(sorted(table))}")])
    entry = table[name]
    system = load_preset("systems", entry["system"])
    if "num_gpus" in entry:
        system["num_gpus"] = entry["num_gpus"]
    return {"model": load_preset("models", entry["model"]), "system": system, "strategy": load_preset("strategies", entry["strategy"])}
