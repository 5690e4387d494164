"""The targets the issues set, keyed by (bench, metric), so the report can compare each figure."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TARGETS", "Target", "verdict"]


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


TARGETS: dict[tuple[str, str], Target] = {
    ("bus.outbox_to_consumer", "duplicates_applied"): Target(0, False, "exactly-once application"),
    ("scheduler.placement", "decisions_per_s"): Target(1000, True, "issue 4; Slurm sustains 500 jobs/s"),
    ("scheduler.e2e", "submit_to_placed_p99"): Target(50, False, "issue 4, ms at 100 submissions/s"),
    ("telemetry.fleet", "sample_to_redis_p99"): Target(1000, False, "issue 5, ms"),
    ("alerting.eval", "cross_to_webhook_p99_beyond_for"): Target(1000, False, "issue 6, ms"),
    ("billing.ledger", "postings_per_s"): Target(10000, True, "issue 7"),
    ("billing.export", "seconds"): Target(10, False, "issue 7, 1,000,000 rows"),
    ("billing.export", "peak_memory_mb"): Target(300, False, "issue 7"),
    ("recovery.sim", "recovered_within_60s_pct"): Target(99, True, "issue 8, recoverable faults"),
    ("recovery.sim", "workloads_lost"): Target(0, False, "issue 8"),
}
