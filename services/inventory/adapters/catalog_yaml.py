"""Loads the GPU model catalog from YAML: the catalog.yaml packaged beside this module, or a given file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from services.inventory.domain.catalog import Catalog, parse_catalog

__all__ = ["load_catalog"]


def load_catalog(*, path: Path | None = None) -> Catalog:
    """Load the catalog from `path`, or from the catalog.yaml packaged with this service."""
    if path is None:
        text = (
            resources.files("services.inventory.adapters")
            .joinpath("catalog.yaml")
            .read_text(encoding="utf-8")
        )
    else:
        text = path.read_text(encoding="utf-8")
    return parse_catalog(data=yaml.safe_load(text))
