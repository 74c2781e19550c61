"""The setup a training log states about itself, and where a scenario disagrees with it.

Megatron-LM prints its layout once at start-up (megatron/training/arguments.py ``validate_args``)::

    using world size: 16, data-parallel size: 4, context-parallel size: 1, hierarchical context-parallel
    sizes: None, tensor-model-parallel size: 4, pipeline-model-parallel size: 1

(the fields between vary by version, hence one ``<name> size: N`` match per field), and its full
argument list (``_print_args``), one ``  name ........ value`` line each. check-run compares what it
finds with the scenario it was given and prints every disagreement, so a log whose run the scenario
does not express is said to be so instead of being compared silently.
"""

from __future__ import annotations

import re

MAX_VALUE = 80   # characters of a stated switch's value kept (it is printed and compared)
_LAYOUT_LINE = re.compile(r"using world size:\s*\d+")
_LAYOUT_FIELD = re.compile(r"(world|data-parallel|context-parallel|tensor-model-parallel|pipeline-model-parallel)"
                           r" size:\s*(\d+)")
_LAYOUT_KEY = {"world": "world_size", "data-parallel": "data_parallel_size",
               "context-parallel": "context_parallel_size", "tensor-model-parallel": "tensor_model_parallel_size",
               "pipeline-model-parallel": "pipeline_model_parallel_size"}
# "  name ........ value": the value follows the dots after a space, right after them, or is the last
# dot of a run of dots; one way to read each line (``\.{3,}\s*(\S+)\s*$`` had as many as the line
# had dots: a long run of dots followed by two words took quadratic time)
_ARG_LINE = re.compile(r"^\s*([a-z][a-z0-9_]*) \.{3,}(?:\s+(\S+)|([^\s.]\S*)|(\.))\s*$")
# the arguments check-run compares: integers, and the few switches the scenario has a field for
ARGS = ("world_size", "data_parallel_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "context_parallel_size", "expert_model_parallel_size", "seq_length", "micro_batch_size",
        "global_batch_size", "num_layers", "hidden_size", "num_experts", "moe_router_topk", "cpu_offloading_num_layers")
# a stated number int() takes: decimal digits (isdigit() also admits '²', which int() refuses) and
# at most an int64's 18 (int() refuses more than 4300); a longer one is no setting and is not stated
MAX_DIGITS = 18
SWITCHES = ("sequence_parallel", "use_distributed_optimizer", "recompute_granularity", "cp_comm_type", "cpu_offloading")


def parse_stated(lines) -> dict[str, int | str]:
    """Settings the log states (layout line and argument dump); later lines win."""
    out: dict[str, int | str] = {}
    recomputed_layers = None
    for line in lines:
        if _LAYOUT_LINE.search(line):
            for name, value in _LAYOUT_FIELD.findall(line):
                if len(value) <= MAX_DIGITS:
                    out[_LAYOUT_KEY[name]] = int(value)
        elif m := _ARG_LINE.match(line):
            name, value = m.group(1), m.group(2) or m.group(3) or m.group(4)
            if name in ARGS and value.isdecimal() and len(value) <= MAX_DIGITS:
                out[name] = int(value)
            elif name in SWITCHES:
                out[name] = value.strip("[]'\"")[:MAX_VALUE]  # cp_comm_type prints as a list: ['a2a']; a 1 MB value is no switch
            elif name == "recompute_num_layers":
                recomputed_layers = value
    if out.get("recompute_granularity") == "full" and recomputed_layers == "0":
        out["recompute_granularity"] = "None"  # full recompute of 0 layers per stage recomputes nothing
    if out.pop("cpu_offloading", None) == "False":   # the layer count only counts with --cpu-offloading
        out["cpu_offloading_num_layers"] = 0
    return out


def scenario_values(cfg: dict) -> dict[str, int | str]:
    """The same settings as the scenario has them (validated, defaults filled), written as Megatron
    prints them: dp = world / (tp·pp·cp) (``Scenario.dp``); sequence parallelism is off at tp 1
    (Megatron ``validate_args`` turns it off); ``recompute='none'`` is ``recompute_granularity None``;
    the distributed optimizer is ZeRO stage ≥ 1."""
    from ..api import scenario_from

    sc = scenario_from(cfg)
    st, mo = sc.strategy, sc.model
    out: dict[str, int | str] = {
        "world_size": sc.system.num_gpus, "data_parallel_size": sc.dp, "tensor_model_parallel_size": st.tp,
        "pipeline_model_parallel_size": st.pp, "context_parallel_size": st.cp, "expert_model_parallel_size": st.ep,
        "seq_length": st.seq_len, "micro_batch_size": st.micro_batch_size, "global_batch_size": st.global_batch_size,
        "num_layers": mo.num_layers, "hidden_size": mo.hidden_size, "num_experts": mo.num_experts or "None",
        "sequence_parallel": str(bool(st.sequence_parallel) and st.tp > 1),
        "use_distributed_optimizer": str(st.zero_stage >= 1),
        "recompute_granularity": "None" if st.recompute == "none" else st.recompute,
        "cpu_offloading_num_layers": st.cpu_offload_layers}
    if mo.num_experts:  # Megatron prints moe_router_topk (default 2) for dense models too
        out["moe_router_topk"] = mo.top_k
    if st.cp > 1:  # Megatron prints cp_comm_type whatever cp is; it only matters with cp > 1
        out["cp_comm_type"] = st.cp_comm_type
    return out


def disagreements(stated: dict[str, int | str], cfg: dict) -> list[str]:
    """One line per setting the log states and the scenario sets differently."""
    have = scenario_values(cfg)
    return [f"the log states {k} = {v}, the scenario has {have[k]}" for k, v in stated.items()
            if k in have and have[k] != v]
