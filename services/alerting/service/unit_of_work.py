"""Alerting's unit of work: one transaction and the stores that write inside it.

Handlers, the evaluator, the delivery worker and the API's writes take ``AlertingUnitOfWork`` and reach
their stores as ``uow.signals``, ``uow.state``, ``uow.config`` and ``uow.deliveries``;
``adapters/unit_of_work.py`` opens the Postgres one, ``adapters/unit_of_work_fake.py`` the in-memory one a
unit test passes (its signal queue a fake held to the real one by a contract test).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from libs.common.db.uow import UnitOfWork
from libs.common.runtime import ServiceRuntime
from services.alerting.adapters.config_store import ConfigStore
from services.alerting.adapters.delivery_store import DeliveryStore
from services.alerting.adapters.engine_state_store import StateStore
from services.alerting.adapters.unit_of_work import PostgresAlertingUnitOfWork
from services.alerting.domain.alert_lifecycle import Transition
from services.alerting.domain.signals import Signal

__all__ = ["AlertingUnitOfWork", "PendingList", "SignalQueue", "alerting_uow"]


class SignalQueue(Protocol):
    """Where the handlers queue signals for the evaluator (StateStore; FakeStateStore in unit tests)."""

    async def queue_signal(self, signal: Signal) -> None: ...


class PendingList(Protocol):
    """The pending alerts the evaluator lists for the API (StateStore; FakeStateStore in unit tests)."""

    async def record_pending(self, transitions: Sequence[Transition]) -> None: ...

    async def replace_pending(self, pending: Sequence[Transition]) -> None: ...


class AlertingUnitOfWork(UnitOfWork, Protocol):
    """A transaction of alerting's schema, with its stores on the same connection."""

    @property
    def signals(self) -> SignalQueue:
        """Signals queued for the evaluator (the writes the handlers make)."""
        ...

    @property
    def state(self) -> StateStore:
        """The evaluator's persisted state: series, groups, alert history, notifications, signals."""
        ...

    @property
    def config(self) -> ConfigStore:
        """Rules, silences, receivers and the routing tree."""
        ...

    @property
    def deliveries(self) -> DeliveryStore:
        """Notifications to deliver and their attempts."""
        ...


def alerting_uow(runtime: ServiceRuntime) -> PostgresAlertingUnitOfWork:
    """A new unit of work on the runtime's pool, with alerting's stores."""
    return PostgresAlertingUnitOfWork(pool=runtime.pool, source=runtime.settings.service_name)
