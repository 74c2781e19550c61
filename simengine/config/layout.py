"""How many transformer layers each virtual pipeline stage holds — the rule and its checks.

A *virtual stage* is one model chunk in data-flow order (stage s feeds s+1 in the forward). The
schedule says which stage each (rank, chunk) is (``Schedule.stage_of``); this module says how many
layers each stage holds (``simengine.workload.partition`` turns the counts into contiguous layer
indices). Three ways to choose the split:

* even (default): ``num_layers / stages`` each; a remainder goes to the middle stages first, the
  first and last stages (which also carry the embedding and the LM head) get fewer, as Llama 3
  405B's pipeline does (Dubey et al. 2024, §3.3.2: "we reduce one Transformer layer each from
  the first and the last stages");
* ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers`` (Megatron-LM
  arguments.py; rule of Megatron-Core ``transformer_block.get_num_layers_to_build`` and
  ``TransformerConfig.__post_init__``): the first / last pipeline rank holds that many layers
  (split evenly over its vpp chunks), the middle ranks split the rest evenly. In a V-shaped
  schedule (DualPipeV) one rank holds both the first and the last stage, so the two numbers are
  the layers of those two stages and the other stages split the rest;
* ``pipeline_layers``: the layers of every virtual stage, like Megatron-Core's
  ``pipeline_model_parallel_layout`` (``PipelineParallelLayerLayout``: one entry per virtual
  stage, index vpp_rank·pp + pp_rank — the same order as the interleaved ``stage_of``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

from ..schedule import get_schedule

Issues = list[tuple[str, str]]
StageOf = Callable[[int, int], int]  # (rank, chunk) -> virtual stage

FIRST = "strategy.decoder_first_pipeline_num_layers"
LAST = "strategy.decoder_last_pipeline_num_layers"
LAYOUT = "strategy.pipeline_layers"


def even_split(num_layers: int, stages: int) -> list[int]:
    """Layers per stage of the default split (see the module docstring)."""
    base, extra = divmod(num_layers, stages)
    sizes = [base] * stages
    # hand out the remainder to middle stages first (1 .. stages-2), then to the ends
    order = list(range(1, stages - 1)) + [0, stages - 1] if stages > 2 else list(range(stages))
    for i in range(extra):
        sizes[order[i % len(order)]] += 1
    return sizes


def strategy_stage_counts(st, num_layers: int) -> tuple[list[int], Issues]:
    """``stage_counts`` of a StrategySpec: its schedule's stage mapping and its split fields.
    Memoised on exactly those fields (a search checks the same split for many tp/cp/micro-batch
    choices); each call gets its own lists."""
    layout = None if st.pipeline_layers is None else tuple(st.pipeline_layers)
    counts, issues = _stage_counts_of(st.schedule, st.pp, st.vpp, st.decoder_first_pipeline_num_layers,
                                      st.decoder_last_pipeline_num_layers, layout, num_layers)
    return list(counts), list(issues)


@lru_cache(maxsize=4096)
def _stage_counts_of(schedule: str, pp: int, vpp: int, first: int | None, last: int | None,
                     layout: tuple[int, ...] | None, num_layers: int) -> tuple[tuple[int, ...], tuple[tuple[str, str], ...]]:
    sched = get_schedule(schedule)
    nch = sched.chunks_per_rank(vpp)
    if sched.chains > 1:  # DualPipe: the chains hold the same layers; split them over one chain's stages
        counts, issues = stage_counts(num_layers, pp, nch // sched.chains, lambda r, c: r, first, last, layout)
    else:
        counts, issues = stage_counts(num_layers, pp, nch, lambda r, c: sched.stage_of(r, c, pp, vpp), first, last, layout)
    return tuple(counts), tuple(issues)


def stage_counts(num_layers: int, pp: int, nch: int, stage_of: StageOf, first: int | None = None,
                 last: int | None = None, layout: Sequence[int] | None = None) -> tuple[list[int], Issues]:
    """Layers per virtual stage (``pp·nch`` of them, stage order) and the problems of the request.

    When there are problems the counts fall back to the even split (so callers can still draw)."""
    stages = pp * nch
    if layout is not None:
        return _explicit(num_layers, stages, pp, nch, list(layout))
    if first is None and last is None:
        return even_split(num_layers, stages), []
    if pp < 2:
        field = FIRST if first is not None else LAST
        return even_split(num_layers, stages), [(field, f"{field.split('.')[1]} needs pp >= 2 (pp={pp})")]
    owner = {stage_of(r, c): r for r in range(pp) for c in range(nch)}
    if owner[0] == owner[stages - 1]:
        return _v_shape(num_layers, stages, first, last)
    return _by_rank(num_layers, pp, nch, stage_of, owner[0], owner[stages - 1], first, last)


def _explicit(num_layers: int, stages: int, pp: int, nch: int, layout: list[int]) -> tuple[list[int], Issues]:
    if len(layout) != stages:
        terms = f"pp*chunks_per_rank = {pp}*{nch} = {stages}" if nch > 1 else f"pp = {pp}"
        return even_split(num_layers, stages), [(LAYOUT, f"pipeline_layers has {len(layout)} entries; "
                                                 f"one per virtual stage needs {terms}")]
    if sum(layout) != num_layers:
        shown = "+".join(map(str, layout)) if len(layout) <= 16 else f"sum of {len(layout)} entries"
        return even_split(num_layers, stages), [(LAYOUT, f"pipeline_layers {shown} = {sum(layout)} "
                                                 f"but num_layers = {num_layers}")]
    return layout, []


def _v_shape(num_layers: int, stages: int, first: int | None, last: int | None) -> tuple[list[int], Issues]:
    """DualPipeV: rank 0 holds stage 0 (embedding) and stage 2p-1 (loss)."""
    rest_stages = stages - (first is not None) - (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    if rest < 0 or bool(rest) != bool(rest_stages) or (rest_stages and rest % rest_stages):
        msg = (f"{_rest_terms(num_layers, first, last)} layers do not split evenly over the other "
               f"{rest_stages} virtual stages (the first and last stages are both on rank 0 of the V)")
        return even_split(num_layers, stages), [(FIRST if first is not None else LAST, msg)]
    each = rest // rest_stages if rest_stages else 0
    counts = [each] * stages
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return counts, []


def _by_rank(num_layers: int, pp: int, nch: int, stage_of: StageOf, r_first: int, r_last: int,
             first: int | None, last: int | None) -> tuple[list[int], Issues]:
    """Megatron-Core rule: the first/last pp rank holds ``first``/``last`` layers over all its
    vpp chunks; the middle ranks split the rest evenly; every rank's layers divide by vpp."""
    field = FIRST if first is not None else LAST
    middle_ranks = pp - (first is not None) - (last is not None)
    rest = num_layers - (first or 0) - (last or 0)
    if rest < 0 or bool(rest) != bool(middle_ranks) or (middle_ranks and rest % middle_ranks):
        msg = (f"{_rest_terms(num_layers, first, last)} middle layers do not split evenly over "
               f"{middle_ranks} middle pipeline ranks (Megatron-Core TransformerConfig.__post_init__)")
        return even_split(num_layers, pp * nch), [(field, msg)]
    middle = rest // middle_ranks if middle_ranks else 0
    per_rank = [middle] * pp
    if first is not None:
        per_rank[r_first] = first
    if last is not None:
        per_rank[r_last] = last
    issues: Issues = []
    for f, name, value in ((FIRST, "decoder_first_pipeline_num_layers", first),
                           (LAST, "decoder_last_pipeline_num_layers", last),
                           (field, f"middle layers per rank ({_rest_terms(num_layers, first, last)} over "
                                   f"{middle_ranks} ranks)", middle if middle_ranks else None)):
        if value is not None and value % nch:
            issues.append((f, f"{name} = {value} is not divisible by vpp = {nch} (Megatron-Core "
                              "get_num_layers_to_build: a rank's layers split evenly over its chunks)"))
    if issues:
        return even_split(num_layers, pp * nch), issues
    counts = [0] * (pp * nch)
    for r in range(pp):
        for c in range(nch):
            counts[stage_of(r, c)] = per_rank[r] // nch
    return counts, []


def _rest_terms(num_layers: int, first: int | None, last: int | None) -> str:
    """``num_layers - first - last = 126 - 7 - 7 = 112`` with only the given ends named."""
    given = [(n, v) for n, v in (("decoder_first_pipeline_num_layers", first),
                                 ("decoder_last_pipeline_num_layers", last)) if v is not None]
    names = " - ".join(n for n, _ in given)
    values = " - ".join(str(v) for _, v in given)
    rest = num_layers - sum(v for _, v in given)
    return f"num_layers - {names} = {num_layers} - {values} = {rest}"
