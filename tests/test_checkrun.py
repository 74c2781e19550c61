"""check-run: training-log parsing (Megatron-LM, torchtitan), warm-up skipping, the comparison
with the prediction, and the compute-scale refit with its hold-out check."""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
from pathlib import Path

import pytest

from simengine import presets
from simengine.api import estimate
from simengine.checkrun import parse_training_log
from simengine.checkrun.compare import compare, measure, refit_compute_scale, scaled_config
from simengine.cli import main
from simengine.errors import ConfigError

LOGS = Path(__file__).resolve().parent / "data" / "logs"
MEGATRON = LOGS / "megatron_mixtral8x7b_16xh100.log"
TITAN = LOGS / "torchtitan_llama3_8b_8xh100.log"


def _cfg():
    return copy.deepcopy(presets.size_scenario("small"))


def _megatron_log(times_ms, alloc_mb=None):
    lines = ["some banner", "NCCL INFO noise"]
    for i, t in enumerate(times_ms, start=1):
        lines.append(f" [2025-01-01 00:00:{i:02d}] iteration {i:8d}/     100 | consumed samples: {8 * i:12d} | "
                     f"elapsed time per iteration (ms): {t:.1f} | throughput per GPU (TFLOP/s/GPU): 100.0 | "
                     f"learning rate: 1.0E-04 | global batch size:     8 | lm loss: 2.0E+00 |")
        if alloc_mb and i == 1:
            for rank, mb in enumerate(alloc_mb):
                lines.append(f"[Rank {rank}] (after 1 iterations) memory (MB) | allocated: {mb / 2:.1f} | max allocated: "
                             f"{mb:.1f} | reserved: {mb * 1.1:.1f} | max reserved: {mb * 1.2:.1f}")
    return "\n".join(lines)


def test_real_megatron_excerpt_parses():
    log = parse_training_log(MEGATRON)
    assert log.framework == "megatron" and [i.step for i in log.iterations] == [2, 3, 4, 43, 44, 45]
    assert [i.time_s for i in log.iterations] == pytest.approx([5.6301, 5.4106, 5.3641, 5.4449, 5.5338, 5.7186])
    assert [i.tflops_per_gpu for i in log.iterations] == pytest.approx([231.9, 241.4, 243.5, 239.8, 236.0, 228.4])
    # the thread's memory report (Rank 1, after 1 iteration), MiB → GiB
    assert log.max_allocated_gib == pytest.approx(54250.98583984375 / 1024) and log.max_reserved_gib == pytest.approx(61480 / 1024)
    assert log.stated == {"world_size": 16, "data_parallel_size": 4, "context_parallel_size": 1,
                          "tensor_model_parallel_size": 4, "pipeline_model_parallel_size": 1}


MIXTRAL = ["--log", str(MEGATRON), "--model", "mixtral-8x7b", "--system", "h100-sxm5-80gb", "--strategy",
           "mixtral-8x7b-ep8", "--set", "system.num_gpus=16", "--set", "strategy.pp=1", "--set",
           "strategy.global_batch_size=128", "--set", "strategy.sequence_parallel=true", "--set", "strategy.ep=4",
           "--set", "strategy.seq_len=2048"]  # implied by the logged TFLOP/s, not stated (SOURCES.md)


def _line(out: str, head: str) -> str:
    return next(x for x in out.splitlines() if x.startswith(head))


def test_cli_check_run_on_megatron_log_prints_measured_predicted_residual_and_memory(capsys):
    code = main(["check-run", *MIXTRAL, "--set", "strategy.tp=4"])
    out = capsys.readouterr()
    assert code == 0, out.err
    # default warm-up skips iteration 2; median of 5410.6, 5364.1, 5444.9, 5533.8, 5718.6 ms
    step = _line(out.out, "step time").split()
    assert step[2:4] == ["measured", "5444.9"] and step[5] == "predicted"
    predicted = float(step[6])
    assert _line(out.out, "residual").split()[1] == f"{5444.9 - predicted:+.1f}"
    for part in ("forward_compute", "backward_compute", "tp_comm", "ep_comm", "dp_comm", "optimizer"):
        assert any(x.split()[:1] == [part] for x in out.out.splitlines()), part
    assert _line(out.out, "memory alloc").split()[3] == f"{54250.98583984375 / 1024:.2f}"
    assert _line(out.out, "memory reserved").split()[3] == f"{61480 / 1024:.2f}"
    assert "mismatch" not in out.out  # the scenario has the layout the log states, and its FLOPs


