from __future__ import annotations

from datetime import timedelta

import pytest

from services.alerting.domain.alert_lifecycle import EvaluationConfig, Phase, TransitionKind
from services.alerting.domain.matchers import Matcher, MatchOp
from services.alerting.domain.rules import DEFAULT_RULES, Comparator, Rule
from services.alerting.domain.series_evaluation import Sample, SeriesState, evaluate, retire_rule, tick
from tests.unit.alerting.clock import at

MEMORY = next(r for r in DEFAULT_RULES if r.name == "GpuMemoryHigh")
XID = next(r for r in DEFAULT_RULES if r.name == "GpuFatalXid")
POWER = next(r for r in DEFAULT_RULES if r.name == "GpuPowerCapped")
CONFIG = EvaluationConfig()


def run(
    rule: Rule, labels: dict[str, str], values: list[float], *, field: str | None = None, start: float = 0
) -> tuple[SeriesState | None, list[tuple[int | float, TransitionKind]]]:
    """Feed one sample per second and collect (second, transition kind)."""
    # `int | float`, not `float`: mypy narrows `seen[-1] == (301, ...)` on a plain float to unreachable.
    state: SeriesState | None = None
    seen: list[tuple[int | float, TransitionKind]] = []
    for i, value in enumerate(values):
        sample = Sample(labels=labels, values={field or rule.metric: value})
        step = evaluate(state=state, sample=sample, rules=[rule], now=at(start + i))
        state = step.state
        seen += [(start + i, t.kind) for t in step.transitions]
    return state, seen


def test_memory_rule_is_pending_one_second_before_for_and_firing_at_for(gpu_labels: dict[str, str]) -> None:
    state, seen = run(MEMORY, gpu_labels, [95.0] * 301)
    assert seen == [(0, TransitionKind.PENDING), (300, TransitionKind.FIRING)]
    assert state is not None
    assert state.alerts["GpuMemoryHigh"].fired_at == at(300)


def test_a_tick_fires_a_silent_pending_alert_after_the_grace_dated_at_for(gpu_labels: dict[str, str]) -> None:
    state, _ = run(MEMORY, gpu_labels, [95.0] * 11)
    assert state is not None
    at_for = tick(state=state, rules=[MEMORY], now=at(300), config=CONFIG)
    assert at_for.transitions == ()  # a sample at 300 may still be on its way
    early = tick(state=state, rules=[MEMORY], now=at(300.099), config=CONFIG)
    assert early.transitions == ()
    due = tick(state=state, rules=[MEMORY], now=at(300.1), config=CONFIG)  # promote_grace: 100 ms
    assert [t.kind for t in due.transitions] == [TransitionKind.FIRING]
    assert due.transitions[0].alert.starts_at == at(300)


def test_a_late_sample_below_the_threshold_at_for_cancels_instead_of_paging(
    gpu_labels: dict[str, str],
) -> None:
    state, _ = run(MEMORY, gpu_labels, [95.0] * 300)
    assert state is not None
    early = tick(state=state, rules=[MEMORY], now=at(300.09), config=CONFIG)  # the sample at 300 is late
    assert early.transitions == ()
    assert early.state is not None
    late = Sample(labels=gpu_labels, values={"fb_used_pct": 80.0})
    step = evaluate(state=early.state, sample=late, rules=[MEMORY], now=at(300))
    assert [t.kind for t in step.transitions] == [TransitionKind.CANCELLED]


def test_a_deadline_just_after_the_last_sample_fires_at_once_with_no_grace(
    gpu_labels: dict[str, str],
) -> None:
    # A breach at 0, then samples a second apart stamped 10 ms early (clock jitter): the last before
    # `for` is at 299.99, the next ~300.99, so no sample can still cancel it at 300: it fires at the
    # deadline, not a grace later.
    state: SeriesState | None = None
    for stamp in [0.0, *(i - 0.01 for i in range(1, 301))]:
        sample = Sample(labels=gpu_labels, values={"fb_used_pct": 95.0})
        state = evaluate(state=state, sample=sample, rules=[MEMORY], now=at(stamp)).state
    assert state is not None
    early = tick(state=state, rules=[MEMORY], now=at(299.999), config=CONFIG)
    assert early.transitions == ()
    due = tick(state=state, rules=[MEMORY], now=at(300), config=CONFIG)
    assert [(t.kind, t.alert.starts_at) for t in due.transitions] == [(TransitionKind.FIRING, at(300))]


def test_condition_breaking_before_for_cancels_the_pending_alert(gpu_labels: dict[str, str]) -> None:
    state, seen = run(MEMORY, gpu_labels, [95.0] * 299 + [80.0] + [95.0])
    assert seen == [
        (0, TransitionKind.PENDING),
        (299, TransitionKind.CANCELLED),
        (300, TransitionKind.PENDING),
    ]
    assert state is not None
    assert state.alerts["GpuMemoryHigh"].active_at == at(300)


