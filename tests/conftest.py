"""Shared fixtures."""

from __future__ import annotations

import pytest

from scenarios import VALIDATION


@pytest.fixture
def validation_dir():
    if not VALIDATION.is_dir():
        pytest.skip(f"validation data not found at {VALIDATION}")
    return VALIDATION
