"""The measurement kit: the numpy timing backend (what CI can run), the scenario's shapes, the CSVs
read back exactly by ``calibrate``, and the nccl-tests command lines."""

from __future__ import annotations

import importlib.util
import json

import pytest

from simengine import presets
from simengine.calibration import calibrate_with_summary, load_gemm_csv
from simengine.calibration.collectives import kind_from_text
from simengine.calibration.formats.attention_csv import read_attention_csv
from simengine.cli import main as simengine_main
from simengine.config import load_scenario
from simengine.measure.__main__ import main
from simengine.measure.backends import NumpyBackend
from simengine.measure.nccl import commands
from simengine.measure.shapes import AttentionShape, GemmShape, GroupedShape, scenario_needs
from simengine.measure.sweeps import run_sweep, write_atomic
from simengine.workload.builder import build_workload
from simengine.workload.ops import Collective, Gemm


def _sc():
    return load_scenario(presets.size_scenario("small"))


def test_numpy_backend_times_each_repeat_after_warmup():
    b = NumpyBackend()
    calls = []
    kern = b.gemm(64, 32, 16)

    def counted():
        calls.append(1)
        return kern()

    times = b.time(counted, warmup=2, repeats=5)
    assert len(calls) == 7 and len(times) == 5 and all(t > 0 for t in times)
    assert b.gemm(8, 4, 2, 3, "NT")().shape == (3, 8, 4) and b.gemm(8, 4, 2, 1, "NN")().shape == (1, 8, 4)


def test_numpy_gemm_sweep_is_read_back_by_the_gemm_reader(tmp_path):
    shapes = [GemmShape(64, 64, 64), GemmShape(128, 64, 32, 2, "NN")]
    lines, notes = run_sweep(NumpyBackend(), "gemm", shapes, warmup=1, repeats=3)
    path = write_atomic(tmp_path / "g.csv", lines)
    text = path.read_text()
    assert "# backend: numpy" in text and "statistic: median" in text and not notes
    load = load_gemm_csv(path, peak_tflops={"fp32": 1.0})
    assert load.format == "generic" and [(p.m, p.n, p.k, p.b, p.layout, p.dtype) for p in load.points] == \
        [(64, 64, 64, 1, "TN", "fp32"), (128, 64, 32, 2, "NN", "fp32")]
    rows = [ln.split(",") for ln in text.splitlines() if ln[:1].isdigit()]
    for p, r in zip(load.points, rows, strict=True):
        flops = 2 * p.b * p.m * p.n * p.k
        assert p.efficiency == pytest.approx(flops / (float(r[6]) * 1e-6) * 1e-12, rel=1e-12)


class FixedBackend(NumpyBackend):
    """A bf16 "GPU" whose every kernel runs at exactly half of a 1000 TFLOP/s peak."""

    dtype = "bf16"
    PEAK = 1000e12

    def __init__(self):
        super().__init__()
        self._next = 0.0

    def _fixed(self, flops):
        def fn():
            self._next = flops / (0.5 * self.PEAK)
        return fn

    def gemm(self, m, n, k, b=1, layout="TN"):
        return self._fixed(2.0 * b * m * n * k)

    def grouped_gemm(self, groups, m, n, k, layout="TN"):
        return self._fixed(2.0 * groups * m * n * k)

    def attention(self, phase, b, s, heads, kv_heads, d_qk, d_v, causal):
        from simengine.calibration.formats.attention_csv import attention_flops
        return self._fixed(attention_flops(phase, b, s, heads, d_qk, d_v, causal))

    def time(self, fn, warmup, repeats):
        fn()
        return [self._next] * repeats


