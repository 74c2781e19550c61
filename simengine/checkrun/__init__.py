"""check-run: a real training log (Megatron-LM, torchtitan) against simengine's prediction for the
same scenario — measured vs predicted step time and memory, the residual by component, and an
optional refit of the compute-efficiency scale with a held-out check (:mod:`.compare`).

Sits above the API (it calls ``simengine.api.estimate``), so nothing below imports it.
"""

from .compare import Comparison, Measured, Refit, compare, measure, refit_compute_scale, scaled_config
from .logs import Iteration, RunLog, parse_training_log

__all__ = ["Comparison", "Iteration", "Measured", "Refit", "RunLog", "compare", "measure", "parse_training_log",
           "refit_compute_scale", "scaled_config"]
