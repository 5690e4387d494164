"""Benchmark of the scheduler's placement core: 10,000 GPUs, 10,000 queued workloads, one pass.

Run from the repo root: python bench/scheduler_placement.py. Prints one JSON object per result line.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.scheduler.domain.cluster import Allocation, ClusterState, GpuView, MigPartition, slots_of
from services.scheduler.domain.model import (
    GangPolicy,
    GpuRequest,
    MigRequest,
    UnitsRequest,
    Workload,
    WorkloadKind,
)
from services.scheduler.domain.schedule import QueueEntry, schedule

TARGET_PER_S = 1000.0
NOW = datetime(2026, 1, 1, tzinfo=UTC)
# model, memory GB, compute units (1 unit = 1/8 A100), share of nodes
MODELS = [("A100", 80, 8.0, 0.4), ("H100", 80, 16.0, 0.2), ("L4", 24, 2.0, 0.25), ("T4", 16, 1.0, 0.15)]
ZONES = ("a", "b", "c")


def _gpu(
    rng: random.Random, node: str, i: int, model: tuple[str, int, float, float], labels: dict[str, str]
) -> GpuView:
    name, mem, units, _ = model
    uuid = f"GPU-{node}-{i}"
    if name == "A100" and rng.random() < 0.25:
        parts = tuple(MigPartition(f"mig-{j}", "1g.10gb", 1.0) for j in range(7))
        return GpuView(uuid, node, name, mem, units, labels=labels, partitions=parts)
    ratio = 4 if name == "T4" else 1
    return GpuView(uuid, node, name, mem, units, labels=labels, timeslice_ratio=ratio)


def build_gpus(rng: random.Random, count: int) -> tuple[GpuView, ...]:
    """`count` GPUs, eight per node, mixed models, some MIG and time-sliced."""
    gpus: list[GpuView] = []
    weights = [m[3] for m in MODELS]
    for n in range(count // 8):
        model = rng.choices(MODELS, weights)[0]
        labels = {"zone": rng.choice(ZONES), "region": "eu", "pool": "default"}
        gpus.extend(_gpu(rng, f"node-{n}", i, model, labels) for i in range(8))
    return tuple(gpus)


def busy_allocations(rng: random.Random, gpus: tuple[GpuView, ...], share: float) -> tuple[Allocation, ...]:
    """Running work holding about `share` of all slots, each with an expected end."""
    allocs: list[Allocation] = []
    for gpu in gpus:
        for _stype, grant in slots_of(gpu):
            if rng.random() < share:
                ends = NOW + timedelta(minutes=rng.randint(5, 600))
                n = len(allocs)
                spot = rng.random() < 0.3
                allocs.append(Allocation(f"run-{n}", f"t{n % 20}", (grant,), rng.random(), spot, ends))
    return tuple(allocs)


def _resources(rng: random.Random) -> GpuRequest | MigRequest | UnitsRequest:
    roll = rng.random()
    if roll < 0.55:
        model = rng.choices(MODELS, [m[3] for m in MODELS])[0][0]
        return GpuRequest(model=model, count=rng.choice((1, 1, 1, 1, 2, 4, 8)))
    if roll < 0.7:
        return MigRequest(profile="1g.10gb")
    return UnitsRequest(units=rng.choice((0.25, 1.0, 2.0, 4.0, 8.0, 16.0)))


def build_queue(rng: random.Random, count: int) -> list[QueueEntry]:
    """`count` queued workloads of mixed shapes, tenants and priorities."""
    queue = []
    for i in range(count):
        w = Workload(
            id=f"w-{i}",
            tenant=f"t{i % 20}",
            kind=WorkloadKind.JOB,
            image="pytorch:2.3",
            resources=_resources(rng),
            urgency=rng.random(),
            submitted_at=NOW - timedelta(seconds=i),
            preemptible=rng.random() < 0.3,
            time_limit=timedelta(minutes=rng.randint(10, 480)),
            gang=GangPolicy.ALL_OR_NOTHING if rng.random() < 0.05 else GangPolicy.SAME_NODE,
            constraints={"zone": rng.choice(ZONES)} if rng.random() < 0.1 else {},
        )
        queue.append(QueueEntry(workload=w, priority=rng.random()))
    return queue


def _line(metric: str, value: float, unit: str) -> str:
    return json.dumps(
        {"bench": "scheduler.placement", "metric": metric, "value": round(value, 3), "unit": unit}
    )


def main() -> None:
    """Build the fleet and queue, time one full pass (index build included) and print the results."""
    rng = random.Random(42)
    gpus = build_gpus(rng, 10_000)
    state = ClusterState(gpus=gpus, allocations=busy_allocations(rng, gpus, 0.3))
    queue = build_queue(rng, 10_000)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        decisions = schedule(queue, state, now=NOW)
        best = min(best, time.perf_counter() - started)
    decided = len(decisions.placements) + len(decisions.waiting)
    print(_line("gpus", len(gpus), "count"))
    print(_line("queued_workloads", len(queue), "count"))
    print(_line("pass_seconds", best, "s"))
    print(_line("decisions_per_s", decided / best, "1/s"))
    print(_line("placements", len(decisions.placements), "count"))
    print(_line("placements_per_s", len(decisions.placements) / best, "1/s"))
    print(_line("preemption_proposals", len(decisions.preemptions), "count"))
    print(_line("decisions_per_s_vs_target", decided / best / TARGET_PER_S, "ratio"))


if __name__ == "__main__":
    main()
