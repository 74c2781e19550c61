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

_LAYOUT_LINE = re.compile(r"using world size:\s*\d+")
_LAYOUT_FIELD = re.compile(r"(world|data-parallel|context-parallel|tensor-model-parallel|pipeline-model-parallel)"
                           r" size:\s*(\d+)")
_LAYOUT_KEY = {"world": "world_size", "data-parallel": "data_parallel_size",
               "context-parallel": "context_parallel_size", "tensor-model-parallel": "tensor_model_parallel_size",
               "pipeline-model-parallel": "pipeline_model_parallel_size"}
_ARG_LINE = re.compile(r"^\s*([a-z][a-z0-9_]*) \.{3,}\s*(\S+)\s*$")
# argument name → how to read it off the scenario (config dict); the ones check-run compares
ARGS = ("world_size", "data_parallel_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "context_parallel_size", "expert_model_parallel_size", "seq_length", "micro_batch_size",
        "global_batch_size", "num_layers", "hidden_size")


def parse_stated(lines) -> dict[str, int]:
    """Integer settings the log states (layout line and argument dump); later lines win."""
    out: dict[str, int] = {}
    for line in lines:
        if _LAYOUT_LINE.search(line):
            for name, value in _LAYOUT_FIELD.findall(line):
                out[_LAYOUT_KEY[name]] = int(value)
        elif (m := _ARG_LINE.match(line)) and m.group(1) in ARGS and m.group(2).isdigit():
            out[m.group(1)] = int(m.group(2))
    return out


def scenario_values(cfg: dict) -> dict[str, int]:
    """The same settings as the scenario has them (dp derived as in Megatron: world / (tp·pp·cp))."""
    st, sy, mo = cfg.get("strategy", {}), cfg.get("system", {}), cfg.get("model", {})
    n, tp, pp, cp = (int(v or 1) for v in (sy.get("num_gpus"), st.get("tp"), st.get("pp"), st.get("cp")))
    return {"world_size": n, "data_parallel_size": int(st.get("dp") or n // max(tp * pp * cp, 1)),
            "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp, "context_parallel_size": cp,
            "expert_model_parallel_size": int(st.get("ep") or 1), "seq_length": int(st.get("seq_len") or 0),
            "micro_batch_size": int(st.get("micro_batch_size") or 0),
            "global_batch_size": int(st.get("global_batch_size") or 0),
            "num_layers": int(mo.get("num_layers") or 0), "hidden_size": int(mo.get("hidden_size") or 0)}


def disagreements(stated: dict[str, int], cfg: dict) -> list[str]:
    """One line per setting the log states and the scenario sets differently."""
    have = scenario_values(cfg)
    return [f"the log states {k} = {v}, the scenario has {have[k]}" for k, v in stated.items()
            if k in have and have[k] != v]
