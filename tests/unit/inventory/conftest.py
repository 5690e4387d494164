from __future__ import annotations

import pytest

from services.inventory.adapters.catalog_yaml import load_catalog
from services.inventory.domain.catalog import Catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()