def test_cli_check_run_says_when_the_logged_flops_are_not_the_scenarios(capsys):
    # the preset's seq_len 4096 doubles Megatron's FLOPs count: the logged TFLOP/s say 2048
    assert main(["check-run", *MIXTRAL, "--set", "strategy.tp=4", "--set", "strategy.seq_len=4096"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("mismatch")]
    assert len(lines) == 1 and "imply seq_len 2048 at global batch 128" in lines[0]
    assert "the scenario has seq_len 4096, global batch 128" in lines[0]


def test_a_gpu_count_unlike_the_logs_is_not_blamed_on_the_batch(capsys):
    """32 GPUs against the log's 16: the world-size mismatch was said, and the FLOPs line then
    blamed "seq_len 3948 … or global batch 256" for what is the GPU count (Megatron divided by 16)."""
    assert main(["check-run", *MIXTRAL, "--set", "strategy.tp=4", "--set", "system.num_gpus=32"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("mismatch")]
    assert any("world_size" in x for x in lines) and not any("imply seq_len" in x for x in lines)


def test_a_refit_of_every_factor_never_ends_worse_than_one_factor_alone():
    """Two runs that disagree (the same 5.44 s step at global batch 128 and 256): the joint
    Gauss-Newton step overshot and the fit stopped at its start, every factor 1.0 (RMS 73.9 %),
    where the compute factor alone reaches 35.3 %. Halving the step, then each factor's own step."""
    from simengine.checkrun.refit import fit_factors
    from simengine.cli import build_config

    def cfg(batch):
        sets = ["system.num_gpus=16", "strategy.pp=1", f"strategy.global_batch_size={batch}", "strategy.ep=4",
                "strategy.tp=4", "strategy.sequence_parallel=true", "strategy.seq_len=2048"]
        return build_config(argparse.Namespace(model="mixtral-8x7b", system="h100-sxm5-80gb", strategy="mixtral-8x7b-ep8",
                                               set=sets, systems_dir=None))

    runs = [(cfg(128), 5.4449), (cfg(256), 5.4449)]
    every, compute = fit_factors(runs), fit_factors(runs, ("compute",))
    assert every.rms <= compute.rms + 1e-9 and every.rms < 0.5


def _mixtral_scenario(**strategy):
    from simengine.api import scenario_from
    from simengine.cli import build_config

    sets = ["system.num_gpus=16", "strategy.pp=1", "strategy.global_batch_size=128", "strategy.ep=4", "strategy.tp=4",
            "strategy.sequence_parallel=true",
            *(f"strategy.{k}={v}" for k, v in strategy.items())]
    ns = argparse.Namespace(model="mixtral-8x7b", system="h100-sxm5-80gb", strategy="mixtral-8x7b-ep8", set=sets,
                            systems_dir=None)
    return scenario_from(build_config(ns))


def test_megatron_flops_formula_against_hand_computed_mixtral():
    from simengine.checkrun.flops import check, formula_for, megatron_flops

    sc = _mixtral_scenario(seq_len=2048)
    # megatron/training/training.py num_floating_point_operations (2bfe9bea, 2024-04) written as Megatron
    # does: 12·B·s·L·h²·[(1 + g/n + s/h)·(d·n/h) + (f/h)·topk·3/2 + V/(2·L·h)], Mixtral 8x7B: h 4096,
    # L 32, n 32, g 8, d 128, f 14336, top-2, V 32000 padded to a multiple of 128·tp = 512 → 32256
    b, s, L, h = 128, 2048, 32, 4096
    hand = 12 * b * s * L * h * h * ((1 + 8 / 32 + s / h) * (128 * 32 / h) + 14336 / h * 2 * 1.5 + 32256 / (2 * L * h))
    assert megatron_flops(sc, "2024") == pytest.approx(hand, rel=1e-12)
    assert hand / (5.4449 * 1e12 * 16) == pytest.approx(239.8, rel=2e-3)  # the log's iteration 43
    # from 8873b55d (2025-03) the core-attention term is halved for the causal mask; nothing else differs here
    assert megatron_flops(sc, "2024") - megatron_flops(sc, "2025") == pytest.approx(6 * b * s * s * L * 128 * 32)
    assert formula_for("2024-04-06") == "2024" and formula_for("2025-03-06") == "2025" and formula_for(None) == "2025"
    c = check(_mixtral_scenario(seq_len=4096), 239.8, 5.4449, "2024-04-06")
    assert c is not None and c.ratio == pytest.approx(499.1 / 239.8, rel=1e-3)
    assert c.implied_seq_len == pytest.approx(2048, rel=2e-3) and c.implied_global_batch == pytest.approx(128 * 239.8 / 499.1, rel=1e-3)


def test_megatron_flops_counts_dense_and_shared_expert_layers_today():
    from simengine.checkrun.flops import check, megatron_flops

    cfg = _cfg()
    cfg["model"].update(num_experts=8, top_k=2, moe_ffn_hidden_size=512, num_shared_experts=1, first_k_dense_layers=1)
    from simengine.api import scenario_from

    sc = scenario_from(cfg)
    m, st = sc.model, sc.strategy
    dense = megatron_flops(scenario_from(_cfg()), "2025")
    # training.py transformer_flops: each MoE layer swaps f·3 for (f_e·topk + f_shared)·3, ×6·B·s·h
    per_layer = 6 * st.global_batch_size * st.seq_len * m.hidden_size * 3 * ((512 * 2 + 512) - m.ffn_hidden_size)
    assert megatron_flops(sc, "2025") - dense == pytest.approx(per_layer * (m.num_layers - 1))
    assert check(sc, 100.0, 1.0, "2024-05-01") is None  # the 2024 formula did not count these


def test_cli_check_run_says_where_the_scenario_is_not_the_logged_run(capsys):
    code = main(["check-run", *MIXTRAL, "--set", "strategy.tp=2"])
    out = capsys.readouterr().out
    assert code == 0
    assert "the log states tensor_model_parallel_size = 4, the scenario has 2" in out
    assert "the log states data_parallel_size = 4, the scenario has 8" in out


def test_stated_setup_reads_layout_line_versions_and_argument_dump():
    from simengine.checkrun.stated import parse_stated

    new = ("using world size: 64, data-parallel size: 8, context-parallel size: 2, hierarchical context-parallel "
           "sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 2")
    args = ["  seq_length ...................................... 8192",
            "  expert_model_parallel_size ...................... 8", "  recompute_granularity ........... None"]
    got = parse_stated([new, *args])
    assert got == {"world_size": 64, "data_parallel_size": 8, "context_parallel_size": 2,
                   "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2, "seq_length": 8192,
                   "expert_model_parallel_size": 8, "recompute_granularity": "None"}


def test_stated_switches_are_compared_as_megatron_prints_them():
    from simengine.checkrun.stated import disagreements, parse_stated

    cfg = _cfg()  # tp2, sequence parallel, ZeRO-1, no recompute, dense
    args = ["  sequence_parallel ............................... True",
            "  use_distributed_optimizer ....................... False",
            "  recompute_granularity ........................... full", "  recompute_num_layers ...... 0",
            "  moe_router_topk ................................. 2", "  num_experts ............ None",
            "  cp_comm_type .................................... ['a2a']"]
    assert disagreements(parse_stated(args), cfg) == [
        "the log states use_distributed_optimizer = False, the scenario has True"]
    full = parse_stated(["  recompute_granularity ........................... full", "  num_experts ...... 8"])
    assert disagreements(full, cfg) == ["the log states recompute_granularity = full, the scenario has None",
                                        "the log states num_experts = 8, the scenario has None"]
    one = _cfg()
    one["strategy"]["tp"], one["strategy"]["sequence_parallel"] = 1, True  # Megatron turns SP off at tp 1
    assert disagreements(parse_stated(["  sequence_parallel ..... False"]), one) == []


def test_real_torchtitan_excerpt_parses_and_converts_tps():
    log = parse_training_log(TITAN)
    assert log.framework == "torchtitan" and len(log.iterations) == 6  # GC / profiler lines ignored
    assert log.iterations[0].tokens_per_s_per_gpu == 5856 and log.max_reserved_gib == pytest.approx(49.66)
    cfg = _cfg()
    m = measure(log, cfg, warmup=0)
    st, n = cfg["strategy"], cfg["system"]["num_gpus"]
    tokens = st["global_batch_size"] * st["seq_len"]
    times = sorted(tokens / (tps * n) for tps in (5856, 5593, 5868, 5869, 5864, 5862))
    assert m.step_time_s == pytest.approx((times[2] + times[3]) / 2)  # median step time of the six steps
    assert m.reserved_gib == pytest.approx(49.66) and m.allocated_gib is None


def test_megatron_memory_lines_max_over_ranks_in_gib():
    log = parse_training_log(_megatron_log([900, 500, 510], alloc_mb=[20480.0, 30720.0]))
    assert log.max_allocated_gib == pytest.approx(30.0) and log.max_reserved_gib == pytest.approx(36.0)


def test_warmup_is_skipped_and_median_taken():
    log = parse_training_log(_megatron_log([5000, 3000, 1000, 1010, 990, 1005]))
    m = measure(log, _cfg(), warmup=2)
    assert m.iterations_skipped == 2 and m.iterations_used == (3, 4, 5, 6)
    assert m.step_time_s == pytest.approx(statistics_median([1.0, 1.01, 0.99, 1.005]))
    assert measure(log, _cfg()).iterations_skipped == 1  # default: 10 %, at least one


def statistics_median(v):
    v = sorted(v)
    return (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def test_comparison_residual_and_component_scales():
    cfg = _cfg()
    pred = estimate(cfg)
    log = parse_training_log(_megatron_log([pred.step_time_s * 1e3 * 1.5] * 6))
    c = compare(cfg, measure(log, cfg))
    assert c.predicted_step_s == pytest.approx(pred.step_time_s)
    assert c.rel_error == pytest.approx(1 / 1.5 - 1, rel=1e-3)
    k, v = max(c.breakdown_s.items(), key=lambda kv: kv[1])
    # scaling that component alone by its factor closes the residual exactly
    assert v * c.scale_to_close[k] - v == pytest.approx(c.residual_s, rel=1e-3)


def test_refit_recovers_a_slower_compute_and_checks_holdout():
    cfg = _cfg()
    slow = scaled_config(cfg, 0.7)             # a "measured" run whose compute runs at 0.7 × the efficiencies
    t = estimate(slow).step_time_s * 1e3
    log = parse_training_log(_megatron_log([t * 3] + [t] * 8))
    m = measure(log, cfg)
    first, second = measure(log, cfg, part=slice(0, 4)), measure(log, cfg, part=slice(4, None))
    r = refit_compute_scale(cfg, first, second, "later iterations")
    assert r.value == pytest.approx(0.7, rel=2e-3) and abs(r.fit_error) < 1e-3 and abs(r.holdout_error) < 1e-3
    assert r.provenance["factor"] == "compute_efficiency_scale" and r.provenance["iterations_used"] == [2, 3, 4, 5]
    assert m.step_time_s == pytest.approx(t / 1e3, rel=1e-4)  # the log prints 0.1 ms


def test_not_a_training_log_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        parse_training_log("hello\nworld\n")
    assert e.value.field == "log"


@pytest.mark.parametrize("bad", ["1e309", "1e308", "0", "0.000001", "-5000"])
def test_an_implausible_logged_step_time_names_its_line(bad):
    # 1e309 parses as inf; 1e308 ms or 1e-6 ms printed a 300-digit residual or a 1e11 % error
    text = _megatron_log([900, 500]).replace("(ms): 500.0", f"(ms): {bad}")
    with pytest.raises(ConfigError) as e:
        parse_training_log(text)
    assert e.value.field == "log" and "line 4" in str(e.value) and "not a plausible value" in str(e.value)


def test_a_torchtitan_line_with_a_negative_or_infinite_number_is_refused():
    line = "[rank0]:[titan] 2025 - root - INFO - step: {s}  loss:  6.1  memory: {m}GiB(52.28%)  tps: {t}  tflops: 339.16  mfu: 34.29%"
    ok = "\n".join(line.format(s=s, m="49.66", t="5,856") for s in (1, 2))
    assert len(parse_training_log(ok).iterations) == 2
    for m, t in (("49.66", "-5"), ("-1.0", "5,856"), ("49.66", "1e400")):
        with pytest.raises(ConfigError, match="line 3: .* not a plausible value"):
            parse_training_log(ok + "\n" + line.format(s=3, m=m, t=t))


@pytest.mark.parametrize("line", [
    " iteration {n}/     100 | elapsed time per iteration (ms): 500.0 |",
    "[rank0]:[titan] 2025 - root - INFO - step: {n}  loss:  6.1  memory: 49.66GiB(52.28%)  tps: 5,856",
])
def test_an_iteration_number_of_thousands_of_digits_names_its_line(line):
    # once: int() raised ValueError (more than 4300 digits) and the CLI printed "internal error"
    with pytest.raises(ConfigError, match="line 2: iteration number of 5000 digits is not a plausible value"):
        parse_training_log("banner\n" + line.format(n="9" * 5000))


def test_stated_numbers_int_cannot_take_are_not_stated():
    from simengine.checkrun.stated import parse_stated

    # once: '²'.isdigit() is True but int('²') raises, as does int() of 5000 digits
    lines = ["  world_size ........ \u00b2", "  num_layers ........ " + "9" * 5000, "  hidden_size ........ 4096",
             "using world size: " + "9" * 5000 + ", data-parallel size: 4"]
    assert parse_stated(lines) == {"hidden_size": 4096, "data_parallel_size": 4}


# lines of about 2 MB on which the patterns once backtracked quadratically: every 'iteration N/M |'
# (or 'step: N loss: x') head of a line without a tail re-scanned the rest of the line; a digit run
# split between [0-9,]* and [0-9]* every way; '\\.{3,}\\s*(\\S+)' gave the dots back one at a time.
# Each took from 15 minutes to hours (measured on 8,000-repeat lines: 0.5 to 4 s, growing 4x per doubling)
HOSTILE_LINES = ["iteration 1/1 |" * 140_000, "step: 1 loss: x " * 130_000,
                 "[Rank 0] (after 1 iterations) memory (MB) | allocated: " + "1" * 2_000_000,
                 "  world_size " + "." * 2_000_000 + "y z", "  hidden_size " + "." * 2_000_000 + " 4096"]


def test_hostile_log_lines_are_read_in_linear_time(tmp_path):
    log = tmp_path / "hostile.log"
    log.write_text("\n".join([*HOSTILE_LINES, _megatron_log([900, 500])]))
    argv = [sys.executable, "-m", "simengine", "check-run", "--log", str(log), "--model", "small", "--system", "small",
            "--strategy", "small"]
    try:   # the timeout only stops a hang (the old patterns); no assertion on the time taken
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[1])
    except subprocess.TimeoutExpired:
        pytest.fail("check-run did not finish reading the hostile log in 10 minutes")
    assert p.returncode == 0 and "log states      hidden_size 4096" in p.stdout, p.stderr
    parsed = parse_training_log(log)
    assert [i.time_s for i in parsed.iterations] == [0.9, 0.5] and parsed.stated == {"hidden_size": 4096}
    assert parsed.max_allocated_gib is None   # the digits line has no 'max allocated'


def test_an_explicit_warmup_that_leaves_nothing_is_refused_not_ignored():
    # once: --warmup 1 on a log with one usable iteration compared with that warm-up iteration
    log = parse_training_log(_megatron_log([900]))
    with pytest.raises(ConfigError) as e:
        measure(log, _cfg(), warmup=1)
    assert e.value.field == "--warmup" and "leaves no iteration" in str(e.value)
    assert measure(log, _cfg()).iterations_used == (1,)   # the default keeps at least one


def test_cli_check_run_exits_2_on_an_infinite_logged_time(tmp_path, capsys):
    log = tmp_path / "inf.log"
    log.write_text(_megatron_log([900, 500]).replace("(ms): 500.0", "(ms): 1e309"))
    code = main(["check-run", "--log", str(log), "--model", "small", "--system", "small", "--strategy", "small"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "line 4" in err


def test_cli_check_run_on_real_log(capsys):
    code = main(["check-run", "--log", str(TITAN), "--model", "llama3-8b", "--system", "h100-sxm5-80gb",
                 "--strategy", "llama3-8b-fsdp", "--set", "system.num_gpus=8", "--refit"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "measured" in out.out and "predicted" in out.out and "forward_compute" in out.out
    assert "compute_efficiency_scale" in out.out and "held-out" in out.out


def test_cli_check_run_refit_needs_iterations(tmp_path, capsys):
    log = tmp_path / "three.log"
    log.write_text(_megatron_log([900, 500, 510]))
    code = main(["check-run", "--log", str(log), "--model", "small", "--system", "small", "--strategy", "small",
                 "--refit", "--warmup", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "at least 4" in err


VARIANTS = ([], ["strategy.tp=4"], ["system.num_gpus=16"], ["strategy.tp=8"])


def _variants():
    from simengine.cli import apply_sets

    return [apply_sets(_cfg(), sets) for sets in VARIANTS]


def test_factor_refit_recovers_compute_and_scale_up_with_holdout():
    from simengine.checkrun.refit import apply_factors, fit_factors

    truth = {"compute": 0.8, "scale_up": 0.6}
    runs = [(cfg, estimate(apply_factors(cfg, truth)).step_time_s) for cfg in _variants()]
    fit = fit_factors(runs, ("compute", "scale_up"))
    assert fit.values["compute"] == pytest.approx(0.8, rel=0.01) and fit.values["scale_up"] == pytest.approx(0.6, rel=0.02)
    # each run left out is still predicted: the others keep two TP sizes, so both factors stay identified
    assert fit.rms < 1e-3 and fit.holdout_rms is not None and fit.holdout_rms < 0.01
    assert set(fit.identifiable) == {"compute", "scale_up"}
    # each run is also predicted by the fit of the others (the tp 4 run by two tp 2 runs, which
    # see scale_up only through tp 2's collectives): one held-out error per run, none lost
    weak = fit_factors([runs[1], runs[0], runs[2]], ("compute", "scale_up"))
    assert len(weak.holdout_errors) == 3 and max(abs(e) for e in weak.holdout_errors) < 0.01   # (4.4 % before backtracking)


def test_a_factor_no_run_uses_is_not_identifiable():
    from simengine.checkrun.refit import fit_factors

    cfg = _cfg()
    cfg["strategy"]["tp"] = 1
    cfg["system"]["num_gpus"] = 1
    cfg["strategy"]["global_batch_size"] = 8
    cfg["strategy"]["recompute"] = "full"
    fit = fit_factors([(cfg, estimate(cfg).step_time_s * 1.2)], ("compute", "scale_out"))
    assert fit.identifiable == ("compute",) and fit.values["scale_out"] == 1.0 and fit.holdout_errors == ()
    assert fit.values["compute"] < 1 and fit.rms < 1e-3


def test_cli_runs_file_refit(tmp_path, capsys):
    import json as _json

    from simengine.checkrun.refit import apply_factors

    items = []
    for i, (sets, cfg) in enumerate(zip(VARIANTS, _variants(), strict=True)):
        t = estimate(apply_factors(cfg, {"compute": 0.9, "scale_up": 0.7})).step_time_s * 1e3
        (tmp_path / f"run{i}.log").write_text(_megatron_log([t * 2] + [t] * 5))
        items.append({"log": f"run{i}.log", "model": "small", "system": "small", "strategy": "small",
                      "set": sets})
    runs = tmp_path / "runs.json"
    runs.write_text(_json.dumps(items))
    code = main(["check-run", "--runs", str(runs), "--refit", "--factors", "compute,scale_up"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "compute = 0.9" in out.out and "scale_up = 0.7" in out.out and "held out" in out.out
    assert main(["check-run", "--runs", str(tmp_path / "none.json")]) == 2
    assert main(["check-run", "--model", "small"]) == 2
    capsys.readouterr()
    # nothing to fit, --factors without --refit, a misspelt key, a warm-up of true: refused before
    # any run is compared (",,," fitted nothing and printed a refit; the others were ignored)
    for argv in (["--refit", "--factors", ",,,"], ["--factors", "compute"]):
        assert main(["check-run", "--runs", str(runs), *argv]) == 2
        out = capsys.readouterr()
        assert "--factors" in out.err and "run 1" not in out.out
    for bad in ({"warmpu": 5}, {"warmup": True}):
        runs.write_text(_json.dumps([{**items[0], **bad}]))
        assert main(["check-run", "--runs", str(runs)]) == 2
        assert "run 1:" in capsys.readouterr().err


def test_a_parsed_log_carries_the_digest_of_its_text():
    """A refit's provenance names the log by sha256 of the text parsed (no second read of the file)."""
    import hashlib

    for path in (MEGATRON, TITAN):
        text = path.read_text(encoding="utf-8").lstrip("\ufeff")
        assert parse_training_log(path).sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()
