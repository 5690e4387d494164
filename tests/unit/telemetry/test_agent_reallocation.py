"""The node agent's book follows a reallocation: samples go to the GPUs the host gave, and the checkpoint
keeps the record so a restart labels them the same."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from aiokafka import TopicPartition

from libs.common.events import Event, encode, envelop, topics
from libs.common.events.scheduler import AllocationItem, WorkloadPlacedV1, WorkloadReallocatedV1
from services.telemetry.adapters.agent import checkpoint as ck
from services.telemetry.adapters.agent.intake import Intake
from services.telemetry.adapters.fleetfile import parse_fleet
from services.telemetry.adapters.sim import SimFleet
from services.telemetry.adapters.sim.ids import gpu_uuid
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import SimWorkloadRunner
from services.telemetry.settings import TelemetrySettings

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NODE = "gpu-a-01"
FLEET = f"nodes: [{{hostname: {NODE}, gpus: [{{model: H100-80GB-SXM, count: 4}}]}}]"
PREFIX = "re."
SCHED = TopicPartition(PREFIX + topics.SCHEDULER, 0)
GPUS = [gpu_uuid(hostname=NODE, index=i) for i in range(4)]


def _items(gpus: Sequence[str]) -> list[AllocationItem]:
    return [AllocationItem(gpu_uuid=g, units=Decimal(8), model="H100") for g in gpus]


def _placed(workload: str, gpus: Sequence[str], placement: str) -> WorkloadPlacedV1:
    return WorkloadPlacedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=placement,
        node=NODE,
        allocations=_items(gpus),
        kind="instance",
    )


def _moved(
    workload: str, placement: str, *, now: Sequence[str], before: Sequence[str]
) -> WorkloadReallocatedV1:
    return WorkloadReallocatedV1(
        workload_id=workload,
        tenant_id="acme",
        placement_id=placement,
        node=NODE,
        allocations=_items(now),
        previous=_items(before),
    )


def _agent() -> tuple[PlacementBook, Intake]:
    book = PlacementBook(
        runner=SimWorkloadRunner(fleet=SimFleet(spec=parse_fleet(FLEET), start=T0)), gpus=frozenset(GPUS)
    )
    settings = TelemetrySettings(kafka_bootstrap_servers="kafka-test:9092", kafka_topic_prefix=PREFIX)
    return book, Intake(settings=settings, book=book, gpus=frozenset(GPUS), command=lambda _c: None)


def _apply(intake: Intake, events: Sequence[Event]) -> None:
    for offset, event in enumerate(events):
        raw = encode(envelop(event, source="test", time=T0 + timedelta(seconds=offset)))
        intake.apply(SCHED, offset=offset, raw=raw, live=False)


HISTORY: list[Event] = [
    _placed("w1", GPUS[:2], "p1"),
    _placed("w2", GPUS[2:3], "p2"),
    _moved("w1", "p1", now=[GPUS[3], GPUS[1]], before=GPUS[:2]),
    _moved("w2", "p-old", now=[GPUS[0]], before=GPUS[2:3]),  # about a placement it no longer has
]


def test_a_reallocated_placements_samples_go_to_the_gpus_the_host_gave_it() -> None:
    book, intake = _agent()

    _apply(intake, HISTORY)

    assert book.allocations() == {GPUS[3]: ("w1", "acme"), GPUS[1]: ("w1", "acme"), GPUS[2]: ("w2", "acme")}


def test_the_checkpoint_keeps_the_reallocation_and_a_restart_labels_samples_the_same() -> None:
    live_book, live = _agent()
    _apply(live, HISTORY)
    saved = ck.encode_checkpoint(live.snapshot())

    book, resumed = _agent()
    origin = ck.Origin.of(bootstrap="kafka-test:9092", topic_prefix=PREFIX, gpus=frozenset(GPUS))
    resumed.restore(ck.decode_checkpoint(saved, expect=origin))

    assert book.allocations() == live_book.allocations()
    assert GPUS[0] not in book.allocations()
