"""Error table on shared/validation/published_runs.csv (186 published runs: Narayanan 2021,
Korthikanti 2022, Megatron-LM README H100 table, torchtitan, NeMo, Megatron-Bridge).

Run: python benchmarks/validate_published.py [path/to/published_runs.csv]
Prints markdown: one row per (run, metric) with measured, predicted and signed error; then MAPE and
median signed error per source, per source × metric, a FLOP-convention check (each source's implied
FLOPs per token vs simengine's model FLOPs), and the skipped runs with their reasons.
Runs marked "weak" rest on settings the source does not print (listed per run with --assumptions).
Each metric is converted the way its source defines it (simengine/published.py, predict_metrics).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simengine.api import estimate  # noqa: E402
from simengine.published import SOURCES, evaluate, published_runs, summarize  # noqa: E402

DATA = ROOT.parent / "shared" / "validation" / "published_runs.csv"


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    a = abs(x)
    return f"{x:.0f}" if a >= 1000 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 0.1 else f"{x:.3g}"


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv and not argv[0].startswith("-") else DATA
    show_assumptions = "--assumptions" in argv
    runs, skipped = published_runs(path.read_text())
    comps, failed = evaluate(runs)
    skipped = skipped + failed
    by_id = {r.run_id: r for r in runs}

    print(f"# simengine vs published runs ({path.name})\n")
    print("| run_id | metric | measured | predicted | error % | weak |")
    print("|---|---|---|---|---|---|")
    for c in comps:
        unit = by_id[c.run_id].units.get(c.metric, "")
        print(f"| {c.run_id} | {c.metric} [{unit}] | {_fmt(c.measured)} | {_fmt(c.predicted)} | {c.error_pct:+.1f} | {'weak' if c.weak else ''} |")

    print("\n## Summary per source\n")
    mapped = defaultdict(int)
    for r in runs:
        mapped[r.source] += 1
    for f in failed:
        mapped[f.source] -= 1
    nskip = defaultdict(int)
    for s in skipped:
        nskip[s.source] += 1
    allsum = summarize(comps)
    strong = summarize([c for c in comps if not c.weak])
    print("| source | runs mapped | runs skipped | metric rows | MAPE % | median signed % | rows not weak | MAPE not weak % |")
    print("|---|---|---|---|---|---|---|---|")
    for src in SOURCES:
        a, s = allsum.get(src), strong.get(src)
        cells = [src, str(mapped[src]), str(nskip[src])]
        cells += [str(a["n"]), f"{a['mape']:.1f}", f"{a['median_signed']:+.1f}"] if a else ["0", "–", "–"]
        cells += [str(s["n"]), f"{s['mape']:.1f}"] if s else ["0", "–"]
        print("| " + " | ".join(cells) + " |")
    tot = summarize(comps, by=lambda c: "all")["all"]
    tots = summarize([c for c in comps if not c.weak], by=lambda c: "all").get("all", {"n": 0, "mape": float("nan")})
    print(f"| **all** | {sum(mapped.values())} | {len(skipped)} | {tot['n']} | {tot['mape']:.1f} | {tot['median_signed']:+.1f} | {tots['n']} | {tots['mape']:.1f} |")

    print("\n## Summary per source and metric\n")
    print("| source | metric | n | MAPE % | median signed % |")
    print("|---|---|---|---|---|")
    per = summarize(comps, by=lambda c: (c.source, c.metric))
    for (src, metric), v in sorted(per.items(), key=lambda kv: (SOURCES.index(kv[0][0]), kv[0][1])):
        print(f"| {src} | {metric} | {v['n']} | {v['mape']:.1f} | {v['median_signed']:+.1f} |")

    print("\n## FLOP convention check (NeMo / Megatron-Bridge)\n")
    print("Measured model TFLOP/s ÷ measured tokens/s/GPU = the source's FLOPs per token; simengine's is")
    print("report.model_flops_per_step / tokens_per_step. A ratio ≠ 1 is a counting convention, not a time error.\n")
    print("| model | runs | source GFLOP/token | simengine GFLOP/token | simengine / source |")
    print("|---|---|---|---|---|")
    conv: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in runs:
        if r.source not in ("nemo", "megatron-bridge"):
            continue
        tf, tps = r.measured.get("model_tflops_per_gpu"), r.measured.get("tokens_per_sec_per_gpu")
        if not tf or not tps:
            continue
        try:
            rep = estimate(r.config)
        except Exception:  # noqa: BLE001 - failed runs are listed as skipped already
            continue
        conv[r.config["model"]["name"].split(" (")[0]].append((tf * 1e12 / tps, rep.model_flops_per_step / (rep.tokens_per_s * rep.step_time_s)))
    for name, vals in sorted(conv.items()):
        src_f = sum(v[0] for v in vals) / len(vals)
        ours = sum(v[1] for v in vals) / len(vals)
        print(f"| {name} | {len(vals)} | {src_f / 1e9:.1f} | {ours / 1e9:.1f} | {ours / src_f:.3f} |")

    print("\n## Skipped runs\n")
    print("| run_id | source | metrics | reason |")
    print("|---|---|---|---|")
    for s in skipped:
        print(f"| {s.run_id} | {s.source} | {', '.join(s.metrics)} | {s.reason} |")

    if show_assumptions:
        print("\n## Assumptions of weak runs\n")
        print("| run_id | assumptions |")
        print("|---|---|")
        for r in runs:
            if r.weak:
                print(f"| {r.run_id} | {'; '.join(r.assumptions)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
