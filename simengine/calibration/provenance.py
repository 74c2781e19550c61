"""Where every calibrated number came from: file name, sha256, rows used and the fit's error.

``read_input`` reads a calibration input once (text, bytes or a ``pathlib.Path``; bounded by
:data:`.source.MAX_INPUT_BYTES`) and returns its text with a digest, so the readers and the
provenance record see the same bytes. The digest is the sha256 of the text as read, UTF-8 encoded
(equal to the file's own sha256 for a UTF-8 file without a byte-order mark).
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..config.system import GemmPoint
from .source import read_text

HOLDOUT_POINTS = 200  # GEMM points held out to measure the interpolation error
MAX_INDEX_POINTS = 20_000  # larger tables are sampled evenly for that check (the error is then an upper bound)


class Provenance(BaseModel):
    """One calibrated field and its source."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str = Field(..., max_length=200, description="The efficiency field set, e.g. efficiency.gemm_table.")
    file: str = Field("", max_length=200, description="File name as given (empty for pasted content).")
    sha256: str = Field("", max_length=64)
    rows_used: int = Field(0, ge=0)
    fit_error: float | None = Field(None, description="Relative error of the fit (see method).")
    method: str = Field("", max_length=300)


def read_input(source: str | bytes | os.PathLike, field: str) -> tuple[str, str, str]:
    """``(text, file name, sha256)`` of a calibration input."""
    text, name = read_text(source, field)
    return text, name, hashlib.sha256(text.encode("utf-8")).hexdigest()


GEMM_FIT_WARN = 0.20  # a held-out error above this is said in the calibration's warnings


def holdout(count: int, n: int = HOLDOUT_POINTS) -> set[int]:
    """Indices of the points held out of a table of ``count``: one in five at most (``n`` at
    most), drawn at random with a fixed seed (deterministic). An evenly spaced stride aliases
    with a grid's period: a stride of 5 over OpenXLA's table (five k values per (b, m, n)) held
    out its whole k = 256 plane, so the "interpolation" it showed was an extrapolation."""
    return set(random.Random(0).sample(range(count), min(n, count // 5)))


def gemm_holdout_error(points: Sequence[GemmPoint], n: int = HOLDOUT_POINTS) -> float | None:
    """How well the table's interpolation (calibration/table.py) predicts the time of shapes it
    did not measure: up to ``n`` points (one in five at most, drawn with a fixed seed) are held out
    of the index, and the |relative error| of each one's efficiency (= of its time) is averaged
    weighted by its measured time: the error of the GEMM time a step sums over such shapes. An
    unweighted mean is ruled by the
    smallest shapes (a 256³ GEMM of ~5 µs, launch-bound, whose efficiency changes 2× between grid
    points: OpenXLA's H100 table reads 18 % unweighted, 6.8 % by time). ``None`` with fewer than
    10 points."""
    from .table import GemmIndex

    if len(points) < 10:
        return None
    if len(points) > MAX_INDEX_POINTS:  # bound the time: an evenly spaced sample of the table
        stride = len(points) / MAX_INDEX_POINTS
        points = [points[int(i * stride)] for i in range(MAX_INDEX_POINTS)]
    held = holdout(len(points), n)
    index = GemmIndex([p for i, p in enumerate(points) if i not in held])
    err = weight = 0.0
    for i in held:
        p = points[i]
        got = index(p.m, p.n, p.k, p.b, p.dtype, p.layout)
        if got is not None:
            t = 2.0 * p.b * p.m * p.n * p.k / p.efficiency   # the measured time, up to the peak
            err += t * abs(got - p.efficiency) / p.efficiency
            weight += t
    return err / weight if weight > 0 else None
