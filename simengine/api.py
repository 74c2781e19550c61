"""The front door: the surface the studio, the CLI and the validation harness use.

Every function takes plain JSON-like dicts or validated specs and returns pydantic models /
dicts; bad input raises ``ConfigError`` naming the field. Each function delegates (to
``estimate``, ``timeline``, ``validation``, ``importers``, ``calibration``); nothing is computed here.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from .config.scenario import Scenario, load_scenario
from .errors import ConfigError
from .estimate import estimate as _estimate
from .importers import HFImport, HFImportError, hf_to_model, parse_config_text
from .importers import MAX_BYTES as HF_CONFIG_MAX_BYTES  # noqa: F401  (re-exported: the importer's size limit)
from .report import Report


_PRESET_KINDS = {"model": "models", "system": "systems", "strategy": "strategies"}


def scenario_from(config: dict[str, Any] | Scenario) -> Scenario:
    """The validated Scenario of ``config``: {"model", "system", "strategy"}, each a dict or, as
    the CLI's --model/--system/--strategy take them, the name of a preset (``presets.load_preset``:
    an unknown name is a ConfigError naming the section)."""
    if isinstance(config, Scenario):
        return config
    if isinstance(config, dict) and any(isinstance(config.get(k), str) for k in _PRESET_KINDS):
        from . import presets

        config = {**config, **{k: presets.load_preset(kind, config[k]) for k, kind in _PRESET_KINDS.items()
                               if isinstance(config.get(k), str)}}
    return load_scenario(config)


def estimate(config: dict[str, Any] | Scenario) -> Report:
    """Estimate one training step. ``config`` = {"model": {...}, "system": {...}, "strategy": {...}},
    a section also a preset's name (``scenario_from``)."""
    sc = scenario_from(config)
    try:
        rep = _estimate(sc)
    except (ZeroDivisionError, OverflowError, ValueError) as e:  # numbers out of any sane range
        if isinstance(e, ConfigError):
            raise
        raise ConfigError([("system", "cannot estimate this scenario: the hardware figures or sizes are out of any "
                                      "computable range")]) from e
    if not (math.isfinite(rep.step_time_s) and rep.step_time_s > 0):
        raise ConfigError([("system", "cannot estimate this scenario: the step time is not finite (hardware figures "
                                      "too small or sizes too large)")])
    return rep


def estimate_json(config_json: str) -> dict[str, Any]:
    """JSON text in, report dict out (the studio caches on the JSON text)."""
    try:
        data = json.loads(config_json)
    except (TypeError, ValueError) as e:
        raise ConfigError([("", f"not valid JSON: {e}")]) from e
    except RecursionError:   # arrays or objects nested thousands deep
        raise ConfigError([("", "not valid JSON: nested too deeply")]) from None
    return estimate(data).model_dump(mode="json")


def simulate(config: dict[str, Any] | Scenario):
    """Simulate the pipeline timeline of one step (per-rank spans, memory over time)."""
    from .timeline import simulate_scenario

    return simulate_scenario(scenario_from(config))



def layer_seconds(config: dict[str, Any]) -> tuple[float, float]:
    """Forward and backward (incl. weight-gradient and recompute) seconds of one transformer layer
    for one micro-batch: the first chunk of a 2-layer model minus that of a 1-layer model (cancels
    embedding and head). Compared with per-layer timings such as Korthikanti et al. 2022 Table 4."""
    if not isinstance(config, dict) or not all(isinstance(config.get(k), dict) for k in ("model", "system", "strategy")):
        raise ConfigError([("", "expected {\"model\": {...}, \"system\": {...}, \"strategy\": {...}}")])
    out = []
    for n in (1, 2):
        cfg = {k: dict(v) for k, v in config.items()}
        cfg["model"]["num_layers"] = n
        out.append(_first_chunk_seconds(load_scenario(cfg)))
    return out[1][0] - out[0][0], out[1][1] - out[0][1]


def _first_chunk_seconds(sc: Scenario) -> tuple[float, float]:
    """(forward, backward + weight-gradient + recompute) seconds of one micro-batch through the
    first chunk of the first stage, each phase alone."""
    from .estimate import layer_times

    return layer_times(sc)


def validate(source: str | None = None, calibrated: bool = False):
    """Predicted vs measured on the bundled measured runs (``source`` = "b200", a published source
    such as "narayanan21", or None for all) → :class:`simengine.validation.ValidationResult`."""
    from .validation import validate as _validate

    return _validate(source, calibrated=calibrated)




