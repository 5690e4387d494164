"""Stable ids shared with inventory by contract (reproduced here: services never import each other)."""

from __future__ import annotations

import uuid

__all__ = ["GPU_UUID_NAMESPACE", "gpu_uuid"]

#: Must equal inventory's fleet-file namespace, so a simulated GPU and its inventory record share a uuid.
GPU_UUID_NAMESPACE = uuid.UUID("6f1c2a4e-0b7d-4c39-9a55-3f0e8f0c1d2b")


def gpu_uuid(*, hostname: str, index: int) -> str:
    """The uuid a fleet-file GPU gets: uuid5 of "<hostname>/<index>", shaped like NVML's "GPU-..."."""
    return f"GPU-{uuid.uuid5(GPU_UUID_NAMESPACE, f'{hostname}/{index}')}"
