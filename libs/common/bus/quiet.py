"""The Kafka client's repeated errors, logged once a minute instead of ten times a second.

While a broker is away, or answers a commit with UNKNOWN_TOPIC_OR_PARTITION, aiokafka retries every 100 ms
and logs every failure: thousands of identical lines that bury what the bus itself says about the incident
(``libs.common.bus`` logs once when it starts and once when it ends, with what it did).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RepeatFilter", "quiet_client_logs"]


class RepeatFilter(logging.Filter):
    """Lets the first warning or error of each kind (logger, level, message template) through, drops the
    same kind for ``window_s``, and notes on the next one let through how many were dropped."""

    def __init__(self, *, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._window_s = window_s
        self._clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # kind -> (let through at, dropped)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind, now = (record.name, record.levelno, str(record.msg)), self._clock()
        passed_at, dropped = self._seen.get(kind, (None, 0))
        if passed_at is not None and now - passed_at < self._window_s:
            self._seen[kind] = (passed_at, dropped + 1)
            return False
        self._seen[kind] = (now, 0)
        if dropped:
            record.msg, record.args = (
                f"{record.getMessage()} ({dropped} more like it in {self._window_s:.0f}s)",
                (),
            )
        return True


def quiet_client_logs() -> RepeatFilter:
    """Install the process's one ``RepeatFilter`` on every aiokafka logger (idempotent); returns it."""
    names = ["aiokafka", *(n for n in logging.root.manager.loggerDict if n.startswith("aiokafka."))]
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    return _FILTER


#: Shared by every client of the process (aiokafka's loggers are process-wide too).
_FILTER = RepeatFilter()
