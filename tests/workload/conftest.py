"""Fixtures for the workload tests (helpers live in workload_helpers.py)."""

from __future__ import annotations

import pytest
from workload_helpers import CATALOG


@pytest.fixture(params=CATALOG)
def catalog_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)
