"""The README's "real output" of the CLI is the CLI's output today (tools/readme_tables.py
regenerates it; it had drifted for several sessions: pp_comm 258.6 ms printed, 7.0 ms real)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "tools" / "readme_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_readme_example_is_the_clis_output():
    tool = _tool()
    shown = tool.block((ROOT / "README.md").read_text(encoding="utf-8"), "output:estimate")
    assert shown is not None, "README.md lost its <!-- BEGIN/END output:estimate --> markers"
    assert shown == tool.estimate_output(), "run: python tools/readme_tables.py --write"


def test_the_readme_names_the_command_it_shows():
    """The command the README prints above the block is the one the block is made from."""
    tool = _tool()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    args = tool.ESTIMATE_ARGS
    i = text.index("python -m simengine estimate --model " + args[2])
    shown = " ".join(text[i:text.index("#", i)].replace("\\\n", " ").split())
    assert shown == " ".join(("python", "-m", "simengine", *args)), shown
    assert subprocess.run([sys.executable, "-m", "simengine", *args], cwd=ROOT, capture_output=True).returncode == 0


def test_the_published_tables_median_is_a_speed_error():
    """Time rows' errors flip sign, memory rows stay out: + always means predicted too fast (a
    median over Korthikanti's iteration times, +8 %, and its MFU, −6…−13 %, read as "too fast")."""
    tool = _tool()
    assert tool.speed_error({"unit": "s", "error_pct": 8.0}) == -8.0
    assert tool.speed_error({"unit": "tokens/s/GPU", "error_pct": 5.0}) == 5.0
    assert tool.speed_error({"unit": "GiB", "error_pct": 3.0}) is None


def test_the_readme_lists_every_field_of_the_json_report():
    """README "`--json` prints the whole report: `…`" names the Report's fields and a stage's, in
    order (it had lost nine of them: mfu_causal, notes, gpu_us_per_launch, …)."""
    import re

    from simengine.report import Report, StageMemory

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"`--json` prints the whole report: `([^`]*)`", text)
    assert found is not None, "README.md lost its list of the --json report's fields"
    listed = " ".join(found.group(1).split())
    stage = re.search(r"memory_by_stage\[\{([^}]*)\}\]", listed)
    assert stage is not None
    assert [s.strip() for s in stage.group(1).split(",")] == list(StageMemory.model_fields)
    top = [s.strip() for s in re.sub(r"\[\{[^}]*\}\]", "", listed).split(",")]
    assert top == list(Report.model_fields)


def test_the_readme_study_tables_are_the_studies_output():
    """The MoE studies' tables (supernode domains, all-to-all overlaps, DualPipe) are what their
    benchmarks print today: hand-copied, they had drifted by up to 8 points and 1.8×."""
    tool = _tool()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for name, body in tool.study_tables().items():
        assert tool.block(text, name) == body, f"{name}: run python tools/readme_tables.py --write"


def test_the_readme_python_example_runs_as_written(capsys):
    """The README's Python block (preset names in a scenario, an estimate and its band, a search)
    runs as a newcomer would paste it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("```python\nfrom simengine import api\n") + len("```python\n")
    code = text[start:text.index("```", start)]
    exec(compile(code, "README.md", "exec"), {})   # noqa: S102  (the README's own code, not user input)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and "tokens/s" in lines[0] and "fits: True" in lines[0]
    assert all(line.startswith("tp") and line.endswith("tokens/s") for line in lines[1:])


def test_a_scenario_names_its_presets_as_the_cli_does():
    from simengine import api, presets
    from simengine.errors import ConfigError

    strategy = {"tp": 2, "global_batch_size": 64, "seq_len": 8192}
    by_name = api.estimate({"model": "llama3-8b", "system": "h100-sxm5-80gb", "strategy": strategy})
    by_dict = api.estimate({"model": presets.load_preset("models", "llama3-8b"),
                            "system": presets.load_preset("systems", "h100-sxm5-80gb"), "strategy": strategy})
    assert by_name == by_dict
    with pytest.raises(ConfigError, match="model"):
        api.estimate({"model": "no-such-model", "system": "h100-sxm5-80gb", "strategy": strategy})
    with pytest.raises(ConfigError, match="system"):
        api.estimate({"model": "llama3-8b", "system": "../etc/passwd", "strategy": strategy})
