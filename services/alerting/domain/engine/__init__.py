"""The evaluator's in-memory state for every series, node, event alert and group, and what changed.

Pure: time is passed in and no IO happens. The evaluator loop feeds samples, signals and ticks,
then `drain()`s the changes to persist in one transaction (state rows, alert events, notifications).
Only transitions dirty a series, so a steady 1 Hz stream with nothing breaching writes nothing.

Parts: `_engine` (the inputs: configuration, samples, the hot path, signals, ticks), `_state` (the
state and the changes it records), `_plan` (the hot path's per-series checks), `_timers` (pending
`for` timers) and `_changes` (what a drain hands over).
"""

from services.alerting.domain.engine._changes import Changes, EventAlert
from services.alerting.domain.engine._engine import Engine

__all__ = ["Changes", "Engine", "EventAlert"]
