"""The memory refinement of a group in two steps (``refine.refine_memory`` then
``refine.refine_group``), the shared chunk-memory memo, and what the search says of the groups
its branch and bound never reached."""

from __future__ import annotations

import pytest

from simengine.search import make_space, search
from simengine.search.prune import bound_group, scenario

from test_search import SMALL_GPU, SYSTEM, TINY, TINY_MOE, _groups, brute_force, tiny_space

SPACES = [
    (TINY, {"tp": (1, 2), "pp": (1, 2), "cp": (1, 2), "cp_comm_type": ("p2p",),
            "overlap_param_gather": (True,), "overlap_grad_reduce": (True,)}),
    (TINY, {"tp": (2,), "pp": (1, 2, 4), "cp": (1,), "schedule": ("1f1b", "interleaved", "zb-h1")}),
    (TINY_MOE, {"tp": (1,), "pp": (1, 2), "cp": (1,), "etp": (1,),
                "overlap_param_gather": (True,), "overlap_grad_reduce": (True,)}),
]


def _fresh(space):
    """Clear this process's memos of a space, so a result is computed from scratch."""
    from simengine.search import prune, refine

    prune._SHARED.clear()
    prune._SHARED_OF[:] = [None, ""]
    refine._GROUPS.clear()
    refine._GROUPS_OF[0] = None


@pytest.mark.parametrize("model,choices", SPACES)
def test_memory_step_is_below_the_refined_bound_and_equal_when_exact(model, choices):
    """``refine_memory`` (one bisection over the least memory of any ZeRO stage, no ZeRO-2/3
    collectives) is below ``refine_group`` on every group, equal to it when it says so, and
    rejects exactly the groups ``refine_group`` rejects (tight memory: many need recompute)."""
    from simengine.search.refine import refine_group, refine_memory

    space = make_space(model, SMALL_GPU, global_batch=16, seq_len=8192, gpus=[8], choices=choices)
    seen = {"exact": 0, "below": 0, "oom": 0}
    for g, lay, mbs, order in _groups(space):
        if bound_group(space, g, lay, mbs, order)[1] is not None:
            continue
        lb1, rej1, exact = refine_memory(space, g, lay, mbs, order)
        _fresh(space)  # refine_group from scratch: the two steps must not depend on the memo
        lb2, rej2 = refine_group(space, g, lay, mbs, order)
        assert (rej1 is None) == (rej2 is None)
        if rej1 is not None:
            assert rej1.kind == rej2.kind and rej1.count == rej2.count
            seen["oom"] += rej1.kind == "oom"
            continue
        assert lb1 <= lb2 * (1 + 1e-12)
        if exact:
            assert lb1 == pytest.approx(lb2, rel=1e-12)
            seen["exact"] += 1
        else:
            seen["below"] += lb1 < lb2 * (1 - 1e-9)
    assert seen["exact"] > 0 and seen["below"] > 0 and seen["below"] + seen["oom"] > 3, seen


@pytest.mark.parametrize("model,choices", SPACES[:2])
def test_shared_chunk_memory_gives_the_same_refinement_as_a_fresh_process(model, choices):
    """Chunk memory is shared across the groups of one block kind: every group refined after
    many others gets the bound it gets alone."""
    from simengine.search.refine import refine_group, refine_memory

    space = make_space(model, SMALL_GPU, global_batch=16, seq_len=8192, gpus=[8], choices=choices)
    groups = [grp for grp in _groups(space) if bound_group(space, *grp)[1] is None]
    _fresh(space)
    warm = [(refine_memory(space, *grp)[0], refine_group(space, *grp)[0]) for grp in groups]
    for grp, (lb1, lb2) in list(zip(groups, warm))[::3]:
        _fresh(space)
        assert refine_memory(space, *grp)[0] == lb1
        _fresh(space)
        assert refine_group(space, *grp)[0] == lb2


def test_search_through_both_refinement_steps_equals_brute_force(monkeypatch):
    """Every ZeRO stage and recompute level under tight memory, so groups stop at each step of
    the frontier (refine, ZeRO collectives, screen, an option's expansion): the best is still the
    brute force's best."""
    from simengine.search import executors

    steps: set[str] = set()
    work = executors.work_batch

    def spy(space, batch):
        steps.update(kind for kind, _ in batch)
        return work(space, batch)

    monkeypatch.setattr(executors, "work_batch", spy)
    import simengine.search.run as run

    monkeypatch.setattr(run, "work_batch", spy)
    space = tiny_space(choices={"tp": (1, 2), "pp": (1, 2), "cp": (1,), "overlap_param_gather": (True,),
                                "tp_comm_overlap": (False,)})
    best = max(b[0] for b in brute_force(space))
    for top in (1, 4):
        res = search(space, top=top)
        assert res.candidates[0].tokens_per_s == pytest.approx(best, rel=1e-12)
    assert {"bound", "refine", "zero", "lazy", "expand", "time"} <= steps, steps   # lazy: the screen with a top


def test_groups_never_reached_say_how_far_they_got():
    """A group the frontier never looked at is 'unevaluated' (not checked for validity); one
    it bounded is a valid layout; a candidate never timed passed the memory pre-filter. Every
    candidate is still counted once."""
    space = tiny_space(system=SYSTEM, choices={})   # every dimension, roomy memory: most groups are never reached
    res = search(space, top=1)
    assert res.evaluated + sum(r.count for r in res.rejections) == res.space_size
    left = [r for r in res.rejections if r.kind in ("bound", "unevaluated")]
    assert {r.kind for r in left} == {"bound", "unevaluated"}
    for r in left:
        if r.kind == "unevaluated":
            assert r.reason.startswith("not evaluated")
        else:
            assert "valid" in r.reason or "pre-filter" in r.reason
            ex = r.example
            strat = {**space.base, **{k: v for k, v in ex.items() if k != "num_gpus" and v is not None}}
            scenario(space, ex["num_gpus"], strat)  # a layout called valid is valid (raises otherwise)


def test_fp8_parameter_gathers_are_priced_at_every_zero_stage_of_the_space():
    """A space asking for FP8 parameter gathers with ZeRO 0 and 1: its groups' probes sit at ZeRO
    0, where no parameter is gathered, and the memory bound prices ZeRO 1 from them; it must price
    ZeRO 1 with its FP8 gathers (smaller weights), or it prunes layouts that fit. On a 4 GiB GPU the
    best layout fits only so: both searches must find it (the bound once dropped it, leaving 2.8 M
    tokens/s where 3.45 M fit)."""
    from simengine import presets
    from simengine.search import make_space, search

    tiny = {**presets.load_preset("models", "llama3-8b"), "name": "tiny", "hidden_size": 1024, "num_layers": 4,
            "num_attention_heads": 16, "num_kv_heads": 4, "ffn_hidden_size": 4096, "vocab_size": 32000}
    system = presets.load_preset("systems", "h100-sxm5-80gb")
    system = {**system, "gpu": {**system["gpu"], "memory_gib": 4.0}}
    base = {"dtype": "fp8", "fp8_param_gather": True, "fp8_recipe": "delayed"}

    def best(zs):
        space = make_space(tiny, system, global_batch=16, seq_len=8192, gpus=[8], base=base,
                           choices={"tp": (1, 2), "pp": (1, 2), "cp": (1,), "zero_stage": zs, "recompute": ("none",),
                                    "cpu_offload_layers": (0,)})
        return search(space, top=5).candidates[0]

    wide, one = best((0, 1)), best((1,))
    assert one.strategy["fp8_param_gather"] and wide.tokens_per_s >= one.tokens_per_s * (1 - 1e-12)
