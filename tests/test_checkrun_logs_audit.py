"""check-run's log reading, from a CLI audit: torchtitan's coloured console lines, its validation
lines, zeros that mean "not measured", and figures no GPU logs (each was a wrong step time, an
internal error or a 300-digit number)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simengine.checkrun import parse_training_log
from simengine.errors import ConfigError

TITAN = Path(__file__).resolve().parent / "data" / "logs" / "torchtitan_llama3_8b_8xh100.log"


def _titan_line(step: int, tps: str = "5,856", memory: str = "49.66", validate: bool = False) -> str:
    head = "validate step" if validate else "step"
    return (f"[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - {head}: {step:2d}  loss:  6.1000  grad_norm:  1.2000  "
            f"memory: {memory}GiB(52.28%)  tps: {tps}  tflops: 339.14  mfu: 34.29%")


def test_a_coloured_torchtitan_log_reads_as_the_plain_one():
    """torchtitan colours its console by default (Color: ESC[31m … between the fields): such a
    log gave 'no training iterations found'."""
    plain = parse_training_log(TITAN.read_text())
    colours = ("\x1b[31m", "\x1b[32m", "\x1b[38;2;180;60;0m", "\x1b[38;2;54;234;195m", "\x1b[34m", "\x1b[36m", "\x1b[39m")
    lines = []
    for line in TITAN.read_text().splitlines():
        for field, colour in zip(("step:", "loss:", "grad_norm:", "memory:", "tps:", "tflops:"), colours):
            line = line.replace(field, colour + field)
        lines.append(line + colours[-1])
    coloured = parse_training_log("\n".join(lines))
    assert coloured.iterations == plain.iterations and coloured.max_reserved_gib == plain.max_reserved_gib


def test_validation_lines_are_not_training_steps():
    """'validate step: N loss: … tps: …' counted as a training step: a 2.8 s step read 0.16 s."""
    log = parse_training_log("\n".join([_titan_line(10), _titan_line(15, tps="100,000", validate=True), _titan_line(20)]))
    assert [i.step for i in log.iterations] == [10, 20]
    assert {i.tokens_per_s_per_gpu for i in log.iterations} == {5856}


def test_a_zero_memory_is_not_measured_not_a_division_by_zero():
    log = parse_training_log("\n".join([_titan_line(10, memory="0.00"), _titan_line(20, memory="0.00")]))
    assert log.max_reserved_gib is None
    mega = (" [2025-01-01 00:00:01] iteration        1/     100 | elapsed time per iteration (ms): 900.0 |\n"
            "[Rank 0] (after 1 iterations) memory (MB) | allocated: 0.0 | max allocated: 0.0 | reserved: 0.0 | max reserved: 0.0")
    assert parse_training_log(mega).max_allocated_gib is None


@pytest.mark.parametrize("line", [
    " [2025-01-01 00:00:01] iteration        1/     100 | elapsed time per iteration (ms): 900.0 | "
    "throughput per GPU (TFLOP/s/GPU): 1e300 |",
    "[Rank 0] (after 1 iterations) memory (MB) | allocated: 1.0 | max allocated: 1e300",
    _titan_line(10, tps="999999999999"),
    _titan_line(10, tps="0.001"),
])
def test_figures_no_gpu_logs_are_refused_naming_the_line(line):
    with pytest.raises(ConfigError, match="line 1: .* is not a plausible value"):
        parse_training_log(line)



def test_a_switch_value_of_a_megabyte_is_cut_before_it_is_printed():
    """A 1 MB value in the argument dump was printed twice, on lines of a million characters."""
    from simengine.checkrun.stated import MAX_VALUE, parse_stated

    got = parse_stated(["  sequence_parallel ............................... " + "A" * 1_000_000])
    assert len(str(got["sequence_parallel"])) == MAX_VALUE


def test_flags_that_would_be_ignored_are_refused_before_any_output(capsys, tmp_path):
    """--holdout-log without --refit was checked after the comparison printed (or ignored), and
    --log beside --runs was ignored silently."""
    from simengine.cli import main

    args = ["check-run", "--log", str(TITAN), "--model", "llama3-8b", "--system", "h100-sxm5-80gb", "--strategy", "small",
            "--holdout-log", str(TITAN)]
    assert main(args) == 2
    out = capsys.readouterr()
    assert not out.out and "--refit" in out.err
    runs = tmp_path / "runs.json"
    runs.write_text("[]")
    assert main(["check-run", "--runs", str(runs), "--log", str(TITAN)]) == 2
    out = capsys.readouterr()
    assert not out.out and "--log would be ignored" in out.err
    assert main(["check-run", "--runs", str(runs), "--set", "strategy.tp=8"]) == 2
    assert "--set would be ignored" in capsys.readouterr().err


def test_a_logged_cpu_offload_is_compared_with_the_scenarios():
    """A run with --cpu-offloading --cpu-offloading-num-layers 40 checked against a scenario
    without offload says so (it predicted out-of-memory and no disagreement); the layer count of a
    run without --cpu-offloading is no offload."""
    from scenarios import scenario_dict

    from simengine.checkrun.stated import disagreements, parse_stated

    on = parse_stated(["    cpu_offloading .................................. True",
                       "    cpu_offloading_num_layers ....................... 40"])
    off = parse_stated(["    cpu_offloading .................................. False",
                        "    cpu_offloading_num_layers ....................... 40"])
    assert on == {"cpu_offloading_num_layers": 40} and off == {"cpu_offloading_num_layers": 0}
    cfg = scenario_dict(system={"num_gpus": 8}, strategy={"tp": 1, "pp": 1, "micro_batch_size": 1,
                                                          "global_batch_size": 8, "seq_len": 4096})
    assert disagreements(on, cfg) == ["the log states cpu_offloading_num_layers = 40, the scenario has 0"]
    assert disagreements(off, cfg) == []