def import_hf_config(config: dict[str, Any] | str | bytes):
    """A Hugging Face ``config.json`` (dict or its text) → :class:`simengine.importers.HFImport`
    (the ModelSpec dict, warnings, the fields that could not be mapped)."""
    from .importers import import_hf_config as _import

    return _import(config)



def calibrate_with_summary(*args: Any, **kwargs: Any):
    """``(SystemSpec, CalibrationSummary)``: forwards to :func:`simengine.calibration.calibrate_with_summary`."""
    from .calibration import calibrate_with_summary as _calibrate

    return _calibrate(*args, **kwargs)


def _spec(kind: str, value: Any):
    """``value`` as the validated spec of ``kind`` ("model", "system"): a spec as it is, a dict
    validated (ConfigError naming the field), anything else a ConfigError."""
    from pydantic import ValidationError

    from .config import ModelSpec, SystemSpec
    from .errors import from_pydantic

    cls: type[ModelSpec] | type[SystemSpec] = ModelSpec if kind == "model" else SystemSpec
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise ConfigError([(kind, f"expected a {cls.__name__} or its dict, not {type(value).__name__}")])
    try:
        return cls.model_validate(value)
    except ValidationError as e:
        raise from_pydantic(e, kind) from None


def count_parameters(model) -> tuple[int, int]:
    """(total, active) parameters of a ModelSpec or its dict (``simengine.workload.params.count_parameters``)."""
    from .workload.params import count_parameters as _count

    return _count(_spec("model", model))


def model_flops_per_step(sc: dict[str, Any] | Scenario, causal: bool = False) -> float:
    """Model FLOPs of one step (``simengine.estimate.model_flops_per_step``; no timing)."""
    from .estimate import model_flops_per_step as _flops

    return _flops(scenario_from(sc), causal=bool(causal))


def chrome_trace(timeline, name: str = "simengine") -> dict:
    """The Chrome-trace (Perfetto) dict of a simulated timeline (``simulate``'s result;
    ``simengine.sim.trace.to_chrome_trace``)."""
    from .sim.timeline import Timeline
    from .sim.trace import to_chrome_trace

    if not isinstance(timeline, Timeline):
        raise ConfigError([("timeline", f"expected the Timeline simulate() returns, not {type(timeline).__name__}")])
    return to_chrome_trace(timeline, str(name))


def write_chrome_trace(timeline, path, name: str = "simengine") -> None:
    """Write the Chrome trace of ``timeline`` to ``path`` atomically (temp file + os.replace: a
    failure leaves an existing file intact). Raises OSError (ConfigError for a path that is no
    path)."""
    import json as _json

    from .fileio import write_atomic

    if not isinstance(path, (str, os.PathLike)) or not str(path).strip() or "\x00" in str(path):   # (NUL: open's ValueError)
        raise ConfigError([("path", f"expected a file path, not {str(path)[:60]!r}")])
    trace = chrome_trace(timeline, name)
    write_atomic(path, lambda fh: _json.dump(trace, fh))


def chunks_per_rank(schedule: str, vpp: int = 1) -> int:
    """Model chunks each pipeline rank holds under ``schedule`` (the schedule registry's
    ``Schedule.chunks_per_rank``: vpp for interleaved, 2 for dualpipe/dualpipev, else 1).
    Raises ConfigError for an unknown schedule or a vpp that is no positive integer."""
    from .config.strategy import MAX_VPP
    from .schedule import get_schedule

    if type(vpp) is not int or not 1 <= vpp <= MAX_VPP:
        raise ConfigError([("strategy.vpp", f"vpp={str(vpp)[:40]!r} must be an integer from 1 to {MAX_VPP} (StrategySpec.vpp)")])
    try:
        sched = get_schedule(schedule)
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError([("strategy.schedule", str(e)[:200])]) from None
    return int(sched.chunks_per_rank(vpp))


def validation_sources() -> tuple[str, ...]:
    """The names ``validate(source=...)`` accepts: "b200" and the published sources."""
    from .validation import SOURCES

    return SOURCES


# --- search -------------------------------------------------------------------------------------
# ``search(...)`` (strategy search over simengine.search) is added here by the search work; not
# implemented in this module yet.


__all__ = ["ConfigError", "HFImport", "HFImportError", "Report", "calibrate", "calibrate_with_summary", "chrome_trace",
           "chunks_per_rank", "count_parameters", "estimate", "estimate_json", "hf_to_model", "import_hf_config", "layer_seconds",
           "model_flops_per_step", "parse_config_text", "scenario_from", "simulate", "validate", "validation_sources",
           "write_chrome_trace"]