def test_firing_alert_resolves_on_first_sample_below_threshold(gpu_labels: dict[str, str]) -> None:
    state, seen = run(MEMORY, gpu_labels, [95.0] * 301 + [50.0])
    assert seen[-1] == (301, TransitionKind.RESOLVED)
    assert state is not None
    assert state.alerts == {}


def test_resolved_transition_carries_start_and_end(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"for_duration": timedelta(0)})
    state, _ = run(rule, gpu_labels, [95.0])
    step = evaluate(
        state=state, sample=Sample(labels=gpu_labels, values={"fb_used_pct": 1.0}), rules=[rule], now=at(7)
    )
    alert = step.transitions[0].alert
    assert (alert.starts_at, alert.ends_at, alert.status.value) == (at(0), at(7), "resolved")
    assert alert.labels["alertname"] == "GpuMemoryHigh"
    assert alert.labels["gpu"] == "GPU-1"


def test_keep_firing_for_holds_the_alert_after_the_condition_clears(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"for_duration": timedelta(0), "keep_firing_for": timedelta(seconds=10)})
    state, seen = run(rule, gpu_labels, [95.0] + [50.0] * 11)
    assert seen == [(0, TransitionKind.FIRING), (11, TransitionKind.RESOLVED)]
    assert state is not None


def test_keep_firing_for_restarts_when_the_condition_returns(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"for_duration": timedelta(0), "keep_firing_for": timedelta(seconds=10)})
    state, seen = run(rule, gpu_labels, [95.0] + [50.0] * 9 + [95.0] + [50.0] * 10)
    assert seen == [(0, TransitionKind.FIRING)]
    assert state is not None
    assert state.alerts["GpuMemoryHigh"].keep_firing_since == at(11)


def test_keep_firing_for_expires_on_tick_without_samples(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"for_duration": timedelta(0), "keep_firing_for": timedelta(seconds=10)})
    state, _ = run(rule, gpu_labels, [95.0, 50.0])
    assert state is not None
    assert tick(state=state, rules=[rule], now=at(12.9), config=CONFIG).transitions == ()
    assert [t.kind for t in tick(state=state, rules=[rule], now=at(13), config=CONFIG).transitions] == [
        TransitionKind.RESOLVED
    ]


def test_a_tick_does_not_cut_the_hold_of_a_series_still_sending(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"for_duration": timedelta(0), "keep_firing_for": timedelta(seconds=10)})
    state, _ = run(rule, gpu_labels, [95.0] + [50.0] * 10)  # in its hold since 1, last sample at 10
    assert state is not None
    ticked = tick(state=state, rules=[rule], now=at(11.1), config=CONFIG)  # the sample at 11 is late
    assert ticked.transitions == ()
    assert ticked.state is not None
    back = Sample(labels=gpu_labels, values={"fb_used_pct": 95.0})
    step = evaluate(state=ticked.state, sample=back, rules=[rule], now=at(11))
    assert step.transitions == ()  # the dip was covered: still firing, never resolved
    assert step.state is not None
    assert step.state.alerts["GpuMemoryHigh"].keep_firing_since is None


def test_a_silent_firing_series_keeps_its_hold_past_staleness(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"keep_firing_for": timedelta(seconds=60)})
    state, seen = run(rule, gpu_labels, [95.0] * 301)
    assert seen[-1] == (300, TransitionKind.FIRING)
    assert state is not None
    stale = tick(state=state, rules=[rule], now=at(600), config=CONFIG)  # silent for the lookback
    assert stale.transitions == ()
    assert stale.state is not None
    assert stale.state.alerts["GpuMemoryHigh"].keep_firing_since == at(600)
    held = tick(state=stale.state, rules=[rule], now=at(659.9), config=CONFIG)
    assert held.transitions == ()
    assert held.state is not None
    ended = tick(state=held.state, rules=[rule], now=at(662), config=CONFIG)
    assert [t.kind for t in ended.transitions] == [TransitionKind.RESOLVED]


def test_a_resolved_alert_never_ends_before_it_started(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"for_duration": timedelta(0)})
    state, _ = run(rule, gpu_labels, [95.0], start=100)  # stamped by an agent whose clock runs ahead
    assert state is not None
    step = retire_rule(state=state, rule=rule, now=at(99.5))
    (ended,) = step.transitions
    assert ended.alert.ends_at == ended.alert.starts_at == at(100)


def test_series_that_stops_reporting_resolves_after_the_staleness_window(gpu_labels: dict[str, str]) -> None:
    state, _ = run(MEMORY, gpu_labels, [95.0] * 301)
    assert state is not None
    still = tick(state=state, rules=[MEMORY], now=at(300 + 299), config=CONFIG)
    assert still.state is not None
    assert still.transitions == ()
    stale = tick(state=state, rules=[MEMORY], now=at(300 + 300), config=CONFIG)
    assert stale.state is None
    assert [t.kind for t in stale.transitions] == [TransitionKind.RESOLVED]


