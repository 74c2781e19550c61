"""Does the measured B200 operator table transfer to the measured training steps? The evidence behind
``gpu.sustained_clock_ratio`` (cost/compute.py), as markdown tables.

Run: python benchmarks/b200_transfer.py
1. the op table's own evidence: flash-attention pairs measured at s = 32768 and 131072, and the GEMM
   envelope by time per call;
2. per family (dense tp/pp/dp, MoE DeepSeek-V2, CP) time MAPE and bias, datasheet preset vs calibrated
   (op table + NCCL fits), with the preset's clock ratio and without it (1);
3. leave-one-family-out: the ratio that would fit one family best, and what it gives on the others
   (a diagnostic; the preset's ratio comes from 1., not from these rows).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simengine import presets  # noqa: E402
from simengine.api import estimate  # noqa: E402
from simengine.api import scenario_from  # noqa: E402
from simengine.cost.compute import ComputeModel  # noqa: E402
from simengine.validation import b200_runs, b200_system  # noqa: E402
from simengine.validation.data import data_path  # noqa: E402
from simengine.workload.builder import build_workload  # noqa: E402
from simengine.workload.ops import Attention, Gemm, GroupedGemm  # noqa: E402

FAMILY = {"llama3_70b": "dense", "deepseekv2": "moe", "llama3_70b_cp": "cp"}
PEAK = 2.25e15


def data_dir() -> Path:
    """The measured data bundled with the package (simengine/validation/data)."""
    return Path(str(data_path("b200_megatron_runs.csv"))).parent


def op_rows(data: Path) -> list[dict[str, str]]:
    return [r for r in csv.DictReader(io.StringIO((data / "b200_op_efficiency.csv").read_text())) if r["table"] == "op_shape"]


def _span_ms(phase: str, seq: int, heads: str, dims: str, eff: float) -> float:
    """One timed call of the pair (SimuMax test_fa_efficiency.py: FLOPs 2·base fwd, 5·base bwd with
    base = b·s²·max(h, h_kv)·(d_qk + d_v); 5 warm-up + 20 traced calls, a sync after each)."""
    h = max(int(x) for x in heads.split("/"))
    base = seq ** 2 * h * sum(int(x) for x in dims.split("/"))
    return (2 if phase == "fwd" else 5) * base / (eff * PEAK) * 1e3


def attention_pairs(rows) -> None:
    print("| phase | heads/kv | d_qk/d_v | eff s=32768 | eff s=131072 | ratio | ms per call s=32768 / 131072 |\n"
          "|---|---|---|---|---|---|---|")
    by: dict[tuple, dict[int, float]] = {}
    for r in rows:
        if r["op"] in ("sdp_fwd", "sdp_bwd"):
            key = (r["op"][4:], r["k_head_num"] + "/" + r["k_kv_head_num"], r["k_qk_head_dim"] + "/" + r["k_v_head_dim"])
            by.setdefault(key, {})[int(r["k_seq_len"])] = float(r["efficiency"])
    for (phase, heads, dims), v in sorted(by.items()):
        if 32768 in v and 131072 in v:
            spans = " / ".join(f"{_span_ms(phase, s, heads, dims, v[s]):.1f}" for s in (32768, 131072))
            print(f"| {phase} | {heads} | {dims} | {v[32768]:.3f} | {v[131072]:.3f} | {v[131072] / v[32768]:.3f} | {spans} |")


def gemm_envelope(rows) -> None:
    print("\n| time per call | GEMM shapes | mean eff | max eff |\n|---|---|---|---|")
    bins: dict[int, list[float]] = {}
    for r in rows:
        if r["op"] == "matmul":
            e = float(r["efficiency"])
            t = 2 * int(r["k_m"]) * int(r["k_n"]) * int(r["k_k"]) * int(r["k_b"] or 1) / (e * PEAK)
            bins.setdefault(int(math.log2(t * 1e6)), []).append(e)
    for k in sorted(bins):
        v = bins[k]
        print(f"| ~{2**k / 1000:.2f} ms | {len(v)} | {sum(v) / len(v):.3f} | {max(v):.3f} |")


def errors(csv_text: str, system: dict) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for run in b200_runs(csv_text, system):
        out.setdefault(FAMILY[run.family], []).append(estimate(run.config).step_time_s * 1e3 / run.real_ms - 1)
    return out


def mape(v: list[float]) -> float:
    return 100 * sum(map(abs, v)) / len(v)


def systems(data: Path, ratio: float) -> dict[str, dict]:
    preset = copy.deepcopy(presets.load_preset("systems", "b200-sxm-180gb"))
    preset["gpu"]["sustained_clock_ratio"] = ratio
    fits = json.loads((ROOT / "presets" / "calibration" / "b200-nccl-fits.json").read_text())
    return {"datasheet": preset, "calibrated": b200_system(preset, data / "b200_op_efficiency.csv", fits)}


def families(data: Path, csv_text: str) -> None:
    ratio = presets.load_preset("systems", "b200-sxm-180gb")["gpu"]["sustained_clock_ratio"]
    print("\n| system | clock ratio | dense | MoE | CP | all |\n|---|---|---|---|---|---|")
    for r in (1.0, ratio):
        for name, sysd in systems(data, r).items():
            e = errors(csv_text, sysd)
            cells = " | ".join(f"{mape(e[f]):.2f} % ({100 * sum(e[f]) / len(e[f]):+.1f})" for f in ("dense", "moe", "cp"))
            print(f"| {name} | {r} | {cells} | {mape([x for v in e.values() for x in v]):.2f} % |")


def leave_one_family_out(data: Path, csv_text: str) -> None:
    grid = [round(0.60 + 0.02 * i, 2) for i in range(21)]
    res = {r: errors(csv_text, systems(data, r)["calibrated"]) for r in grid}
    print("\n| derived on (calibrated) | best ratio | its MAPE | held out |\n|---|---|---|---|")
    for fam in ("dense", "moe", "cp"):
        best = min(grid, key=lambda r: mape(res[r][fam]))
        held = ", ".join(f"{f} {mape(v):.2f} %" for f, v in res[best].items() if f != fam)
        print(f"| {fam} | {best} | {mape(res[best][fam]):.2f} % | {held} |")


def exact_shapes(data: Path, csv_text: str) -> None:
    """Efficiency of the exact ops of one run per family: datasheet scalar (+ curve) vs measured table,
    both without the clock ratio, and the op's share of the datasheet compute time of its block."""
    sy = systems(data, 1.0)
    print("\n| family | block:op | shape | datasheet eff | table eff |\n|---|---|---|---|---|")
    seen = set()
    pairs = zip(b200_runs(csv_text, sy["datasheet"]), b200_runs(csv_text, sy["calibrated"]), strict=True)
    for a, b in pairs:
        fam = FAMILY[a.family]
        if fam in seen:
            continue
        seen.add(fam)
        sa, sb = scenario_from(a.config), scenario_from(b.config)
        cma, cmb = ComputeModel(sa.system), ComputeModel(sb.system)
        for key, ph in build_workload(sa).blocks.items():
            for op in ph.fwd + ph.bwd + ph.wgt:
                eff = _eff_pair(op, cma, cmb)
                if eff and key in ("attn", "mlp", "moe"):
                    print(f"| {fam} | {key}:{op.name} | {_shape(op)} | {eff[0]:.3f} | {eff[1]:.3f} |")


def _eff_pair(op, cma, cmb):
    if isinstance(op, Gemm):
        return cma.gemm_efficiency(op.m, op.n, op.k, op.b, op.layout), cmb.gemm_efficiency(op.m, op.n, op.k, op.b, op.layout)
    if isinstance(op, GroupedGemm):
        return cma.grouped_efficiency(op), cmb.grouped_efficiency(op)
    if isinstance(op, Attention):
        return cma.attention_efficiency(op), cmb.attention_efficiency(op)
    return None


def _shape(op) -> str:
    if isinstance(op, Attention):
        return f"b{op.b} h{op.heads}/{op.kv_heads} s{op.s_q}x{op.s_kv} d{op.d_qk}/{op.d_v}"
    g = f"{op.groups}x " if isinstance(op, GroupedGemm) else ""
    return f"{g}{op.m}x{op.n}x{op.k} {op.layout}"


def main() -> None:
    data = data_dir()
    rows = op_rows(data)
    attention_pairs(rows)
    gemm_envelope(rows)
    csv_text = (data / "b200_megatron_runs.csv").read_text()
    exact_shapes(data, csv_text)
    families(data, csv_text)
    leave_one_family_out(data, csv_text)


if __name__ == "__main__":
    main()
