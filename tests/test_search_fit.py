"""The smallest changes to fit (search/fit.py), from an audit of what they offered: every halving
of the micro-batch, the expert-parallel size of a MoE, a label that says every change it makes,
and a ranking by tokens/s per GPU (a change that adds GPUs pays for them)."""

from __future__ import annotations

import json

import pytest

from simengine import api, presets
from simengine.search import fit_changes


def scen(model: str, gpus: int, **strategy) -> dict:
    return {"model": presets.load_preset("models", model),
            "system": dict(presets.load_preset("systems", "h100-sxm5-80gb"), num_gpus=gpus), "strategy": strategy}


def changes(cfg: dict) -> dict[str, dict]:
    assert not api.estimate(cfg).fits
    return {c["change"]: c for c in fit_changes(cfg, top=50)}


def test_every_halving_of_the_micro_batch_is_tried():
    """mbs 8 → 4 did not fit, so the only change offered was full recompute (21 % lost) where
    mbs 8 → 2 fits at 3 % lost."""
    found = changes(scen("llama3-8b", 8, tp=2, micro_batch_size=8, global_batch_size=64, seq_len=8192))
    assert "micro_batch_size 8 → 2" in found and "micro_batch_size 8 → 1" in found
    best = next(iter(found.values()))
    assert best["change"] == "micro_batch_size 8 → 2"
    assert best["tokens_per_s"] > max(c["tokens_per_s"] for k, c in found.items() if k.startswith("recompute"))


def test_a_moe_is_offered_more_expert_parallelism():
    """qwen3-30b-a3b at ep 2 does not fit on 8 H100s; ep 4 fits and is faster, and was never tried
    (the best offered was ZeRO-3 at half the throughput)."""
    found = changes(scen("qwen3-30b-a3b", 8, tp=4, pp=2, ep=2, etp=1, global_batch_size=64, seq_len=4096))
    ep = found["ep 2 → 4"]
    assert ep["strategy"]["ep"] == 4 and list(found)[0] == "ep 2 → 4"
    again = api.estimate(scen("qwen3-30b-a3b", 8, **ep["strategy"]))
    assert again.fits and again.tokens_per_s == pytest.approx(ep["tokens_per_s"], rel=1e-12)
    assert "ep 1 → 2" not in changes(scen("llama3-8b", 8, tp=1, micro_batch_size=8, global_batch_size=64, seq_len=8192))


def test_changes_are_ranked_by_tokens_per_s_per_gpu():
    """Doubling the GPUs ranked first as "+1.5 % lost" while each GPU did half the work."""
    found = fit_changes(scen("qwen3-30b-a3b", 8, tp=4, pp=2, ep=2, etp=1, global_batch_size=64, seq_len=4096), top=50)
    per_gpu = [c["tokens_per_s"] / c["num_gpus"] for c in found]
    assert per_gpu == sorted(per_gpu, reverse=True)
    base = api.estimate(scen("qwen3-30b-a3b", 8, tp=4, pp=2, ep=2, etp=1, global_batch_size=64, seq_len=4096))
    more = next(c for c in found if c["num_gpus"] == 16)
    assert more["throughput_lost"] == pytest.approx(1 - more["tokens_per_s"] / 16 / (base.tokens_per_s / 8), rel=1e-12)