def test_kit_files_round_trip_through_calibrate(tmp_path, capsys):
    b = FixedBackend()
    files = {}
    for kind, shapes in (("gemm", [GemmShape(1024, 2048, 512), GemmShape(4096, 4096, 4096, 1, "NT")]),
                         ("grouped-gemm", [GroupedShape(8, 512, 1024, 2048)]),
                         ("attention", [AttentionShape("fwd", 1, 4096, 32, 8, 128, 128),
                                        AttentionShape("bwd", 2, 2048, 16, 16, 64, 64, False)])):
        files[kind] = write_atomic(tmp_path / f"{kind}.csv", run_sweep(b, kind, shapes, warmup=0, repeats=3)[0])
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    system = system.model_copy(update={"gpu": system.gpu.model_copy(update={"peak_tflops": system.gpu.peak_tflops.model_copy(
        update={"bf16": 1000.0})})})
    new, summary = calibrate_with_summary(system, files["gemm"], attention_csv=files["attention"],
                                          grouped_gemm_csv=files["grouped-gemm"])
    e = new.efficiency
    assert [p.efficiency for p in e.gemm_table] == pytest.approx([0.5, 0.5], rel=1e-12)
    assert [p.efficiency for p in e.attention_table] == pytest.approx([0.5, 0.5], rel=1e-12)
    assert [p.efficiency for p in e.grouped_gemm_table] == pytest.approx([0.5], rel=1e-12)
    assert {p.target: p.rows_used for p in summary.provenance} == {
        "efficiency.gemm_table": 2, "efficiency.attention_table": 2, "efficiency.grouped_gemm_table": 1}
    # and through the CLI: calibrate reads the kit's files as they are
    sysfile = tmp_path / "sys.json"
    sysfile.write_text(json.dumps(system.model_dump(mode="json")))
    code = simengine_main(["calibrate", "--gemm", str(files["gemm"]), "--attention", str(files["attention"]),
                           "--grouped-gemm", str(files["grouped-gemm"]), "--base", str(sysfile), "--name", "kit",
                           "--systems-dir", str(tmp_path / "systems")])
    assert code == 0, capsys.readouterr().err
    assert read_attention_csv(files["attention"], peak_tflops=1000.0)[1].phase == "bwd"


def test_for_scenario_sweeps_exactly_the_workload_shapes():
    sc = _sc()
    needs = scenario_needs(sc)
    wl = build_workload(sc)
    want = {(op.m, op.n, op.k, op.b, op.layout) for ph in wl.blocks.values() for op in (*ph.fwd, *ph.bwd, *ph.wgt)
            if isinstance(op, Gemm)}
    assert {(g.m, g.n, g.k, g.b, g.layout) for g in needs.gemm} == want
    colls = {(op.kind, op.size) for ph in wl.blocks.values() for op in (*ph.fwd, *ph.bwd, *ph.wgt)
             if isinstance(op, Collective) and op.size > 1}
    assert colls <= {(c.kind, c.ranks) for c in needs.collectives}
    assert all(a.phase in ("fwd", "bwd") for a in needs.attention) and needs.attention


def test_nccl_commands_cover_the_scenario_and_name_their_logs(tmp_path):
    sc = _sc()
    needs = scenario_needs(sc).collectives
    cmds = commands(needs, "/opt/nccl-tests", sc.system.gpus_per_node)
    assert len(cmds) == len(needs)
    for c in cmds:
        assert c.argv[0] == "mpirun" and c.argv[2] == str(c.need.ranks) and "-c" in c.argv
        assert kind_from_text(c.log_name) == c.need.kind and f"_{c.need.ranks}gpu" in c.log_name
    srun = commands(needs, "/x", 8, "srun")
    assert all(c.argv[0] == "srun" for c in srun)


def test_cli_writes_csv_and_refuses_bad_input(tmp_path, capsys):
    out = tmp_path / "m.csv"
    assert main(["memory", "--backend", "numpy", "--out", str(out), "--repeats", "2", "--limit", "2"]) == 0
    rows = [ln for ln in out.read_text().splitlines() if ln[:1].isdigit()]
    assert len(rows) == 2 and all(float(r.split(",")[2]) > 0 for r in rows)
    assert main(["gemm", "--backend", "numpy"]) == 2
    assert main(["nccl", "--nccl-tests-dir", "/x"]) == 2
    assert main(["gemm", "--backend", "numpy", "--out", str(out), "--for-scenario", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "--for-scenario" in err and "Traceback" not in err


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_torch_backend_missing_is_one_line(tmp_path, capsys):
    assert main(["gemm", "--out", str(tmp_path / "x.csv")]) == 2
    assert "torch is not installed" in capsys.readouterr().err


def test_memory_sweep_sets_hbm_and_kernel_overhead(tmp_path):
    class Copy(FixedBackend):
        def memory(self, nbytes):
            def fn():
                self._next = 5e-6 + 2 * nbytes / 2.0e12  # 5 µs launch + 2 TB/s
            return fn

    lines, _ = run_sweep(Copy(), "memory", [1 << p for p in range(20, 31, 2)], warmup=0, repeats=3)
    path = write_atomic(tmp_path / "mem.csv", lines)
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    new, summary = calibrate_with_summary(system, memory_csv=path)
    assert new.efficiency.hbm == pytest.approx(2000 / system.gpu.hbm_bandwidth_gbs, rel=1e-6)
    assert new.efficiency.kernel_overhead_us == pytest.approx(5.0, rel=1e-6)
    assert [p.target for p in summary.provenance] == ["efficiency.hbm"]