def calibrate(system: dict[str, Any] | Any, *, gemm=None, nccl=None, attention=None, grouped_gemm=None, memory=None):
    """Calibrate a system (a SystemSpec or its dict) from measured files (text, bytes or
    ``pathlib.Path``; ``nccl`` a list or a mapping name → content) →
    ``(SystemSpec, CalibrationSummary)`` (fits, errors, refused rows, provenance, plot curves)."""
    from .calibration.calibrate import calibrate_with_summary

    system = _spec("system", system)
    given = [x for x in (gemm, nccl, attention, grouped_gemm, memory)
             if x is not None and not (isinstance(x, (list, tuple, dict)) and not x)]   # (an empty file: its reader says so)
    if not given:   # as the CLI: no measurement, no calibration (the system came back unchanged)
        raise ConfigError([("arguments", "give at least one of gemm, nccl, attention, grouped_gemm, memory")])
    return calibrate_with_summary(system, gemm, nccl, attention_csv=attention, grouped_gemm_csv=grouped_gemm,
                                  memory_csv=memory)


def coverage(config: dict[str, Any] | Scenario, measured_fields=()) -> dict[str, dict[str, float]]:
    """Share of the scenario's op time priced from measured / interpolated / extrapolated /
    default efficiencies, per op kind (``simengine.coverage``)."""
    from .coverage import coverage as _coverage

    if isinstance(measured_fields, str) or not isinstance(measured_fields, (list, tuple, set, frozenset)) \
            or not all(isinstance(f, str) for f in measured_fields):
        raise ConfigError([("measured_fields", "expected a list of efficiency field names, e.g. [\"efficiency.gemm_table\"]")])
    return _coverage(scenario_from(config), measured_fields)


def list_user_systems(folder) -> list[str]:
    """Names of the saved user systems in ``folder`` (the caller picks it; ``calibration.store``)."""
    from .calibration.store import list_systems

    return list_systems(folder)


def user_system_provenance(folder, name: str) -> list:
    """Where every calibrated number of the saved system ``name`` came from (its provenance list)."""
    from .calibration.store import load_provenance

    return load_provenance(folder, name)


def load_user_system(folder, name: str):
    """The saved user system ``name`` (a validated SystemSpec)."""
    from .calibration.store import load_system

    return load_system(folder, name)


def save_user_system(folder, name: str, system, provenance=()):
    """Save ``system`` (validated first) as ``folder/name.json`` atomically, with its provenance.
    A built-in system preset's name is refused: presets resolve first (``presets.load_spec``), so a
    saved system of that name could never be picked by it."""
    from .calibration.provenance import Provenance
    from .calibration.store import check_not_preset, save_system

    if not isinstance(folder, (str, os.PathLike)) or not str(folder).strip():
        raise ConfigError([("folder", f"expected a folder path, not {str(folder)[:60]!r}")])
    if isinstance(provenance, (str, bytes)) or not isinstance(provenance, (list, tuple)) \
            or not all(isinstance(p, (Provenance, dict)) for p in provenance):
        raise ConfigError([("provenance", "expected a list of Provenance records or their dicts (calibrate()'s "
                                          "summary.provenance)")])
    return save_system(folder, check_not_preset(name), _spec("system", system), provenance)


def search(space, objective: str = "tokens_per_s", top: int | None = None, progress=None, executor=None,
           best_so_far=None):
    """Rank every fitting layout of a search space (``simengine.search``). ``space`` is a
    ``SearchSpace`` or a dict of ``make_space``'s arguments ({"model", "system", "seq_len",
    "global_batch" | "global_batch_tokens", "gpus", "choices", "token_budget"}); ``executor`` is
    an executor object or a name ("inprocess", "process", "ray"); ``progress(done, total)``
    returning True cancels; ``best_so_far(result)`` receives the candidates timed so far after
    each round that timed some (not proven the best; the final result does not depend on it).
    Returns a ``SearchResult``."""
    from .search import run_search

    return run_search(space, objective=objective, top=top, progress=progress, executor=executor, best_so_far=best_so_far)


