"""Shared fixtures."""

from __future__ import annotations

import pytest

from scenarios import VALIDATION


@pytest.fixture
def validation_dir():
    """The bundled measured data; a missing folder is a failure (it ships with the package), never a skip."""
    assert VALIDATION.is_dir(), f"bundled validation data missing at {VALIDATION}"
    return VALIDATION
