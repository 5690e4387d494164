from __future__ import annotations

import pytest

from services.inventory.catalog import Catalog, load_catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()
