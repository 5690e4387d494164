"""The sample hot path (plain-JSON decoding, per-series plans, quiet samples) against the models."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from libs.common.events import encode, envelop
from libs.common.events.sample_wire import SAMPLE_BATCH_TYPE
from libs.common.events.telemetry import GpuMetrics, SampleBatchV1
from services.alerting.domain.alert_lifecycle import EvaluationConfig, Transition
from services.alerting.domain.engine import Engine
from services.alerting.domain.matchers import Matcher, MatchOp
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import DEFAULT_RULES, Comparator, Rule, RuleKind
from services.alerting.domain.samples import derive, reading_labels, to_sample, value_fields
from services.alerting.domain.series_evaluation import SeriesState
from services.alerting.domain.signals import fault_signal
from services.alerting.service.evaluator import in_time_order, plain_readings, reading_checks
from tests.unit.alerting.clock import at

GIB = 1024**3
TREE = RoutingTree(
    default=Route(receiver="oncall", group_wait=timedelta(0), group_interval=timedelta(seconds=1))
)
RULES = (
    *DEFAULT_RULES,
    Rule(name="MemFast", metric="fb_used_pct", threshold=90, for_duration=timedelta(seconds=2),
         keep_firing_for=timedelta(seconds=1), matchers=(Matcher(name="node", op=MatchOp.RE, value="n[01]"),),
         ),
    Rule(name="HotTenant", metric="gpu_temp_c", comparator=Comparator.GE, threshold=80,
         for_duration=timedelta(seconds=1), owner_tenant="acme"),
    Rule(name="XidAny", kind=RuleKind.INCREASE, metric="xid_count", comparator=Comparator.GE, threshold=0,
         window=timedelta(seconds=30), matchers=(Matcher(name="node", value="n2"),)),
    Rule(name="NotLost", metric="gpu_lost", comparator=Comparator.LT, threshold=1,
         matchers=(Matcher(name="node", value="n3"),)),
)  # fmt: skip


def metrics(node: str, i: int, *, pct: float, temp: float, xid: int, tenant: str | None) -> GpuMetrics:
    total = 80 * GIB
    return GpuMetrics(
        gpu=f"GPU-{node}-{i}", index=i, model="H100", sm_util_pct=50.0, fb_used_bytes=int(total * pct / 100),
        fb_total_bytes=total, gpu_temp_c=temp, power_w=300.0, ecc_dbe_count=0, xid_count=xid,
        throttle_reasons=4 if pct > 97 else 0, tenant_id=tenant, workload_id="w" if tenant else None,
    )  # fmt: skip


def engine() -> Engine:
    e = Engine(
        tree=TREE, config=EvaluationConfig(staleness=timedelta(seconds=20)), event_ttl=timedelta(minutes=5)
    )
    e.configure(rules=RULES, tree=TREE, silences=(), now=at(0))
    return e


def summary(transitions: list[Transition]) -> list[tuple[str, str, str, Any]]:
    return [(t.kind.value, t.rule, t.alert.fingerprint, t.at) for t in transitions]


def states(e: Engine) -> dict[str, dict[str, Any]]:
    return {k: e._current(k).model_dump() for k in list(e.series)}  # type: ignore[union-attr]


def test_the_plain_decoder_reads_what_the_models_read() -> None:
    assert SampleBatchV1.event_type() == SAMPLE_BATCH_TYPE
    readings = [
        metrics("n0", i, pct=40 + 30 * i, temp=60.5, xid=i, tenant="acme" if i else None) for i in range(3)
    ]
    batch = SampleBatchV1(node="n0", at=at(1), samples=readings)
    checks = reading_checks(frozenset(r.metric for r in RULES))
    wire = plain_readings(encode(envelop(batch, source="t")), checks)
    assert wire is not None
    assert (wire.node, wire.at) == ("n0", at(1))
    fields = value_fields(frozenset(r.metric for r in RULES))
    for reading, model in zip(wire.samples, readings, strict=True):
        labels = reading_labels("n0", reading)
        assert to_sample(labels=labels, reading=reading, fields=fields) == to_sample(
            labels=labels, reading=derive(model.model_dump()), fields=fields
        )
        assert reading["fb_used_pct"] == model.fb_used_pct


def test_the_hot_path_makes_the_same_transitions_and_states_as_full_evaluation() -> None:
    """Random walks of 16 GPUs on 4 nodes, fed to one engine as Samples and to another as wire readings."""
    rng = random.Random(7)
    by_samples, by_readings = engine(), engine()
    values = {(n, i): [40.0, 60.0, 0] for n in range(4) for i in range(4)}
    checks = reading_checks(by_readings.metrics)
    fields = value_fields(by_samples.metrics)
    seen, kinds = 0, set()
    for tick in range(240):
        second = tick * 0.5
        for n in range(4):
            if n == 1 and 60 <= tick < 130:
                continue  # a silent node: staleness and the agent-silent rule
            node, readings = f"n{n}", []
            for i in range(4):
                if (n, i) == (3, 3) and 150 <= tick < 200:
                    continue  # one GPU missing from its node's batches: staleness markers
                v = values[(n, i)]
                v[0] = min(100.0, max(0.0, v[0] + rng.choice((-30, -5, 0, 0, 0, 5, 30))))
                v[1] = min(95.0, max(40.0, v[1] + rng.choice((-10, 0, 0, 0, 10))))
                v[2] += rng.random() < 0.03
                tenant = "acme" if i % 2 else "globex"
                readings.append(metrics(node, i, pct=v[0], temp=v[1], xid=int(v[2]), tenant=tenant))
            raw = encode(envelop(SampleBatchV1(node=node, at=at(second), samples=readings), source="t"))
            wire = plain_readings(raw, checks)
            assert wire is not None
            samples = [
                to_sample(labels=reading_labels(node, d), reading=d, fields=fields)
                for d in (derive(r.model_dump()) for r in readings)
            ]
            seen += by_samples.observe(node=node, at=at(second), samples=samples, now=at(second))
            by_readings.observe_readings(node=node, at=at(second), readings=wire.samples, now=at(second))
        if tick % 50 == 25:
            lost = fault_signal(kind="lost", node="n2", gpu="GPU-n2-1", xid=None, at=at(second), evidence={})
            by_samples.signal(lost, now=at(second))
            by_readings.signal(lost, now=at(second))
        if tick % 3 == 0:
            by_samples.tick(now=at(second + 0.25))
            by_readings.tick(now=at(second + 0.25))
        else:
            by_samples.advance(now=at(second + 0.25))
            by_readings.advance(now=at(second + 0.25))
        expected, got = by_samples.drain(), by_readings.drain()
        assert summary(got.transitions) == summary(expected.transitions), f"tick {tick}"
        kinds |= {(t.kind.value, t.rule) for t in expected.transitions}
        assert [n.id for n in got.notifications] == [n.id for n in expected.notifications]
        assert got.series.keys() == expected.series.keys()
        assert got.nodes.keys() == expected.nodes.keys()
        if tick % 20 == 0:
            assert states(by_readings) == states(by_samples)
    assert seen > 0
    # The walk went through every kind of change, so the comparison above meant something.
    assert {k for k, _ in kinds} == {"pending", "firing", "resolved", "cancelled"}
    assert {"MemFast", "HotTenant", "XidAny", "GpuLost", "NotLost", "NodeAgentSilent"} <= {
        r for _, r in kinds
    }


def test_a_new_quiet_series_is_built_as_full_evaluation_builds_it() -> None:
    by_samples, by_readings = engine(), engine()
    reading = derive(metrics("n2", 0, pct=40, temp=60, xid=3, tenant="acme").model_dump())
    labels = reading_labels("n2", reading)
    sample = to_sample(labels=labels, reading=reading, fields=value_fields(by_samples.metrics))
    by_samples.observe(node="n2", at=at(1), samples=[sample], now=at(1))
    by_readings.observe_readings(node="n2", at=at(1), readings=[reading], now=at(1))
    # XidAny (increase >= 0) holds on n2's first point: both evaluated it in full and went pending.
    assert summary(by_readings.drain().transitions) == summary(by_samples.drain().transitions)
    quiet = derive(metrics("n0", 0, pct=40, temp=60, xid=3, tenant="acme").model_dump())
    sample = to_sample(
        labels=reading_labels("n0", quiet), reading=quiet, fields=value_fields(by_samples.metrics)
    )
    by_samples.observe(node="n0", at=at(1), samples=[sample], now=at(1))
    by_readings.observe_readings(node="n0", at=at(1), readings=[quiet], now=at(1))
    assert states(by_readings) == states(by_samples)
    assert all(isinstance(s, SeriesState) for s in by_readings.series.values())


def test_a_pending_alert_of_a_silent_series_fires_on_advance_after_the_grace_dated_at_for() -> None:
    e = engine()
    hot = derive(metrics("n0", 0, pct=95, temp=60, xid=0, tenant=None).model_dump())
    e.observe_readings(node="n0", at=at(10), readings=[hot], now=at(10))
    assert [t[:2] for t in summary(e.drain().transitions)] == [
        ("pending", "GpuMemoryHigh"),
        ("pending", "MemFast"),
    ]
    e.advance(now=at(12))
    assert e.drain().transitions == []  # its sample at 12 may still be on its way
    e.advance(now=at(12.099))
    assert e.drain().transitions == []
    e.advance(now=at(12.1))  # none came within the grace (promote_grace): its last sample stands
    changes = e.drain()
    assert [t[:2] for t in summary(changes.transitions)] == [("firing", "MemFast")]
    assert changes.transitions[0].alert.starts_at == at(12)
    assert [n.status.value for n in changes.notifications] == ["firing"]


@dataclass(frozen=True)
class _Record:
    partition: int
    offset: int
    timestamp: int
    value: bytes | None = None


def test_a_poll_is_evaluated_in_time_order_across_partitions_and_in_order_within_each() -> None:
    early_in_p2 = _Record(2, 0, timestamp=1_000)
    parts = [
        [_Record(0, 0, 1_010), _Record(0, 1, 1_020)],
        [_Record(1, 0, 1_005), _Record(1, 1, 1_030)],
        [early_in_p2, _Record(2, 1, 1_015), _Record(2, 2, 1_001)],  # a late stamp keeps its place
    ]

    ordered = in_time_order(parts)

    assert ordered[0] is early_in_p2  # the first published is not kept behind two partitions
    assert sorted(ordered, key=lambda r: (r.partition, r.offset)) == [r for part in parts for r in part]
    for p in range(3):
        assert [r.offset for r in ordered if r.partition == p] == sorted(r.offset for r in parts[p])
    assert [(r.partition, r.offset) for r in ordered] == [
        (2, 0),
        (1, 0),
        (0, 0),
        (2, 1),
        (2, 2),
        (0, 1),
        (1, 1),
    ]
