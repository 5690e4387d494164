"""Whether a consumer is applying events: what readiness reports for each consumer runner.

A runner that cannot apply or commit (its database refuses, the broker answers every commit with an error,
it crashes and restarts) looks alive from outside; ``/readyz`` says so once it has failed for longer than a
bound, and is satisfied again by its next commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["ConsumerHealth"]


class ConsumerHealth:
    """One consumer's record of failures, kept across the restarts of its runner."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failing_since: float | None = None
        self._failed_since_check = False
        self.error: str | None = None  # the latest failure while failing

    def applied(self) -> None:
        """Events were applied and their offsets committed: whatever failed before is over."""
        self._failing_since, self._failed_since_check, self.error = None, False, None

    def failed(self, error: str) -> None:
        """Applying, committing or checking the log failed."""
        if self._failing_since is None:
            self._failing_since = self._clock()
        self._failed_since_check, self.error = True, error

    def checked(self) -> None:
        """The periodic check of the log passed: with nothing failed since the previous check, an idle
        consumer is healthy (it has nothing to apply)."""
        if not self._failed_since_check:
            self._failing_since, self.error = None, None
        self._failed_since_check = False

    def stalled(self, *, bound_s: float) -> str | None:
        """Why the consumer is not applying events, once it has failed for longer than ``bound_s``."""
        if self._failing_since is None:
            return None
        failing_s = self._clock() - self._failing_since
        if failing_s <= bound_s:
            return None
        return f"not applying events for {failing_s:.0f}s: {self.error}"
