"""Validated, frozen configuration objects (pydantic v2)."""

from .model import ModelSpec
from .scenario import Scenario, check_scenario, load_scenario, make_scenario, padded_vocab
from .strategy import StrategySpec
from .system import Efficiency, GPUSpec, NetworkTier, PeakTflops, ScaleUp, SystemSpec

__all__ = [
    "Efficiency", "GPUSpec", "ModelSpec", "NetworkTier", "PeakTflops", "ScaleUp", "Scenario",
    "StrategySpec", "SystemSpec", "check_scenario", "load_scenario", "make_scenario", "padded_vocab",
]
