"""Alerting's unit of work for unit tests: in-memory events and signal queue, rolled back unless committed.

The signal queue is a ``FakeStateStore`` (held to ``StateStore`` by tests/integration/alerting/
test_engine_state_store_contract.py). The state, configuration and delivery stores are SQL only: asked
for without a connection they raise, so code that needs them is tested against Postgres.
"""

from __future__ import annotations

from typing import Any

from libs.common.testing import FakeUnitOfWork
from services.alerting.adapters.engine_state_store_fake import FakeStateStore
from services.alerting.adapters.unit_of_work import SqlOnlyStores

__all__ = ["FakeAlertingUnitOfWork"]


class FakeAlertingUnitOfWork(FakeUnitOfWork, SqlOnlyStores):
    """Events and queued signals in memory; ``signals`` keeps what committed blocks wrote."""

    def __init__(self, signals: FakeStateStore | None = None, *, conn: Any = None) -> None:
        self.signals = signals or FakeStateStore()
        super().__init__(conn, tracked=[self.signals])
