"""CLI contract: --json keys, readable table, exit 2 with one line naming the field."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simengine.cli import main

REPO = Path(__file__).resolve().parents[1]
KEYS = {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "hfu", "peak_memory_gib", "fits", "memory_by_stage",
        "breakdown_s", "num_parameters", "num_active_parameters", "model_flops_per_step", "cost_per_step_usd", "energy_per_step_j"}
STAGE_KEYS = {"stage", "peak_gib", "weights_gib", "grads_gib", "optimizer_gib", "activations_gib", "other_gib"}


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_contract(capsys):
    code, out, err = run(["estimate", "--model", "llama3-8b", "--system", "h100-sxm5-80gb", "--strategy", "small",
                          "--set", "system.num_gpus=8", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= KEYS
    assert set(data["memory_by_stage"][0]) >= STAGE_KEYS


def test_set_overrides_nested_fields(capsys):
    code, out, _ = run(["estimate", "--model", "small", "--system", "small", "--strategy", "small",
                        "--set", "model.num_layers=12", "--set", "system.gpu.memory_gib=40", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["memory_by_stage"][0]["weights_gib"] < 4 and data["memory_capacity_gib"] == 40


@pytest.mark.parametrize("path, said", [("strategy..tp", "empty field name"), ("strategy.tp.", "empty field name"),
                                         ("strategi.tp", "must start with"), ("system.num_gpus", "a whole number within its range")])
def test_a_set_path_is_refused_for_what_is_wrong_with_it(path, said, capsys):
    """``strategy..tp`` was told it "must start with strategy." (it does)."""
    code, _, err = run(["estimate", "--model", "small", "--system", "small", "--strategy", "small", "--set", f"{path}=" + ("1e30" if path == "system.num_gpus" else "1")], capsys)
    assert code == 2 and said in err and err.count("\n") == 1


def test_table_output(capsys):
    code, out, _ = run(["estimate", "--model", "small", "--system", "small", "--strategy", "small"], capsys)
    assert code == 0 and "step time" in out and "memory per stage" in out


def test_presets_listing(capsys):
    code, out, _ = run(["presets", "--json"], capsys)
    assert code == 0 and "llama3-405b" in json.loads(out)["models"]


@pytest.mark.parametrize("argv,field", [
    (["estimate", "--model", "small", "--system", "small", "--strategy", "small", "--set", "strategy.tp=3"], "strategy.tp"),
    (["estimate", "--model", "nope", "--system", "small", "--strategy", "small"], "model: unknown model preset"),
    (["estimate", "--model", "small", "--system", "small", "--strategy", "small", "--set", "strategy.tp=abc"], "strategy.tp"),
    (["estimate", "--model", "small", "--system", "small", "--strategy", "small", "--set", "bogus"], "--set"),
    (["estimate", "--model", "small"], "arguments"),
    (["estimate", "--model", "/nonexistent/x.json", "--system", "small", "--strategy", "small"], "no such file"),
    (["estimate", "--model", "/", "--system", "small", "--strategy", "small"], "a directory, not a file"),
    (["estimate", "--model", "/dev/zero", "--system", "small", "--strategy", "small"], "not a regular file"),
    (["simulate", "--model", "small", "--system", "small", "--strategy", "small", "--trace", " "], "--trace"),
    ([], "arguments"),
])
def test_bad_input_exits_2_with_one_line(argv, field, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert field in err


LONG = "a" * 5000 + ".json"   # one name beyond every file system's limit (255 bytes): ENAMETOOLONG
SCENARIO = ["--model", "small", "--system", "small", "--strategy", "small"]


@pytest.mark.parametrize("argv,field", [
    (["estimate", "--model", f"/tmp/{LONG}", "--system", "small", "--strategy", "small"], "model: File name too long"),
    (["estimate", "--model", LONG, "--system", "small", "--strategy", "small"], "model: invalid preset name"),
    (["calibrate", "--base", "small", "--name", "x", "--gemm", f"/tmp/{LONG}"], "--gemm: File name too long"),
    (["check-run", "--log", f"/tmp/{LONG}", *SCENARIO], "--log: File name too long"),
])
def test_a_path_too_long_for_the_file_system_exits_2_naming_the_option(argv, field, capsys):
    # once: Path.is_file raised OSError (errno 36) and the CLI printed "internal error", status 1
    code, _, err = run(argv, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {field}")


def test_simulate_writes_a_trace(tmp_path, capsys):
    trace = tmp_path / "t.json"
    code, out, err = run(["simulate", "--model", "small", "--system", "small", "--strategy", "small",
                          "--set", "strategy.global_batch_size=16", "--trace", str(trace), "--json"], capsys)
    assert code == 0, err
    assert json.loads(trace.read_text())["traceEvents"]
    assert json.loads(out)["fits"] is True


def test_simulate_says_whether_the_step_fits(capsys):
    """``simulate`` printed the peaks of a step ``estimate`` calls DOES NOT FIT without a verdict."""
    argv = ["--model", "small", "--system", "small", "--strategy", "small", "--set", "system.gpu.memory_gib=8", "--json"]
    code, out, err = run(["simulate", *argv], capsys)
    assert code == 0, err
    code, est, _ = run(["estimate", *argv], capsys)
    assert json.loads(out)["fits"] is False is json.loads(est)["fits"]


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "simengine", "estimate", "--model", "small", "--system", "small",
                        "--strategy", "small", "--set", "strategy.tp=5"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "strategy.tp" in r.stderr


@pytest.mark.parametrize("section", ["model", "system", "strategy"])
def test_schema_export(section, capsys):
    code, out, _ = run(["schema", section], capsys)
    schema = json.loads(out)
    assert code == 0 and schema["type"] == "object"
    props = schema["properties"]
    field = {"model": "hidden_size", "system": "num_gpus", "strategy": "tp"}[section]
    assert props[field]["description"]


def test_schema_rejects_unknown_section(capsys):
    code, _, err = run(["schema", "cluster"], capsys)
    assert code == 2 and err.startswith("error: arguments")


def test_a_spec_file_with_a_byte_order_mark_is_read(tmp_path, capsys):
    from simengine import presets

    path = tmp_path / "strategy.json"
    path.write_text("\ufeff" + json.dumps(presets.load_preset("strategies", "small")), encoding="utf-8")
    code, out, err = run(["estimate", "--model", "small", "--system", "small", "--strategy", str(path), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["step_time_s"] > 0
