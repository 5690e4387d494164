"""Loading the fault catalog shipped with the package (catalog.yaml, beside this module)."""

from __future__ import annotations

from importlib import resources

import yaml

from services.recovery.domain.catalog import FaultCatalog, parse_catalog

__all__ = ["load_catalog"]


def load_catalog() -> FaultCatalog:
    """Load the catalog shipped with the package (catalog.yaml)."""
    text = (
        resources.files(__package__ or "services.recovery.adapters")
        .joinpath("catalog.yaml")
        .read_text("utf-8")
    )
    return parse_catalog(yaml.safe_load(text))
