"""``pip wheel .`` builds a wheel holding the engine, its presets and the bundled validation data
and a ``simengine`` console script; the wheel works on its own (presets found inside the package).
Built from a copy of the sources in a temporary folder so the checkout stays clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "simengine", "presets")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / name)
    out = tmp_path_factory.mktemp("wheel")
    # no build isolation: uses the installed setuptools + wheel (requirements.txt), no network
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
                       cwd=src, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    (whl,) = out.glob("simengine-*.whl")
    return whl


def test_wheel_contains_presets_validation_data_and_the_script(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("models", "systems", "strategies"):
        expected = {f"simengine/_presets/{kind}/{p.name}" for p in (REPO / "presets" / kind).glob("*.json")}
        assert expected and expected <= names, kind
    assert "simengine/_presets/scenarios.json" in names and "simengine/_presets/calibration/b200-nccl-fits.json" in names
    for f in ("b200_megatron_runs.csv", "b200_op_efficiency.csv", "published_runs.csv", "ATTRIBUTION.md"):
        assert f"simengine/validation/data/{f}" in names, f
    assert "simengine/api.py" in names and "simengine/validation/published/mapping.py" in names
    assert not any(n.startswith(("tests/", "ui/", "pages/")) for n in names)
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "simengine = simengine.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_unpacked_wheel_finds_its_presets_and_data(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("from simengine import presets; from simengine.validation import data; "
            "print(presets.PRESET_DIR); print(len(presets.list_presets('models'))); "
            "print(len(data.read_text('b200_megatron_runs.csv').splitlines()))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site)}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    preset_dir, n_models, n_lines = p.stdout.split()
    assert Path(preset_dir) == site / "simengine" / "_presets"
    assert int(n_models) == len(list((REPO / "presets" / "models").glob("*.json")))
    assert int(n_lines) == 21  # header + the 20 B200 runs


def test_the_wheel_requires_every_package_the_engine_imports(wheel):
    """Each third-party module ``simengine`` imports is a requirement of the wheel or of one of its
    extras; only the GPU measurement kit's torch stays out (simengine/measure: refused with a line
    when missing). ``simengine search`` on a terminal failed with "No module named 'tqdm'" after a
    plain ``pip install .``."""
    import ast
    import re

    imported: set[str] = set()
    for f in (REPO / "simengine").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third = {m for m in imported if m not in sys.stdlib_module_names and m not in ("simengine", "__future__")}
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    lines = zipfile.ZipFile(wheel).read(meta).decode().splitlines()
    required = {re.split(r"[ <>=!;\[]", ln.split(":", 1)[1].strip())[0].lower().replace("-", "_")
                for ln in lines if ln.startswith("Requires-Dist:")}
    assert {"pydantic", "numpy", "tqdm"} <= required
    missing = {m for m in third if m.lower() not in required} - {"torch", "pydantic_core"}
    assert not missing, f"imported by simengine but not required by the wheel: {sorted(missing)}"
