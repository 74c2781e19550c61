"""The engine stays UI-free and pure, and imports flow one way (../shared/DESIGN.md data flow):
config → workload → cost → schedule/sim → estimate/api/cli; the studio (app.py, pages/, ui/) and the
CLI reach the engine only through its front door (simengine.api, simengine.presets,
simengine.config, simengine.errors). Every module is covered, top-level ones included. ``schedule`` is a leaf of pure
functions that config and workload may ask (DESIGN.md: "A schedule's rules live in its own
module, so Scenario checks, the workload builder and the UI ask it"); it imports none of them."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "simengine"

# package → packages it must never import (lower layers never reach up)
FORBIDDEN = {
    "config": {"workload", "cost", "sim", "calibration", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "workload": {"cost", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "cost": {"schedule", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "schedule": {"config", "workload", "cost", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "sim": {"config", "workload", "cost", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "calibration": {"workload", "cost", "schedule", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
}
# the core top-level modules compute; they never reach the front door or its consumers
_CONSUMERS = {"api", "cli", "validation", "importers", "studies"}
FORBIDDEN_TOP = dict.fromkeys(("estimate", "pipeline", "report", "timeline", "uncertainty"), _CONSUMERS)
# packages / modules allowed to import only these simengine parts (besides themselves)
FRONT_DOOR = {"api", "presets", "config", "errors"}
ONLY = {
    "importers": {"config", "errors"},                            # a file format → a ModelSpec dict
    "validation": FRONT_DOOR | {"calibration"},                   # measured runs evaluated through the API
    # the catalogue resolves names: presets, then the user's saved systems (calibration/store.py,
    # itself importing only config and errors)
    "presets": {"config", "errors", "calibration", "fileio"},   # fileio: why a named path is no file
    "errors": set(),
    "fileio": set(),
}
CLI_MODULES = {"cli.py", "__main__.py"}


def is_cli(mod: str) -> bool:
    """An import of a CLI module (``simengine.search.cli``, ``simengine.terminal.cli.warn``: the
    module or a name from it), which only CLI modules may make."""
    return "cli" in mod.split(".")[1:]


def modules():
    return sorted(PKG.rglob("*.py"))


def import_nodes(path: Path, base: Path = PKG, prefix: tuple[str, ...] = ("simengine",)):
    """(module, imported names) of every import in ``path``; relative imports resolved against
    ``prefix`` + the file's folder under ``base``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg_parts = path.relative_to(base).parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = [*prefix, *pkg_parts[: len(pkg_parts) - node.level + 1]]
                mod = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            yield mod, tuple(a.name for a in node.names)


def imports_of(path: Path, base: Path = PKG, prefix: tuple[str, ...] = ("simengine",)):
    for mod, names in import_nodes(path, base, prefix):
        yield mod
        for n in names:
            yield f"{mod}.{n}"


def simengine_parts(path: Path):
    """The second-level simengine names ``path`` imports (``simengine.cost.stage`` → ``cost``)."""
    for mod in imports_of(path):
        parts = mod.split(".")
        if parts[0] == "simengine" and len(parts) >= 2:
            yield parts[1], mod


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_engine_is_ui_free_and_pure(path):
    src = path.read_text(encoding="utf-8")
    for mod in imports_of(path):
        assert not mod.startswith("streamlit"), f"{path} imports streamlit"
        assert mod.split(".")[0] not in ("pickle", "dill", "shelve"), f"{path} imports {mod}"
        assert mod not in ("os.environ", "os.getenv"), f"{path} imports {mod}"
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("eval", "exec"), f"{path}: {node.func.id}()"
            if node.func.id == "print":
                assert path.name in CLI_MODULES, f"{path}: print() outside the CLI"
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv"):
            raise AssertionError(f"{path}: reads environment variables")


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_import_direction(path):
    parts = path.relative_to(PKG).parts
    own = parts[0].removesuffix(".py")
    top_level = len(parts) == 1
    for name, mod in simengine_parts(path):
        if name == own:
            continue
        if name == "cli" or is_cli(mod):
            assert path.name in CLI_MODULES, f"{rel(path)} imports the CLI module {mod}"
            continue
        if top_level:
            assert name not in FORBIDDEN_TOP.get(own, set()), f"{rel(path)} imports {mod}"
        elif own in FORBIDDEN:
            assert name not in FORBIDDEN[own], f"{rel(path)} ({own}) imports {mod}"
        if own in ONLY and not (path.name in CLI_MODULES and name in FRONT_DOOR):
            assert name in ONLY[own], f"{rel(path)} ({own}) may import only {sorted(ONLY[own])} of simengine, not {mod}"
        if own == "presets" and name == "calibration":
            assert mod.startswith("simengine.calibration.store"), f"{rel(path)}: the catalogue reads saved systems only"
        if own == "validation" and name == "calibration":
            assert path.name == "b200.py", f"{rel(path)}: only b200.py builds the calibrated B200 system"


def cli_modules():
    return sorted([PKG / "cli.py", *(p for p in PKG.rglob("cli.py") if p.parent != PKG)])


@pytest.mark.parametrize("path", cli_modules(), ids=rel)
def test_cli_uses_the_front_door(path):
    own = path.relative_to(PKG).parts[0]
    for mod, names in import_nodes(path):
        parts = mod.split(".")
        if parts[0] != "simengine" or len(parts) < 2:
            continue
        if path.parent == PKG:  # simengine/cli.py: the front door + the subcommand modules it registers
            ok = parts[1] in FRONT_DOOR or is_cli(mod) or (names and all(n == "cli" for n in names))
        else:  # a subcommand module: the front door, its own package, shared CLI helpers (*.cli)
            ok = parts[1] in FRONT_DOOR or parts[1] == own or is_cli(mod)
        assert ok, f"{rel(path)} imports {mod}; the CLI uses simengine.api / presets / config / errors"


def studio_files():
    return sorted([REPO / "app.py", *(REPO / "pages").glob("*.py"), *(REPO / "ui").glob("*.py")])


@pytest.mark.parametrize("path", studio_files(), ids=rel)
def test_studio_uses_the_front_door(path):
    for mod, names in import_nodes(path, REPO, ()):
        parts = mod.split(".")
        if parts[0] != "simengine":
            continue
        used = [parts[1]] if len(parts) >= 2 else list(names) or [""]  # "from simengine import api" names the module
        assert set(used) <= FRONT_DOOR, f"{rel(path)} imports {mod} {names}: add what the UI needs to simengine.api"


def test_every_module_is_covered():
    covered = set(modules())
    assert PKG / "api.py" in covered and PKG / "cli.py" in covered and PKG / "errors.py" in covered
    assert all(p.suffix == ".py" for p in covered) and len(covered) == len(list(PKG.rglob("*.py")))
    assert len(studio_files()) >= 3
