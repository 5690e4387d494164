"""The GPU model catalog every service shares: datasheet facts, MIG geometry, and each model's aliases.

The catalog is ``gpu_catalog.yaml`` beside this module. Inventory parses all of it (compute units, MIG
profiles); the scheduler needs only the names, so that a submission naming a model by an alias (as NVML or
a datasheet spells it, ``NVIDIA A100 80GB PCIe``) asks for the canonical model the GPUs register as.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

__all__ = ["catalog_text", "model_names"]


def catalog_text() -> str:
    """The packaged catalog's YAML text."""
    return resources.files("libs.common").joinpath("gpu_catalog.yaml").read_text(encoding="utf-8")


@cache
def model_names() -> dict[str, str]:
    """Every model's canonical name and aliases, case-folded, to its canonical name."""
    raw: dict[str, Any] = yaml.safe_load(catalog_text())
    names: dict[str, str] = {}
    for model in raw["models"]:
        for key in (model["name"], *model.get("aliases", ())):
            names[str(key).casefold()] = str(model["name"])
    return names
