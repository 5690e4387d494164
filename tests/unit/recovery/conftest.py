from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.recovery.adapters.catalog_loader import load_catalog
from services.recovery.domain.catalog import FaultCatalog

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def catalog() -> FaultCatalog:
    return load_catalog()
