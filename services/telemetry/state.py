"""What the aggregator's loops and routes share in one process."""

from __future__ import annotations

from dataclasses import dataclass, field

from libs.common.runtime import ServiceRuntime
from services.telemetry.allocations import AllocationView
from services.telemetry.detect import DetectorConfig, FaultDetector
from services.telemetry.live import LiveState
from services.telemetry.rollup import RollupAccumulator
from services.telemetry.settings import TelemetrySettings

__all__ = ["TelemetryState"]


@dataclass
class TelemetryState:
    """Allocation labels, rollup windows and fault detector state of this aggregator process."""

    settings: TelemetrySettings
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
