"""Published training runs as scenarios: maps the bundled data/published_runs.csv (Narayanan et al.
2021, Korthikanti et al. 2022, the Megatron-LM README H100 table, torchtitan, NeMo and
Megatron-Bridge performance pages) onto (model, system, strategy) dicts, and converts a Report into
each source's own metric definition so prediction and measurement are compared like for like.

Pure functions over CSV text: no prints, no environment, no UI. Nothing here is tuned to the rows;
every setting comes from the row, from the validation README ("Settings the papers leave out"),
from a model preset of the same public architecture, or from a documented framework default —
and each setting that is *guessed* (not printed by the source) is listed in ``assumptions`` and
makes the run ``weak``. Rows that cannot be mapped are returned in ``skipped`` with the reason.
"""

from .evaluate import Comparison, evaluate, predict_metrics, summarize
from .flops import (flops_eq3, flops_eq7, flops_eq8, flops_megatron, flops_megatron_bridge, flops_megatron_bridge_hybrid,
                    torchtitan_flops_per_token)
from .mapping import published_runs
from .types import SOURCES, PublishedRun, SkippedRun

__all__ = ["SOURCES", "Comparison", "PublishedRun", "SkippedRun", "evaluate", "flops_eq3", "flops_eq7", "flops_eq8",
           "flops_megatron", "flops_megatron_bridge", "flops_megatron_bridge_hybrid", "predict_metrics", "published_runs", "summarize", "torchtitan_flops_per_token"]
