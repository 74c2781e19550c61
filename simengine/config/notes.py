"""Accepted layouts that the chosen stack itself would refuse or cannot run, each with what
simengine does instead (``Scenario.notes``; the Report shows them as warnings): a flag combination
Megatron-LM's arguments.py asserts against, a default layer split it would not build (with the
Megatron arguments that would build it, where some do), a sequence longer than a learned position
table, a pipeline schedule the stack does not ship (a what-if)."""

from __future__ import annotations

from ..schedule import SCHEDULES, get_schedule
from .layout import strategy_stage_counts
from .model import ModelSpec
from .strategy import StrategySpec


def scenario_notes(model: ModelSpec, strategy: StrategySpec) -> list[tuple[str, str]]:
    """Accepted layouts that the chosen stack itself would refuse or cannot run, each with what
    simengine does instead (the Report shows them as warnings). A split is noted only when it is the
    default (even) one: an explicit decoder_first/last_pipeline_num_layers or pipeline_layers
    already follows Megatron's rules."""
    return (_flag_notes(strategy) + _split_notes(model, strategy) + _position_notes(model, strategy)
            + _schedule_notes(strategy))


# what the notes call each stack (config/framework.py FrameworkName)
STACK_NAMES = {"megatron-te": "Megatron-Core", "torch-native": "PyTorch's pipelining (torchtitan)",
               "torch-compile": "PyTorch's pipelining under torch.compile", "deepspeed": "DeepSpeed"}


def shipped(framework: str) -> list[str]:
    """The pipeline schedules ``framework``'s code runs (``Schedule.frameworks``), in menu order."""
    return [name for name, sc in SCHEDULES.items() if framework in sc.frameworks]


def unshipped(framework: str, schedules: list[str]) -> str:
    """One line for several what-if schedules of one stack: which it does not ship, which it runs."""
    own = shipped(framework)
    return (f"{STACK_NAMES.get(framework, framework)} does not ship {', '.join(schedules)} "
            f"(it runs {', '.join(own) or 'no pipeline schedule'})")


def schedule_what_if(framework: str, schedule: str, pp: int) -> str:
    """Why ``schedule`` is a what-if on ``framework`` (its code does not ship that pipeline
    schedule: ``Schedule.frameworks``, each schedule module cites where it runs), '' when the stack
    runs it or nothing is pipelined (pp 1 runs no schedule)."""
    sched = get_schedule(schedule)
    if pp <= 1 or framework in sched.frameworks:
        return ""
    return (f"a what-if: {unshipped(framework, [repr(schedule)])}; simengine prices it with this stack's kernels. "
            f"'{schedule}' is in {sched.shipped_in}")


def _schedule_notes(s: StrategySpec) -> list[tuple[str, str]]:
    why = schedule_what_if(s.framework, s.schedule, s.pp)
    return [("strategy.schedule", why)] if why else []


def _position_notes(model: ModelSpec, s: StrategySpec) -> list[tuple[str, str]]:
    """Megatron-LM arguments.py validate_args asserts ``max_position_embeddings >= seq_length``: a
    learned position table has no row for the positions beyond it (RoPE has no table)."""
    if model.position_embedding != "learned" or s.seq_len <= model.max_position_embeddings:
        return []
    return [("strategy.seq_len", f"seq_len={s.seq_len} is longer than the learned position table "
                                 f"(model.max_position_embeddings={model.max_position_embeddings}): Megatron-LM refuses it "
                                 "(arguments.py asserts max_position_embeddings >= seq_length); simengine prices the table as "
                                 "given and attention over the whole sequence")]


def _flag_notes(s: StrategySpec) -> list[tuple[str, str]]:
    """Megatron-LM arguments.py validate_args: "--overlap-grad-reduce should be turned on when
    using --overlap-param-gather" (Megatron-Core's stack only; FSDP2 prefetches without it)."""
    if s.framework != "megatron-te" or not s.overlap_param_gather or s.overlap_grad_reduce or s.zero_stage != 1:
        return []
    return [("strategy.overlap_param_gather", "overlap_param_gather without overlap_grad_reduce: Megatron-LM refuses it "
             "(arguments.py: '--overlap-grad-reduce should be turned on when using --overlap-param-gather'); "
             "simengine gathers each chunk's parameters in one unbucketed all-gather before its first forward")]


