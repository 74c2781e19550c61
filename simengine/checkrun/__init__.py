"""check-run: a real training log (Megatron-LM, torchtitan) against simengine's prediction for the
same scenario — measured vs predicted step time and memory, the residual by component, and an
optional refit of the compute-efficiency scale with a held-out check (:mod:`.compare`), or of
compute / scale-up / scale-out factors over several runs with leave-one-out (:mod:`.refit`); logs
are read by :mod:`.logs`; the FLOPs a Megatron log states (TFLOP/s × time) are held against the
scenario's by :mod:`.flops`; the commands are :mod:`.cli`.

Sits above the API (it calls ``simengine.api.estimate``), so nothing below imports it. Names are
imported on first use (PEP 562) so that registering the CLI command loads nothing.
"""

from __future__ import annotations

import importlib

# ``compare`` (the function) is not re-exported: it would clash with the ``compare`` submodule
# (importing the submodule rebinds the package attribute); import it from ``.compare``.
_WHERE = dict.fromkeys(("Comparison", "Measured", "Refit", "measure", "refit_compute_scale", "scaled_config"), ".compare")
_WHERE.update(dict.fromkeys(("Iteration", "RunLog", "parse_training_log"), ".logs"))
_WHERE.update(dict.fromkeys(("FACTORS", "FactorFit", "apply_factors", "fit_factors"), ".refit"))
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
