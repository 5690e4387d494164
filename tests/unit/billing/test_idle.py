from datetime import timedelta

from services.billing.domain.idle import IdleAction, IdlePolicy, IdleState, UtilisationRollup, evaluate_idle
from tests.unit.billing.factories import T0, minutes

# A short policy keeps the rollup lists small; the rules are the same as for 72 h / 24 h.
POLICY = IdlePolicy(idle_after=timedelta(hours=1), grace=timedelta(minutes=30))


def _rollups(start_minute: int, count: int, util: float = 1.0) -> list[UtilisationRollup]:
    return [
        UtilisationRollup(start=T0 + minutes(m), end=T0 + minutes(m + 1), max_gpu_util_pct=util)
        for m in range(start_minute, start_minute + count)
    ]


def test_defaults_are_five_percent_72_hours_and_24_hours_grace() -> None:
    policy = IdlePolicy()

    assert (policy.threshold_pct, policy.idle_after, policy.grace) == (
        5.0,
        timedelta(hours=72),
        timedelta(hours=24),
    )


def test_instance_idle_for_the_whole_window_gets_one_warning() -> None:
    warned = evaluate_idle(state=IdleState(), rollups=_rollups(0, 60), policy=POLICY, now=T0 + minutes(60))
    again = evaluate_idle(state=warned.state, rollups=_rollups(60, 1), policy=POLICY, now=T0 + minutes(61))

    assert warned.actions == (IdleAction.WARN,)
    assert warned.state.warned_at == T0 + minutes(60)
    assert again.actions == ()


def test_not_yet_idle_long_enough_means_no_action() -> None:
    decision = evaluate_idle(state=IdleState(), rollups=_rollups(0, 59), policy=POLICY, now=T0 + minutes(59))

    assert decision.actions == ()
    assert decision.state.idle_since == T0


def test_release_is_requested_after_the_grace_period_if_still_idle() -> None:
    warned = evaluate_idle(state=IdleState(), rollups=_rollups(0, 60), policy=POLICY, now=T0 + minutes(60))

    early = evaluate_idle(state=warned.state, rollups=_rollups(60, 29), policy=POLICY, now=T0 + minutes(89))
    due = evaluate_idle(state=early.state, rollups=_rollups(89, 1), policy=POLICY, now=T0 + minutes(90))

    assert early.actions == ()
    assert due.actions == (IdleAction.RELEASE,)
    assert due.state.release_requested_at == T0 + minutes(90)


def test_any_activity_resets_the_idle_clock_and_the_warning() -> None:
    warned = evaluate_idle(state=IdleState(), rollups=_rollups(0, 60), policy=POLICY, now=T0 + minutes(60))
    busy = _rollups(60, 1, util=40.0)

    after = evaluate_idle(
        state=warned.state, rollups=[*busy, *_rollups(61, 40)], policy=POLICY, now=T0 + minutes(101)
    )

    assert after.actions == ()
    assert after.state.warned_at is None
    assert after.state.idle_since == T0 + minutes(61)


def test_a_telemetry_gap_restarts_the_idle_clock_instead_of_counting_as_idle() -> None:
    decision = evaluate_idle(
        state=IdleState(), rollups=[*_rollups(0, 30), *_rollups(40, 30)], policy=POLICY, now=T0 + minutes(70)
    )

    assert decision.actions == ()
    assert decision.state.idle_since == T0 + minutes(40)


def test_redelivered_rollups_change_nothing() -> None:
    once = evaluate_idle(state=IdleState(), rollups=_rollups(0, 30), policy=POLICY, now=T0 + minutes(30))
    twice = evaluate_idle(state=once.state, rollups=_rollups(0, 30), policy=POLICY, now=T0 + minutes(30))

    assert twice.state == once.state
