"""The aggregator's own Prometheus metrics (definitions only)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "FAULTS_DETECTED",
    "INGEST_BATCH_SECONDS",
    "OPEN_WINDOWS",
    "ROLLUPS_WRITTEN",
    "SAMPLES_INGESTED",
    "SAMPLE_STAGE_SECONDS",
    "SAMPLE_TO_REDIS_SECONDS",
]

SAMPLES_INGESTED = Counter("telemetry_samples_ingested_total", "GPU samples written to live state")
SAMPLE_TO_REDIS_SECONDS = Histogram(
    "telemetry_sample_to_redis_seconds",
    "From the agent's sampling instant to the sample being in Redis",
    buckets=(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0),
)
#: telemetry_sample_to_redis_seconds split where it is spent, per node batch: "agent" from the sampling
#: instant to the batch's record in a producer batch (its Kafka create time), "transit" from there to
#: the aggregator's poll returning it (producer, broker, fetch wait, consumer buffer), "aggregator"
#: from that poll to the batch being in Redis.
SAMPLE_STAGE_SECONDS = Histogram(
    "telemetry_sample_stage_seconds",
    "Where a sample's time to Redis goes: agent, transit (producer/broker/fetch) or aggregator",
    ["stage"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0),
)
INGEST_BATCH_SECONDS = Histogram("telemetry_ingest_batch_seconds", "Time to ingest one poll of samples")
ROLLUPS_WRITTEN = Counter("telemetry_rollups_written_total", "GPU rollup windows written")
FAULTS_DETECTED = Counter("telemetry_faults_detected_total", "Faults detected from samples", ["kind"])
OPEN_WINDOWS = Gauge("telemetry_rollup_open_windows", "Rollup windows still collecting")
