"""What the engine changed since the last drain, and the event-raised alerts it keeps."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import AwareDatetime, BaseModel, ConfigDict

from services.alerting.domain.absence import NodeState
from services.alerting.domain.alert_lifecycle import Transition
from services.alerting.domain.alerts import Alert
from services.alerting.domain.grouping import AlertGroup, Notification
from services.alerting.domain.series_evaluation import SeriesState

__all__ = ["Changes", "EventAlert"]


class EventAlert(BaseModel):
    """A firing alert raised by an event; it resolves at `expires_at` unless the event repeats."""

    model_config = ConfigDict(frozen=True)

    rule: str
    alert: Alert
    expires_at: AwareDatetime


@dataclass
class Changes:
    """Everything to write in one transaction; `None` values mean delete the row."""

    transitions: list[Transition] = field(default_factory=list)
    series: dict[str, SeriesState | None] = field(default_factory=dict)
    nodes: dict[str, NodeState | None] = field(default_factory=dict)
    events: dict[str, EventAlert | None] = field(default_factory=dict)
    groups: dict[str, AlertGroup | None] = field(default_factory=dict)
    notifications: list[Notification] = field(default_factory=list)

    def empty(self) -> bool:
        """Nothing to write."""
        return not (self.transitions or self.series or self.nodes or self.events or self.groups)
