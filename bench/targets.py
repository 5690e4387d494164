"""The targets the issues set, keyed by (bench, metric), so the report can compare each figure."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TARGETS", "Target", "score", "verdict"]


@dataclass(frozen=True)
class Target:
    """A bound on a figure: at least (higher is better) or at most (lower is better)."""

    value: float
    at_least: bool
    source: str

    def describe(self) -> str:
        return f"{'≥' if self.at_least else '≤'} {self.value:g} ({self.source})"


def verdict(target: Target, value: object) -> str:
    if not isinstance(value, int | float):
        return "?"
    met = value >= target.value if target.at_least else value <= target.value
    return "met" if met else "MISSED"


def score(target: Target, value: float) -> float:
    """The figure as a percentage of its target, higher is better, capped at 300."""
    if target.at_least:
        pct = 100.0 * value / target.value if target.value else 300.0
    elif target.value == 0:
        pct = 100.0 if value == 0 else 0.0
    else:
        pct = 100.0 * target.value / value if value else 300.0
    return min(pct, 300.0)


RECOVERY = "recovery.sim (recovery service with stand-in responders)"
RECOVERY_SLO = "recovery.slo (real-scale phases, virtual time, nothing scaled)"
RUNNER = "runner.start (real agent loop, broker, supervisors)"

TARGETS: dict[tuple[str, str], Target] = {
    ("bus.outbox_to_consumer", "duplicates_applied"): Target(0, False, "exactly-once application"),
    ("scheduler.placement", "decisions_per_s"): Target(1000, True, "issue 4; Slurm sustains 500 jobs/s"),
    ("scheduler.e2e", "submit_to_placed_p99_ms"): Target(50, False, "issue 4, ms at 100 submissions/s"),
    ("scheduler.http", "accepted_per_s"): Target(1000, True, "issue 24, 32 in flight, 10,000 GPUs"),
    ("scheduler.array", "accepted_jobs_per_s"): Target(10000, True, "issue 24, one 10,000-job array"),
    ("scheduler.array", "submit_to_all_placed_s"): Target(3, False, "issue 24, 10,000 jobs on 10,000 GPUs"),
    ("scheduler.backlog", "registered_to_all_placed_s"): Target(
        2, False, "issue 24, 10,000 queued jobs, capacity for all appearing at once"
    ),
    ("scheduler.backlog", "placed_per_s_vs_slurm"): Target(20, True, "issue 24, Slurm's 240 jobs/s"),
    ("soak", "p99_last_over_first_tenth"): Target(1.2, False, "issue 24, submit-to-placed p99 drift"),
    ("soak", "rss_last_over_first_tenth_broker"): Target(1.2, False, "issue 24, memory flat"),
    ("soak", "postgres_connections_peak"): Target(75, False, "README.md's budget at the defaults"),
    # The fleet (10,000 GPUs unless --gpus says otherwise; the report shows fleet_gpus) offers exactly one
    # sample per GPU a second, so the measured rate falls on either side of 10,000 by where the window cuts
    # the ticks. Held instead: the window no more than one tick short of the fleet's samples, and the
    # consumer's backlog growing by no more than one tick of batches over the run.
    ("telemetry_fleet", "samples_short_of_fleet_ticks"): Target(1, False, "issue 5, 10,000 GPUs at 1 Hz"),
    ("telemetry_fleet", "consumer_lag_growth_ticks"): Target(1, False, "issue 5, keeps up"),
    ("telemetry_fleet", "sample_to_redis_p99"): Target(1, False, "issue 5, seconds"),
    # The 1 Hz stream offers exactly 10,000 samples/s, so its evaluated rate can only reach the target by a
    # hair (the drain is inside its window); the target is held against the rate through a backlog.
    ("alerting.eval", "backlog_samples_per_s"): Target(10000, True, "issue 6, 10,000 GPUs at 1 Hz"),
    ("alerting.eval", "cross_to_webhook_p99_beyond_for"): Target(1000, False, "issue 6, ms beyond `for`"),
    ("billing.ledger", "postings_per_s"): Target(10000, True, "issue 7"),
    ("billing.export", "seconds"): Target(10, False, "issue 7, 1,000,000 rows"),
    ("billing.export", "peak_memory_mb"): Target(300, False, "issue 7, 1,000,000 rows"),
    # At real scale (part one of recovery_sim.py): detection to running again, incidents with a workload.
    (RECOVERY_SLO, "share_within_60s"): Target(0.99, True, "issue 8"),
    (RECOVERY_SLO, "share_within_3m"): Target(0.92, True, "issue 22: the article's 92% within 3 min"),
    (RECOVERY, "workloads_lost"): Target(0, False, "issue 8"),
    (RUNNER, "consumed_to_running_p99_ms"): Target(100, False, "issue 18, the process runner"),
    (RUNNER, "concurrent_exits_lost"): Target(0, False, "issue 18, 500 workloads on one agent"),
    (RUNNER, "concurrent_exits_duplicated"): Target(0, False, "issue 18, 500 workloads on one agent"),
    (RUNNER, "concurrent_slow_ticks"): Target(0, False, "issue 18, 500 workloads on one agent"),
    ("console", "first_load_js_gzip"): Target(300, False, "issue 19, KiB of JS gzipped"),
    ("console", "live_update_main_thread_p99"): Target(10, False, "issue 19, ms per update, 64 GPUs at 1 Hz"),
}