def test_staleness_window_is_configurable(gpu_labels: dict[str, str]) -> None:
    state, _ = run(MEMORY, gpu_labels, [95.0])
    assert state is not None
    step = tick(
        state=state, rules=[MEMORY], now=at(30), config=EvaluationConfig(staleness=timedelta(seconds=30))
    )
    assert [t.kind for t in step.transitions] == [TransitionKind.CANCELLED]


def test_rule_scope_excludes_other_nodes(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"matchers": (Matcher(name="node", op=MatchOp.RE, value="node-b.*"),)})
    state, seen = run(rule, gpu_labels, [99.0] * 400)
    assert seen == []
    assert state is not None
    assert state.alerts == {}


def test_tenant_rule_never_sees_another_tenants_series(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"owner_tenant": "globex", "for_duration": timedelta(0)})
    _, seen = run(rule, gpu_labels, [99.0])
    _, own = run(rule, {**gpu_labels, "tenant": "globex"}, [99.0])
    assert seen == []
    assert own == [(0, TransitionKind.FIRING)]


def test_sample_without_the_metric_leaves_the_alert_untouched(gpu_labels: dict[str, str]) -> None:
    state, _ = run(MEMORY, gpu_labels, [95.0])
    step = evaluate(
        state=state, sample=Sample(labels=gpu_labels, values={"gpu_temp_c": 40}), rules=[MEMORY], now=at(1)
    )
    assert step.state is not None
    assert step.state.alerts["GpuMemoryHigh"].phase is Phase.PENDING
    assert step.transitions == ()


def test_xid_rule_fires_on_counter_increase_not_on_its_level(gpu_labels: dict[str, str]) -> None:
    state, seen = run(XID, gpu_labels, [3.0, 3.0, 3.0, 4.0])
    assert seen == [(3, TransitionKind.FIRING)]
    assert state is not None
    assert state.alerts["GpuFatalXid"].value == 1.0


def test_xid_alert_resolves_once_the_increase_leaves_its_window(gpu_labels: dict[str, str]) -> None:
    _, seen = run(XID, gpu_labels, [0.0, 1.0] + [1.0] * 300)
    assert seen == [(1, TransitionKind.FIRING), (301, TransitionKind.RESOLVED)]


def test_counter_reset_counts_as_an_increase_not_a_drop(gpu_labels: dict[str, str]) -> None:
    _, seen = run(XID, gpu_labels, [5.0, 0.0, 0.0, 2.0])
    assert seen == [(3, TransitionKind.FIRING)]


def test_power_cap_rule_reads_only_its_throttle_bit(gpu_labels: dict[str, str]) -> None:
    _, other_bits = run(POWER, gpu_labels, [float(0x8 | 0x1)] * 700)
    _, capped = run(POWER, gpu_labels, [float(0x4 | 0x1)] * 601)
    assert other_bits == []
    assert capped == [(0, TransitionKind.PENDING), (600, TransitionKind.FIRING)]


def test_retiring_a_rule_resolves_its_firing_alert(gpu_labels: dict[str, str]) -> None:
    rule = MEMORY.model_copy(update={"for_duration": timedelta(0)})
    state, _ = run(rule, gpu_labels, [95.0])
    assert state is not None
    step = retire_rule(state=state, rule=rule, now=at(5))
    assert [t.kind for t in step.transitions] == [TransitionKind.RESOLVED]
    assert step.state is not None
    assert step.state.alerts == {}


def test_state_survives_a_json_round_trip_and_fires_on_time(gpu_labels: dict[str, str]) -> None:
    state, _ = run(MEMORY, gpu_labels, [95.0] * 100)
    assert state is not None
    restored = SeriesState.model_validate_json(state.model_dump_json())
    assert restored == state
    assert tick(state=restored, rules=[MEMORY], now=at(300), config=CONFIG).transitions == ()
    assert [t.kind for t in tick(state=restored, rules=[MEMORY], now=at(302), config=CONFIG).transitions] == [
        TransitionKind.FIRING
    ]


def test_a_stale_pending_alert_is_cancelled_rather_than_fired(gpu_labels: dict[str, str]) -> None:
    state, _ = run(MEMORY, gpu_labels, [95.0])
    assert state is not None
    step = tick(state=state, rules=[MEMORY], now=at(300), config=CONFIG)
    assert [t.kind for t in step.transitions] == [TransitionKind.CANCELLED]


@pytest.mark.parametrize(
    ("comparator", "value", "holds"),
    [(">", 90.0, False), (">=", 90.0, True), ("<", 89.0, True), ("<=", 91.0, False), ("==", 90.0, True),
     ("!=", 90.0, False)],
)  # fmt: skip
def test_comparators_follow_promql(comparator: str, value: float, holds: bool) -> None:
    assert Comparator(comparator).holds(value, 90.0) is holds
