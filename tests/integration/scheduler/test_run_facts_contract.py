"""The contract of the run spec and the host's run facts: FakeWorkloadStore and WorkloadStore alike."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from services.scheduler.domain.stored import RunExit, RunHost
from tests.integration.scheduler.test_workload_store_contract import (
    T1,
    T2,
    Subject,
    place,
    queued,
    subject,
    workload_of,
    workload_row,
)

pytestmark = pytest.mark.integration
__all__ = ["subject"]  # the fake-and-Postgres fixture of the workload store's contract, shared

RUN: dict[str, Any] = {
    "image": "docker.io/pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
    "command": ["python", "train.py"],
    "args": ["--lr", "0.1"],
    "env": {"WANDB_MODE": "offline"},
    "working_dir": "/workspace",
    "cpu_millis": 4000,
    "memory_bytes": 17179869184,
    "time_limit_s": 3600.0,
    "grace_s": 20.0,
}
HOST = RunHost(pid=4242, container_id=None, runner="process")
FAILED = RunExit(reason="failed", code=3, signal=None)


async def test_a_workloads_run_spec_is_kept_as_submitted_and_absent_from_one_without(
    subject: Subject,
) -> None:
    async with subject.units() as store:
        with_run = await store.submit(row={**workload_row("w1"), "run_spec": RUN}, outbox=[])
        await store.submit(row=workload_row("w2"), outbox=[])

    assert with_run == replace(queued("w1"), run_spec=RUN)
    assert await workload_of(subject, "w1") == replace(queued("w1"), run_spec=RUN)
    assert await workload_of(subject, "w2") == queued("w2")


async def test_the_hosts_process_is_kept_on_start_and_its_exit_on_the_end(subject: Subject) -> None:
    await place(subject, "w1", "p1")

    async with subject.units() as store:
        await store.start_run("w1", placement_id="p1", at=T1, host=HOST)
    started = await workload_of(subject, "w1")
    assert started is not None
    assert (started.host_pid, started.host_container_id, started.host_runner) == (4242, None, "process")
    assert (started.exit_reason, started.exit_code, started.exit_signal) == (None, None, None)

    async with subject.units() as store:
        await store.end_run(
            "w1", placement_id="p1", outcome="failed", reason="exit 3", at=T2, exit_facts=FAILED
        )
    ended = await workload_of(subject, "w1")
    assert ended is not None
    assert (ended.state, ended.host_pid, ended.exit_reason, ended.exit_code) == ("failed", 4242, "failed", 3)


async def test_a_late_exit_completes_a_cancelled_workload_on_its_placement_only(subject: Subject) -> None:
    await place(subject, "w1", "p1")
    cancelled = RunExit(reason="cancelled", code=None, signal=15)
    async with subject.units() as store:
        await store.start_run("w1", placement_id="p1", at=T1, host=HOST)
        running = await store.record_exit("w1", placement_id="p1", exit_facts=cancelled)
        await store.end_placement("p1", outcome="cancelled", at=T2)
        await store.end_workload("w1", state="cancelled", outcome="cancelled", reason="by caller", at=T2)
    async with subject.units() as store:
        elsewhere = await store.record_exit("w1", placement_id="p-old", exit_facts=FAILED)
        unknown = await store.record_exit("w-unknown", placement_id="p1", exit_facts=FAILED)
        kept = await store.record_exit("w1", placement_id="p1", exit_facts=cancelled)

    assert (running, elsewhere, unknown, kept) == (False, False, False, True)
    ended = await workload_of(subject, "w1")
    assert ended is not None
    assert (ended.state, ended.outcome, ended.host_pid) == ("cancelled", "cancelled", 4242)
    assert (ended.exit_reason, ended.exit_code, ended.exit_signal) == ("cancelled", None, 15)


async def test_a_new_placement_forgets_the_last_runs_host_facts_and_the_same_one_keeps_them(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")
    async with subject.units() as store:
        await store.start_run("w1", placement_id="p1", at=T1, host=HOST)
        await store.start_migration("w1", priority=0.75, avoid_gpu="g1")
        await store.set_state("w1", state="migrating", placement_id="p1")
    still = await workload_of(subject, "w1")
    assert still is not None
    assert (still.host_pid, still.host_runner) == (4242, "process")

    async with subject.units() as store:
        await store.set_state("w1", state="placed", placement_id="p2", priority=0.75)
    moved = await workload_of(subject, "w1")
    assert moved is not None
    assert (moved.placement_id, moved.host_pid, moved.host_runner) == ("p2", None, None)
