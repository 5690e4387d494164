from __future__ import annotations

from datetime import timedelta

from services.alerting.domain.alert_lifecycle import EvaluationConfig, TransitionKind
from services.alerting.domain.engine import Engine
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import DEFAULT_RULES, Comparator, Rule
from services.alerting.domain.series_evaluation import Sample
from services.alerting.domain.signals import fault_signal
from tests.unit.alerting.clock import at

RULE = Rule(
    name="MemHigh",
    metric="fb_used_pct",
    comparator=Comparator.GT,
    threshold=90,
    for_duration=timedelta(seconds=2),
)
TREE = RoutingTree(default=Route(receiver="oncall", group_interval=timedelta(seconds=1)))
LABELS = {"gpu": "GPU-1", "node": "n1", "tenant": "acme"}


def engine() -> Engine:
    e = Engine(tree=TREE, config=EvaluationConfig(), event_ttl=timedelta(minutes=5))
    lost = next(r for r in DEFAULT_RULES if r.name == "GpuLost")
    e.configure(rules=(RULE, lost), tree=TREE, silences=(), now=at(0))
    return e


def feed(e: Engine, second: float, pct: float) -> None:
    sample = Sample(labels=LABELS, values={"fb_used_pct": pct, "xid_count": 0.0, "gpu_lost": 0.0})
    e.observe(node="n1", at=at(second), samples=[sample], now=at(second))
    e.flush(now=at(second))


def kinds(e: Engine) -> list[tuple[str, TransitionKind]]:
    return [(t.rule, t.kind) for t in e.drain().transitions]


def test_quiet_samples_write_nothing_and_a_breach_fires_exactly_at_for() -> None:
    e = engine()
    for second in range(5):
        feed(e, second, 40)
    changes = e.drain()
    assert changes.transitions == []
    assert changes.series == {}
    feed(e, 5, 95)
    assert kinds(e) == [("MemHigh", TransitionKind.PENDING)]
    feed(e, 6.9, 95)
    assert kinds(e) == []
    feed(e, 7, 95)
    changes = e.drain()
    assert [t.kind for t in changes.transitions] == [TransitionKind.FIRING]
    assert [n.status.value for n in changes.notifications] == ["firing"]
    assert next(iter(changes.series.values())) is not None


def test_a_restored_series_skips_replayed_samples_and_fires_once_from_its_old_timer() -> None:
    first = engine()
    feed(first, 0, 95)
    persisted = {k: v for k, v in first.drain().series.items() if v is not None}
    second = engine()
    second.restore(series=persisted, nodes={}, events={}, groups={}, now=at(1))
    feed(second, 0, 40)  # replayed from before the restart: already applied
    assert kinds(second) == []
    second.tick(now=at(2))
    assert kinds(second) == []  # its next sample is waited for (promote_grace)
    second.tick(now=at(4))
    assert kinds(second) == [("MemHigh", TransitionKind.FIRING)]  # none came: its last one stands
    feed(second, 4.5, 95)
    assert kinds(second) == []


def test_a_fault_signal_fires_once_and_resolves_after_its_ttl() -> None:
    e = engine()
    signal = fault_signal(kind="xid", node="n1", gpu="GPU-1", xid=48, at=at(0), evidence={})
    e.signal(signal, now=at(0))
    e.signal(signal, now=at(1))
    assert kinds(e) == [("GpuFault", TransitionKind.FIRING)]
    e.tick(now=at(302))
    assert kinds(e) == [("GpuFault", TransitionKind.RESOLVED)]


def test_a_lost_gpu_fires_gpu_lost_and_its_next_sample_resolves_it() -> None:
    e = engine()
    feed(e, 0, 40)
    e.drain()
    e.signal(fault_signal(kind="lost", node="n1", gpu="GPU-1", xid=None, at=at(1), evidence={}), now=at(1))
    assert kinds(e) == [("GpuLost", TransitionKind.FIRING)]
    feed(e, 2, 40)
    assert kinds(e) == [("GpuLost", TransitionKind.RESOLVED)]


def feed_batch(e: Engine, second: float, pcts: dict[str, float]) -> None:
    samples = [
        Sample(labels={**LABELS, "gpu": gpu}, values={"fb_used_pct": pct, "xid_count": 0.0, "gpu_lost": 0.0})
        for gpu, pct in pcts.items()
    ]
    e.observe(node="n1", at=at(second), samples=samples, now=at(second))
    e.flush(now=at(second))


def test_a_series_missing_from_its_nodes_next_batch_resolves_at_once() -> None:
    e = engine()
    for second in (0, 1, 2):
        feed_batch(e, second, {"GPU-1": 95, "GPU-2": 95})
    assert kinds(e).count(("MemHigh", TransitionKind.FIRING)) == 2
    feed_batch(e, 3, {"GPU-2": 95})  # GPU-1 left the batch: a staleness marker, not 5 minutes of firing
    changes = e.drain()
    assert [(t.alert.labels["gpu"], t.kind) for t in changes.transitions] == [
        ("GPU-1", TransitionKind.RESOLVED)
    ]
    assert changes.transitions[0].alert.ends_at == at(3)


def test_a_series_that_left_its_batch_keeps_firing_through_its_hold() -> None:
    e = engine()
    held = RULE.model_copy(update={"keep_firing_for": timedelta(seconds=10)})
    e.configure(rules=(held,), tree=TREE, silences=(), now=at(0))
    for second in (0, 1, 2):
        feed_batch(e, second, {"GPU-1": 95, "GPU-2": 40})
    assert kinds(e) == [("MemHigh", TransitionKind.PENDING), ("MemHigh", TransitionKind.FIRING)]
    feed_batch(e, 3, {"GPU-2": 40})
    e.tick(now=at(12.9))
    assert kinds(e) == []  # held since 3 for 10 s, and the grace
    e.tick(now=at(15))
    assert kinds(e) == [("MemHigh", TransitionKind.RESOLVED)]


def test_a_gpu_lost_signal_is_no_batch_and_stales_no_other_gpu() -> None:
    e = engine()
    for second in (0, 1, 2):
        feed_batch(e, second, {"GPU-1": 95, "GPU-2": 40})
    e.drain()
    lost = fault_signal(kind="lost", node="n1", gpu="GPU-2", xid=None, at=at(2.5), evidence={})
    e.signal(lost, now=at(2.5))
    e.flush(now=at(2.5))
    assert kinds(e) == [("GpuLost", TransitionKind.FIRING)]  # MemHigh on GPU-1 still firing