def test_a_change_that_also_recomputes_fewer_layers_says_so():
    """From full recompute of every layer, each change also let fewer layers recompute, unsaid:
    "tp 4 → 8" promised 27,891 tokens/s, and tp 8 alone gave 20,892."""
    cfg = scen("llama3-70b", 32, tp=4, pp=2, recompute="full", global_batch_size=128, seq_len=8192, zero_stage=1)
    for label, c in changes(cfg).items():
        k = c["strategy"].get("recompute_num_layers")
        assert (k is not None) == (f"recompute_num_layers → {k}" in label or f"full ({k} layers)" in label), label
        assert api.estimate(dict(cfg, system=dict(cfg["system"], num_gpus=c["num_gpus"]), strategy=c["strategy"])
                            ).tokens_per_s == pytest.approx(c["tokens_per_s"], rel=1e-12)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from simengine.cli import main

    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = int(e.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


SEARCH = ("search", "--model", "llama3-8b", "--system", "h100-sxm5-80gb", "--set", "system.num_gpus=8",
          "--global-batch", "64", "--seq-len", "8192", "--top", "3")


def test_the_cli_checks_the_strategy_with_its_pins_and_says_whether_it_fits(capsys):
    """--set strategy.tp=1 pinned the search but the fit check read the file's tp 2 (which fits):
    no changes were offered for a layout that does not fit. Whether it fits is now said."""
    rc, out, _ = _cli(capsys, *SEARCH, "--strategy", "small", "--set", "strategy.tp=1", "--set", "strategy.pp=1", "--json")
    assert rc == 0
    res = json.loads(out)
    assert res["strategy_fits"] is False and res["fit_changes"] and res["shown"] == len(res["candidates"])
    assert all(c["strategy"]["tp"] == 1 or "tp 1 → 2" in c["change"] for c in res["fit_changes"])
    rc, out, _ = _cli(capsys, *SEARCH, "--strategy", "small")
    assert rc == 0 and "--strategy fits in memory: nothing to change" in out


def test_an_invalid_strategy_is_refused_before_the_search(capsys):
    rc, out, err = _cli(capsys, *SEARCH, "--strategy", "small", "--set", "strategy.packed_doc_len=3000")
    assert rc == 2 and not out and "packed_doc_len" in err and len(err.strip().splitlines()) == 1


def test_every_candidate_inside_the_best_band_is_a_tie_not_the_first_50():
    """With --top 60, row 51 overlapped the best row's band but had no '='."""
    from simengine.search.rank import ties
    from simengine.search.types import Candidate

    def cand(tps: float) -> Candidate:
        return Candidate(gpus=8, strategy={}, tokens_per_s=tps, step_time_s=1.0, mfu=0.4, cost_per_million_tokens_usd=1.0,
                         cost_per_step_usd=1.0, peak_memory_gib=1.0, reserved_memory_gib=1.0, headroom_gib=1.0,
                         tight_stage=0, band={"tokens_per_s": (0.9 * tps, 1.1 * tps)})

    ranked = [cand(100.0 - 0.1 * i) for i in range(60)] + [cand(50.0)]
    assert ties(ranked, "tokens_per_s") == list(range(60))


@pytest.mark.parametrize("objective", ["time_to_train", "cost_to_train"])
def test_an_objective_to_train_a_budget_needs_the_budget(capsys, objective):
    """It ran silently as the tokens/s ranking, with no days or cost anywhere."""
    rc, out, err = _cli(capsys, *SEARCH, "--objective", objective)
    assert rc == 2 and not out and "needs --token-budget" in err
    rc, out, _ = _cli(capsys, *SEARCH, "--objective", objective, "--token-budget", "1e12", "--json")
    assert rc == 0 and all("time_to_train_s" in c for c in json.loads(out)["candidates"])


def test_an_interleaved_layout_is_offered_the_plain_schedule():
    """Interleaving holds more activations in flight; "pp × 2" kept vpp, so the deeper plain
    pipeline (10 % lost on llama3-70b / 64 H100) was never tried. The change exists, lowers the
    memory, and pairs with the other knobs."""
    from simengine.search.fit import _apply, _changes

    cfg = scen("llama3-70b", 64, tp=4, pp=4, vpp=5, schedule="interleaved", cp=2, micro_batch_size=2,
               global_batch_size=128, seq_len=8192)
    [plain] = [c for c in _changes(cfg) if c[0] == "vpp 5 → 1 (schedule 1f1b)"]
    assert api.estimate(_apply(cfg, [plain])).reserved_memory_gib < api.estimate(cfg).reserved_memory_gib
    assert not [c for c in _changes(scen("llama3-70b", 64, tp=4, pp=4)) if c[0].startswith("vpp")]


def test_a_partial_pin_beside_strategy_still_searches(capsys):
    """--set strategy.vpp=2 with --strategy small (a 1f1b file) exited 2 ("vpp=2 needs
    schedule='interleaved'"); without --strategy the same pins search. The search runs; only the
    fit check of the pinned file is skipped, and a warning says so."""
    rc, out, err = _cli(capsys, *SEARCH, "--strategy", "small", "--set", "strategy.vpp=2", "--json")
    assert rc == 0 and json.loads(out)["candidates"] and "no fit changes" in err


def test_no_pair_of_changes_is_cut_off():
    """Every halving of the micro-batch as a pair pushed a MoE's pairs past MAX_PAIRS (73: the last
    nine, "mbs 8 → 4 + num_gpus × 2" among them, were never tried); pairs take the first halving.
    With a layer split, "pp × 2 + vpp → 1" was never formed (both reset the split)."""
    from simengine.search.fit import MAX_PAIRS, _changes, _same_knob, pairs_of

    cfg = scen("qwen3-30b-a3b", 16, tp=2, pp=2, vpp=3, schedule="interleaved", ep=2, micro_batch_size=8,
               global_batch_size=128, seq_len=4096)
    pairs = pairs_of(_changes(cfg))
    assert len(pairs) <= MAX_PAIRS
    assert any({a[0], b[0]} == {"micro_batch_size 8 → 4", "num_gpus 16 → 32"} for a, b in pairs)
    split = scen("llama3-70b", 64, tp=4, pp=4, vpp=5, schedule="interleaved", pipeline_layers=[20, 20, 20, 20],
                 global_batch_size=128, seq_len=8192)
    changes = {c[0]: c for c in _changes(split)}
    assert not _same_knob(changes["pp 4 → 8 (even layer split)"], changes["vpp 5 → 1 (schedule 1f1b)"])
