"""What a live stream carries: which GPUs' samples, and whether alerts and incidents ride along."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_GPUS", "LiveRequest", "LiveRequestError", "rows_of"]

#: How many GPUs one stream may follow (a page shows at most a few dozen charts).
MAX_GPUS = 256
_GPU = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")


class LiveRequestError(ValueError):
    """A live stream's query is not acceptable; ``field`` names the parameter."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class LiveRequest:
    """What one browser tab wants on its stream."""

    gpus: frozenset[str]
    alerts: bool
    incidents: bool

    @classmethod
    def parse(cls, *, gpus: str | None, alerts: str | None, incidents: str | None) -> LiveRequest:
        """From the query string: ``gpus=<uuid>,<uuid>&alerts=1&incidents=1``."""
        chosen = [g.strip() for g in (gpus or "").split(",") if g.strip()]
        if len(chosen) > MAX_GPUS:
            raise LiveRequestError(f"gpus: at most {MAX_GPUS} GPUs per stream", field="gpus")
        for gpu in chosen:
            if not _GPU.match(gpu):
                raise LiveRequestError(f"gpus: {gpu[:64]!r} is not a GPU UUID", field="gpus")
        return cls(
            gpus=frozenset(chosen),
            alerts=_flag(alerts, field="alerts"),
            incidents=_flag(incidents, field="incidents"),
        )


def _flag(value: str | None, *, field: str) -> bool:
    if value is None or value in ("", "0", "false"):
        return False
    if value in ("1", "true"):
        return True
    raise LiveRequestError(f"{field}: must be 1 or 0", field=field)


def rows_of(rows: Iterable[dict[str, Any]], gpus: frozenset[str]) -> list[dict[str, Any]]:
    """Telemetry's rows of the GPUs a stream follows, as telemetry sent them."""
    return [row for row in rows if row.get("gpu") in gpus]
