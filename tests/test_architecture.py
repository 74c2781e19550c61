"""The engine stays UI-free and pure, and imports flow one way (../shared/DESIGN.md data flow):
config → workload → cost → schedule/sim → estimate/api/cli. ``schedule`` is a leaf of pure
functions that config and workload may ask (DESIGN.md: "A schedule's rules live in its own
module, so Scenario checks, the workload builder and the UI ask it"); it imports none of them."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "simengine"

# package → packages it must never import (lower layers never reach up)
FORBIDDEN = {
    "config": {"workload", "cost", "sim", "calibration", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "workload": {"cost", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "cost": {"schedule", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "schedule": {"config", "workload", "cost", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "sim": {"config", "workload", "cost", "search", "estimate", "api", "cli", "pipeline", "timeline"},
    "calibration": {"workload", "cost", "schedule", "sim", "search", "estimate", "api", "cli", "pipeline", "timeline"},
}


def modules():
    return sorted(p for p in PKG.rglob("*.py"))


def imports_of(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg_parts = path.relative_to(PKG).parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(pkg_parts[: len(pkg_parts) - node.level + 1])
                mod = ".".join(["simengine", *base, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            yield mod
            for a in node.names:
                yield f"{mod}.{a.name}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_engine_is_ui_free_and_pure(path):
    src = path.read_text(encoding="utf-8")
    for mod in imports_of(path):
        assert not mod.startswith("streamlit"), f"{path} imports streamlit"
        assert mod not in ("pickle", "dill", "shelve"), f"{path} imports {mod}"
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("eval", "exec"), f"{path}: {node.func.id}()"
            if node.func.id == "print":
                assert path.name in ("cli.py", "__main__.py"), f"{path}: print() outside the CLI"
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
            raise AssertionError(f"{path}: reads environment variables")


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_import_direction(path):
    rel = path.relative_to(PKG).parts
    layer = rel[0] if len(rel) > 1 else None
    if layer not in FORBIDDEN:
        return
    for mod in imports_of(path):
        parts = mod.split(".")
        if parts[0] != "simengine" or len(parts) < 2:
            continue
        assert parts[1] not in FORBIDDEN[layer], f"{path} ({layer}) imports {mod}"
