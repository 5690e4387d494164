"""What the aggregator's loops and routes share in one process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from libs.common.runtime import ServiceRuntime
from services.telemetry.adapters.live_store import LiveState
from services.telemetry.domain.allocations import AllocationView
from services.telemetry.domain.rollup import RollupAccumulator
from services.telemetry.service.detect import DetectorConfig, FaultDetector

__all__ = ["AggregatorSettings", "TelemetryState"]


class AggregatorSettings(Protocol):
    """The settings the aggregator's loops and routes read (the service's settings have them)."""

    @property
    def rollup_interval_s(self) -> float: ...
    @property
    def rollup_grace_s(self) -> float: ...
    @property
    def recent_samples(self) -> int: ...
    @property
    def stream_refresh_s(self) -> float: ...
    @property
    def allocation_refresh_s(self) -> float: ...
    @property
    def thermal_fault_margin_c(self) -> float: ...
    @property
    def pcie_saturation_share(self) -> float: ...
    @property
    def pcie_saturation_samples(self) -> int: ...
    @property
    def sbe_burst(self) -> int: ...


@dataclass
class TelemetryState:
    """Allocation labels, rollup windows and fault detector state of this aggregator process."""

    settings: AggregatorSettings
    view: AllocationView = field(default_factory=AllocationView)
    rollups: RollupAccumulator = field(init=False)
    detector: FaultDetector = field(init=False)
    _live: LiveState | None = None

    def __post_init__(self) -> None:
        s = self.settings
        self.rollups = RollupAccumulator(window_s=s.rollup_interval_s)
        self.detector = FaultDetector(
            config=DetectorConfig(
                thermal_margin_c=s.thermal_fault_margin_c,
                pcie_share=s.pcie_saturation_share,
                pcie_samples=s.pcie_saturation_samples,
                sbe_burst=s.sbe_burst,
            )
        )

    def live(self, runtime: ServiceRuntime) -> LiveState:
        """The Redis live state (the runtime must be started)."""
        if self._live is None:
            self._live = LiveState(
                redis=runtime.redis, keys=runtime.keys, recent=self.settings.recent_samples
            )
        return self._live
