"""Loads the GPU model catalog from YAML: the platform's (libs/common/gpu_catalog.yaml), or a given file."""

from __future__ import annotations

from pathlib import Path

import yaml

from libs.common.gpu_models import catalog_text
from services.inventory.domain.catalog import Catalog, parse_catalog

__all__ = ["load_catalog"]


def load_catalog(*, path: Path | None = None) -> Catalog:
    """Load the catalog from `path`, or the platform's shared catalog."""
    text = catalog_text() if path is None else path.read_text(encoding="utf-8")
    return parse_catalog(data=yaml.safe_load(text))
