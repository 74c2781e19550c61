"""Calibration layering: one reader per format under formats/, no import cycle, and one table of
collective kinds / algorithms shared by the cost model and calibration."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from simengine import collectives
from simengine.calibration import collectives as cal_coll
from simengine.calibration import fit

PKG = Path(__file__).resolve().parents[1] / "simengine"
CAL = PKG / "calibration"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _internal_imports(path: Path) -> set[str]:
    """simengine.calibration.* modules imported by ``path`` (resolved relative imports)."""
    me = _module_name(path).split(".")
    pkg = me if path.name == "__init__.py" else me[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    names = {_module_name(p) for p in CAL.rglob("*.py")}
    return {m for m in out if m in names and m != _module_name(path)}


def test_no_import_cycle_among_calibration_modules():
    graph = {_module_name(p): _internal_imports(p) for p in CAL.rglob("*.py")}
    # the package __init__ files re-export; only they may import their own package's modules upward
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if nxt.startswith(node + ".") and node.endswith(("calibration", "formats")):
                continue  # a package importing its own submodules is not a cycle
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack, node, nxt]))
            if state.get(nxt) is None:
                visit(nxt, [*stack, node])
        state[node] = 2

    for name in graph:
        if state.get(name) is None:
            visit(name, [])
    assert "simengine.calibration.formats.simumax_op_table" in graph  # the renamed reader exists
    assert not (CAL / "b200.py").exists()


def test_each_calibration_module_imports_alone():
    mods = sorted(_module_name(p) for p in CAL.rglob("*.py"))
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}:\n"
        "    for k in [k for k in sys.modules if k.startswith('simengine')]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module(m)\n"
        "print('ok', len(" + repr(mods) + "))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=PKG.parent, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("ok")


def test_formats_readers_do_not_import_calibration_top_modules():
    top = {"simengine.calibration.calibrate", "simengine.calibration.gemm", "simengine.calibration.fit",
           "simengine.calibration.table", "simengine.calibration"}
    for p in (CAL / "formats").glob("*.py"):
        assert not (_internal_imports(p) & top), p.name


def test_one_collectives_table_shared_by_cost_and_calibration():
    assert cal_coll.bus_factor is collectives.bus_factor
    assert fit.bus_factor is collectives.bus_factor
    src = (PKG / "cost" / "comm.py").read_text(encoding="utf-8")
    assert "from ..collectives import" in src and "_STEPS" not in src
    assert set(collectives.KINDS) == {k.value for k in collectives.CollectiveKind}


@pytest.mark.parametrize("n", [2, 4, 8, 16, 72])
def test_algorithm_table_entries(n):
    ar = collectives.algorithm("all_reduce")
    assert ar.name == "ring"
    assert ar.wire(n) == pytest.approx(2 * (n - 1) / n) and ar.steps(n) == 2 * (n - 1)
    nvls = collectives.algorithm("all_reduce", "nvls")
    assert nvls.in_network and nvls.wire(n) == 1.0 and nvls.busbw(n) == ar.busbw(n)
    tree = collectives.algorithm(collectives.CollectiveKind.ALL_REDUCE, "tree")
    assert tree.steps(n) <= ar.steps(n)
    a2a = collectives.algorithm("all_to_all")
    assert a2a.name == "pairwise" and a2a.wire(n) == pytest.approx((n - 1) / n) and a2a.steps(n) == n - 1
    assert collectives.wire_factor("p2p", n) == 1.0 and collectives.alpha_steps("p2p", n) == 1.0


def test_ranks_from_factor_inverts_bus_factor():
    for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for n in (2, 3, 8, 64):
            assert collectives.ranks_from_factor(kind, collectives.bus_factor(kind, n)) == pytest.approx(n)
    with pytest.raises(ValueError):
        collectives.kind_of("broadcast")


def test_package_names_stay_functions_whatever_is_imported_first():
    code = ("import simengine.calibration.cli, simengine.calibration.calibrate, simengine.checkrun.cli\n"
            "import simengine.checkrun.compare\n"
            "from simengine.calibration import calibrate\n"
            "from simengine.checkrun import measure, parse_training_log\n"
            "assert callable(calibrate) and callable(measure) and callable(parse_training_log), calibrate\n"
            "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=PKG.parent, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]