# ---- what the studio's Search page needs (it reaches the engine only through this module)
from .search.rank import OBJECTIVES as SEARCH_OBJECTIVES  # noqa: E402, F401  (re-exported: the objectives)
from .search.rank import TIE_ON as SEARCH_TIE_ON  # noqa: E402, F401  (re-exported: the band each objective's ties are read on)
from .search.space import DIMS as SEARCH_DIMS  # noqa: E402, F401  (re-exported: the searchable dimensions)
from .search.space import LAYER_SPLIT_FIELDS as SEARCH_SPLIT_FIELDS  # noqa: E402, F401  (searched with pp, not taken from a scenario)
from .search.space import check_choices as check_search_choices  # noqa: E402, F401  (restrictions' values, before a search)
from .search.space import expected_values as search_expected_values  # noqa: E402, F401  (what a dimension's values may be, in words)
from .search.types import FLAG_LABELS as SEARCH_FLAG_LABELS  # noqa: E402, F401  (re-exported: the overlap flags' labels)


def search_fixed_fields(strategy: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A scenario's strategy fields a search keeps fixed, and whether a layer split was left out
    (``simengine.search.make.fixed_fields``)."""
    from .search.make import fixed_fields

    return fixed_fields(strategy)


def make_search_space(*args: Any, **kwargs: Any):
    """A ``SearchSpace`` from plain arguments (``simengine.search.make_space``)."""
    from .search import make_space

    return make_space(*args, **kwargs)


def search_fit_changes(config: dict[str, Any], top: int = 10):
    """The smallest changes that make a scenario fit (``simengine.search.fit_changes``)."""
    from .search import fit_changes

    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError([("top", f"top={str(top)[:40]!r} must be a positive integer")])
    return fit_changes(config, top=top)


def time_and_cost_to_train(tokens: float, tokens_per_s: float, cost_per_million_tokens_usd: float) -> tuple[float, float]:
    """(seconds, USD) to train ``tokens`` (``report.to_train``, the estimate's and the search's own):
    ConfigError for a number that is not finite, or negative (zero throughput: infinite time)."""
    from .report import to_train

    _non_negative(tokens=tokens, tokens_per_s=tokens_per_s, cost_per_million_tokens_usd=cost_per_million_tokens_usd)
    return to_train(tokens, tokens_per_s, cost_per_million_tokens_usd)


def _non_negative(**values: Any) -> None:
    """ConfigError naming the first of ``values`` that is not a finite number >= 0 (a bool, a
    string, None, NaN: a TypeError or a NaN further on)."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ConfigError([(name, f"{name}={str(v)[:40]} must be a finite number >= 0")])


def reserved_gib(allocated_gib: float, allocator_overhead: float, pools_gib: float = 0.0) -> float:
    """Reserved memory of a stage that allocates ``allocated_gib`` at its peak (the fit rule,
    simengine/fit.py: what ``StageMemory.reserved_gib`` is of ``peak_gib``)."""
    from .fit import reserved

    _non_negative(allocated_gib=allocated_gib, allocator_overhead=allocator_overhead, pools_gib=pools_gib)
    return reserved(allocated_gib, allocator_overhead, pools_gib)


def allocated_limit_gib(memory_gib: float, non_torch_gib: float, allocator_overhead: float, pools_gib: float = 0.0) -> float:
    """The most a stage may allocate and still fit (simengine/fit.py; ``StageMemory.allocated_limit_gib``)."""
    from .fit import allocated_limit

    _non_negative(memory_gib=memory_gib, non_torch_gib=non_torch_gib, allocator_overhead=allocator_overhead, pools_gib=pools_gib)
    return allocated_limit(memory_gib, non_torch_gib, allocator_overhead, pools_gib)


def check_run(config: dict[str, Any] | Scenario, log: str | bytes, warmup: int | None = None,
              refit: bool = False) -> dict[str, Any]:
    """A training log (Megatron-LM or torchtitan stdout, as text or bytes: never a path) against
    ``config``'s estimate, as plain data: the measured and predicted step and memory, the parts of
    the prediction with the scale each alone would need, the settings the log states that the
    scenario contradicts, and with ``refit`` the compute-efficiency scale fitted on half the steady
    iterations and checked on the rest, with the system it gives (simengine/checkrun/summary.py;
    the CLI's ``check-run``). ConfigError for a log it cannot read or compare."""
    from .checkrun.summary import check_run as _check_run

    if not isinstance(log, (str, bytes)):
        raise ConfigError([("log", f"expected the log's text or bytes, got {type(log).__name__}")])
    if warmup is not None and (isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0):
        raise ConfigError([("warmup", f"must be a non-negative whole number, got {warmup!r}")])
    cfg = config.model_dump(mode="json") if isinstance(config, Scenario) else config
    scenario_from(cfg)   # a scenario that is not valid is said as such, before the log is read
    return _check_run(cfg, log, warmup, refit)
