"""Validation as a product: the bundled measured runs (``data/``, see ATTRIBUTION.md) as
scenarios, estimated through ``simengine.api`` and compared with what was measured.

``b200`` maps the 20 Megatron-LM B200 runs as launched; ``published/`` maps the published runs
(papers and framework benchmark pages) and converts a report into each source's own metric;
``run.validate`` puts them together into one :class:`ValidationResult`; ``cli`` is
``python -m simengine validate``.
"""

from .b200 import MeasuredRun, b200_runs, b200_system
from .result import SkippedRow, SummaryRow, ValidationResult, ValidationRow
from .run import SOURCES, validate

__all__ = ["SOURCES", "MeasuredRun", "SkippedRow", "SummaryRow", "ValidationResult", "ValidationRow", "b200_runs",
           "b200_system", "validate"]
