"""Error table on the published runs (simengine/validation/data/published_runs.csv: Narayanan 2021,
Korthikanti 2022, Megatron-LM README H100 table, torchtitan, NeMo, Megatron-Bridge).

Run: python benchmarks/validate_published.py [--assumptions]
A thin wrapper over ``simengine.api.validate``: every (run, metric) row with measured, predicted and
signed error; the README's per-source table (tools/readme_tables.py); per source × metric; a FLOP-
convention check (each source's implied FLOPs per token vs simengine's model FLOPs, from the rows'
own ratios); the skipped runs with their reasons. "weak" runs rest on settings the source does not
print (listed with --assumptions).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from readme_tables import PUBLISHED, published_table  # noqa: E402

from simengine import api  # noqa: E402
from simengine.validation.cli import _fmt  # noqa: E402


def flop_convention(rows) -> list[str]:
    """Measured model TFLOP/s ÷ measured tokens/s/GPU = the source's FLOPs per token; the same ratio of
    the predictions is simengine's model FLOPs per token. A ratio ≠ 1 is a counting convention."""
    by_run: dict[str, dict[str, object]] = defaultdict(dict)
    for r in rows:
        if r.source in ("nemo", "megatron-bridge"):
            by_run[r.run][r.metric] = r
    conv: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for metrics in by_run.values():
        tf, tps = metrics.get("model_tflops_per_gpu"), metrics.get("tokens_per_sec_per_gpu")
        if tf and tps:
            conv[tf.scenario["model"]["name"].split(" (")[0]].append(
                (tf.measured * 1e12 / tps.measured, tf.predicted * 1e12 / tps.predicted))
    out = ["| model | runs | source GFLOP/token | simengine GFLOP/token | simengine / source |", "|---|---|---|---|---|"]
    for name, vals in sorted(conv.items()):
        src_f, ours = sum(v[0] for v in vals) / len(vals), sum(v[1] for v in vals) / len(vals)
        out.append(f"| {name} | {len(vals)} | {src_f / 1e9:.1f} | {ours / 1e9:.1f} | {ours / src_f:.3f} |")
    return out


def main(argv: list[str]) -> None:
    res = api.validate()
    rows = [r for r in res.rows if r.source in PUBLISHED]
    print("# simengine vs published runs (published_runs.csv)\n")
    print("| run_id | metric | measured | predicted | error % | weak |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.run} | {r.metric} [{r.unit}] | {_fmt(r.measured)} | {_fmt(r.predicted)} | {r.error_pct:+.1f} | {'weak' if r.weak else ''} |")
    print("\n## Summary per source\n")
    print(published_table(res.model_dump(mode="json")))
    print("\n## Summary per source and metric\n\n| source | metric | n | MAPE % | median signed % |\n|---|---|---|---|---|")
    for s in sorted((s for s in res.summary if s.source in PUBLISHED), key=lambda s: (PUBLISHED.index(s.source), s.metric)):
        print(f"| {s.source} | {s.metric} | {s.n} | {s.mape_pct:.1f} | {s.median_signed_pct:+.1f} |")
    print("\n## FLOP convention check (NeMo / Megatron-Bridge)\n")
    print("Measured model TFLOP/s ÷ measured tokens/s/GPU = the source's FLOPs per token; the same ratio of the")
    print("predictions is simengine's model FLOPs per token. A ratio ≠ 1 is a counting convention, not a time error.\n")
    print("\n".join(flop_convention(rows)))
    print("\n## Skipped runs\n\n| run_id | source | reason |\n|---|---|---|")
    for s in res.skipped:
        print(f"| {s.run} | {s.source} | {s.reason} |")
    if "--assumptions" in argv:
        print("\n## Assumptions of weak runs\n\n| run_id | assumptions |\n|---|---|")
        for run, assumptions in dict.fromkeys((r.run, tuple(r.assumptions)) for r in rows if r.weak):
            print(f"| {run} | {'; '.join(assumptions)} |")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Error table on the published runs (module docstring).")
    ap.add_argument("--assumptions", action="store_true", help="also list the assumptions of every weak run")
    main(["--assumptions"] if ap.parse_args().assumptions else [])
