"""Fault detection from samples: thermal, ECC increases and PCIe saturation, edge-triggered.

Pure: state per GPU lives in the detector, samples and times are passed in. XIDs and lost GPUs are
signalled by the agent (it sees them first, through NVML's event API); this covers what only a
series of samples shows, and a GPU that stays lost: the agent signals a loss once, when it starts,
so the detector signals it again every ``lost_repeat_s`` while the GPU's readings still say lost. A
consumer that closed its incident meanwhile (or never heard the first signal) learns it is still gone.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from libs.common.events.telemetry import FaultSignaledV1
from services.telemetry.domain.gpu_models import model_for_name

__all__ = ["DetectorConfig", "FaultDetector"]

_NS = uuid.UUID("5e0f9b7a-2d4c-4b8e-8f1a-6c3d2e1b0a99")
_spec = functools.lru_cache(maxsize=128)(model_for_name)  # called for every sample
HYSTERESIS_C = 5.0
DEFAULT_SLOWDOWN_C = 85.0
DEFAULT_LINK_BYTES_PER_S = 16 * 10**9


@dataclass(frozen=True, slots=True)
class DetectorConfig:
    """Thresholds (settings carry them)."""

    thermal_margin_c: float = 0.0
    pcie_share: float = 0.9
    pcie_samples: int = 5
    sbe_burst: int = 10
    lost_repeat_s: float = 60.0


@dataclass(slots=True)
class _GpuState:
    hot: bool = False
    sbe: int | None = None
    dbe: int | None = None
    saturated_run: int = 0
    saturated: bool = False
    lost_said: datetime | None = None  # while lost: when the loss was last signalled (or first seen)


class FaultDetector:
    """Remembers each GPU's last counters and conditions; ``observe`` returns new faults only."""

    def __init__(self, *, config: DetectorConfig) -> None:
        self._config = config
        self._gpus: dict[str, _GpuState] = {}
        self._limits: dict[str, tuple[float, float]] = {}  # model -> (thermal limit, link bytes/s)
        self._burst_of_nothing = config.sbe_burst <= 0  # then even unchanged counters are a "burst"

    def observe(self, *, node: str, at: datetime, sample: Mapping[str, Any]) -> list[FaultSignaledV1]:
        """Faults this sample shows that the previous ones did not."""
        get = sample.get
        if get("parent_gpu"):
            return []
        gpu = sample["gpu"]
        state = self._gpus.get(gpu)
        if state is None:
            state = self._gpus[gpu] = _GpuState()
        if get("lost_reason"):
            return self._still_lost(state, sample, node=node, at=at)
        state.lost_said = None
        # Most samples are quiet: each check below is only run where it could fire or change state.
        found: list[tuple[str, dict[str, Any]] | None] = []
        model = get("model") or ""
        limits = self._limits.get(model)
        if limits is None:
            limits = self._limits[model] = (self._thermal_limit(model), self._link(model))
        temp = get("gpu_temp_c")
        if temp is not None and (state.hot or temp >= limits[0]):
            found.append(self._thermal(state, sample))
        if get("ecc_sbe_count") != state.sbe or get("ecc_dbe_count") != state.dbe or self._burst_of_nothing:
            found.extend(self._ecc(state, sample))
        rx = get("pcie_rx_bytes_per_s")
        if rx is not None and (state.saturated_run or rx / limits[1] >= self._config.pcie_share):
            found.append(self._pcie(state, sample))
        if not found:
            return []
        return [_fault(kind, sample, node=node, at=at, evidence=ev) for kind, ev in filter(None, found)]

    def _still_lost(
        self, state: _GpuState, s: Mapping[str, Any], *, node: str, at: datetime
    ) -> list[FaultSignaledV1]:
        """A lost reading: nothing at first (the agent signals the loss), then one signal per repeat."""
        if state.lost_said is None:
            state.lost_said = at
            return []
        if (at - state.lost_said).total_seconds() < self._config.lost_repeat_s:
            return []
        state.lost_said = at
        evidence = {"reason": s.get("lost_reason"), "repeat_s": self._config.lost_repeat_s}
        return [_fault("lost", s, node=node, at=at, evidence=evidence)]

    def _thermal_limit(self, model: str) -> float:
        spec = _spec(model)
        return (spec.slowdown_temp_c if spec else DEFAULT_SLOWDOWN_C) + self._config.thermal_margin_c

    @staticmethod
    def _link(model: str) -> float:
        spec = _spec(model)
        return spec.pcie_bytes_per_s if spec else DEFAULT_LINK_BYTES_PER_S

    def _thermal(self, state: _GpuState, s: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        temp = s.get("gpu_temp_c")
        if temp is None:
            return None
        spec = _spec(s.get("model") or "")
        limit = (spec.slowdown_temp_c if spec else DEFAULT_SLOWDOWN_C) + self._config.thermal_margin_c
        if state.hot and temp < limit - HYSTERESIS_C:
            state.hot = False
        if state.hot or temp < limit:
            return None
        state.hot = True
        evidence = {"gpu_temp_c": temp, "threshold_c": limit, "mem_temp_c": s.get("mem_temp_c")}
        evidence |= {"power_w": s.get("power_w"), "throttle_reasons": s.get("throttle_reasons")}
        return "thermal", evidence

    def _ecc(self, state: _GpuState, s: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]] | None]:
        sbe, dbe = s.get("ecc_sbe_count"), s.get("ecc_dbe_count")
        out: list[tuple[str, dict[str, Any]] | None] = []
        if dbe is not None and state.dbe is not None and dbe > state.dbe:
            out.append(("ecc", {"ecc_dbe_count": dbe, "previous": state.dbe, "bits": "double"}))
        elif sbe is not None and state.sbe is not None and sbe - state.sbe >= self._config.sbe_burst:
            out.append(("ecc", {"ecc_sbe_count": sbe, "previous": state.sbe, "bits": "single"}))
        # Counters are volatile: a reset lowers them, and the next increase is measured from there.
        state.sbe, state.dbe = sbe if sbe is not None else state.sbe, dbe if dbe is not None else state.dbe
        return out

    def _pcie(self, state: _GpuState, s: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        rx = s.get("pcie_rx_bytes_per_s")
        if rx is None:
            return None
        spec = _spec(s.get("model") or "")
        link = spec.pcie_bytes_per_s if spec else DEFAULT_LINK_BYTES_PER_S
        share = rx / link
        if share < self._config.pcie_share:
            state.saturated_run, state.saturated = 0, False
            return None
        state.saturated_run += 1
        if state.saturated or state.saturated_run < self._config.pcie_samples:
            return None
        state.saturated = True
        evidence = {"pcie_rx_bytes_per_s": rx, "link_bytes_per_s": link, "rx_link_share": round(share, 3)}
        evidence |= {"consecutive_samples": state.saturated_run, "sm_util_pct": s.get("sm_util_pct")}
        return "pcie", evidence


def _fault(
    kind: str, s: Mapping[str, Any], *, node: str, at: datetime, evidence: dict[str, Any]
) -> FaultSignaledV1:
    gpu = s["gpu"]
    return FaultSignaledV1(
        fault_id=str(uuid.uuid5(_NS, f"{gpu}/{kind}/{at.isoformat()}")),
        kind=kind,  # type: ignore[arg-type]  # one of the FaultKind literals above
        gpu_uuid=gpu,
        node=node,
        at=at,
        evidence={
            **evidence,
            "model": s.get("model"),
            "workload_id": s.get("workload_id"),
            "source": "samples",
        },
    )