def _split_notes(model: ModelSpec, strategy: StrategySpec) -> list[tuple[str, str]]:
    s = strategy
    if s.pipeline_layers is not None or s.decoder_first_pipeline_num_layers is not None \
            or s.decoder_last_pipeline_num_layers is not None or s.pp * s.vpp == 1:
        return []
    n, pp, vpp = model.num_layers, s.pp, s.vpp
    nch = get_schedule(s.schedule).chunks_per_rank(vpp)
    counts, issues = strategy_stage_counts(s, n)
    if issues or len(set(counts)) == 1:
        return []
    placed = f"simengine places {min(counts)}-{max(counts)} layers per virtual stage (first {counts[0]}, last {counts[-1]})"
    fix = "set pipeline_layers (Megatron-Core pipeline_model_parallel_layout) or decoder_first/last_pipeline_num_layers to choose"
    same = _megatron_first_last(s, n, counts)
    if same:
        fix = f"Megatron gives the same split with {same}"
    flags = "" if same else megatron_account_for(n, pp, nch, counts)
    if flags:
        # Megatron-LM arguments.py validate_args counts the embedding / loss as layers before its
        # divisibility assert and Megatron-Core transformer_block.get_num_layers_to_build builds one
        # layer fewer on the first / last virtual stage: Megatron runs this very split with the flags
        return [("strategy.pp" if n % pp else "strategy.vpp",
                 f"num_layers={n} does not divide evenly over pp*vpp = {pp}*{nch}: {placed}, the split Megatron-LM "
                 f"builds with {flags}; without {'them' if ' ' in flags else 'it'} Megatron-LM refuses the layout")]
    if n % pp:
        # Megatron-LM arguments.py validate_args: "Number of layers should be divisible by the
        # pipeline-model-parallel size"
        return [("strategy.pp", f"num_layers={n} is not divisible by pp={pp}: Megatron-LM refuses it "
                                f"(arguments.py asserts num_layers % pp == 0); {placed}; {fix}")]
    # Megatron-Core transformer_block.get_num_layers_to_build: "num_layers_per_pipeline_rank should be
    # divisible by vp_size"
    return [("strategy.vpp", f"num_layers={n} is not divisible by pp*vpp = {pp}*{nch} = {pp * nch}: Megatron-LM "
                             f"refuses it (get_num_layers_to_build asserts num_layers/pp = {n}/{pp} = {n // pp} "
                             f"divisible by vpp={nch}); {placed}; {fix}")]


def _megatron_first_last(s: StrategySpec, num_layers: int, counts: list[int]) -> str:
    """``decoder_first_pipeline_num_layers=a, decoder_last_pipeline_num_layers=b`` when those
    Megatron arguments reproduce ``counts``, else ''."""
    sched = get_schedule(s.schedule)
    nch = sched.chunks_per_rank(s.vpp)
    per_rank = [sum(counts[sched.stage_of(r, c, s.pp, s.vpp) % len(counts)] for c in range(nch)) for r in range(s.pp)]
    trial = s.model_copy(update={"decoder_first_pipeline_num_layers": per_rank[0],
                                 "decoder_last_pipeline_num_layers": per_rank[-1]})
    got, issues = strategy_stage_counts(trial, num_layers)
    if issues or got != counts:
        return ""
    return f"decoder_first_pipeline_num_layers={per_rank[0]}, decoder_last_pipeline_num_layers={per_rank[-1]}"


def megatron_account_for(num_layers: int, pp: int, nch: int, counts: list[int]) -> str:
    """The Megatron flags ``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-
    pipeline-split`` that reproduce ``counts`` (layers per virtual stage, data-flow order), else ''.
    Megatron-Core transformer_block.get_num_layers_to_build: the embedding and the loss count as
    one layer each, (num_layers + e + l) / pp per rank (asserted divisible, and by vpp), split
    evenly over its virtual stages, one fewer built on the very first (e) and very last (l)."""
    # both flags: Megatron-Bridge recipes/llama/h100/llama3.py, llama31_405b_pretrain_*_config
    for e, l, text in ((1, 1, "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
                              " (as Megatron-Bridge's Llama-3.1-405B recipes set them)"),
                       (1, 0, "--account-for-embedding-in-pipeline-split"), (0, 1, "--account-for-loss-in-pipeline-split")):
        total = num_layers + e + l
        if total % pp or (total // pp) % nch:
            continue
        want = [total // (pp * nch)] * (pp * nch)
        want[0] -= e
        want[-1] -= l
        if want == counts:
            return text
    return ""
