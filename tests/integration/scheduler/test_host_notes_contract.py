"""The host's notes on a run's start, kept with its other host facts: the fake store and Postgres alike."""

from __future__ import annotations

import pytest

from services.scheduler.domain.stored import RunExit, RunHost
from tests.integration.scheduler.test_workload_store_contract import (
    T1,
    T2,
    Subject,
    place,
    subject,
    workload_of,
)

pytestmark = pytest.mark.integration
__all__ = ["subject"]  # the fake-and-Postgres fixture of the workload store's contract, shared

SHARED = "memory not isolated: a time-sliced share without an MPS control daemon on this host"
HOST = RunHost(pid=4242, runner="process", notes=(SHARED, "no CPU or memory limit asked"))


async def test_the_hosts_notes_are_kept_from_the_start_through_the_exit(subject: Subject) -> None:
    await place(subject, "w1", "p1")
    async with subject.units() as store:
        await store.start_run("w1", placement_id="p1", at=T1, host=HOST)
    started = await workload_of(subject, "w1")
    assert started is not None
    assert started.host_notes == [SHARED, "no CPU or memory limit asked"]

    async with subject.units() as store:
        await store.end_run(
            "w1", placement_id="p1", outcome="completed", reason="", at=T2, exit_facts=RunExit("succeeded", 0)
        )
    ended = await workload_of(subject, "w1")
    assert ended is not None
    assert (ended.state, ended.host_notes) == ("completed", [SHARED, "no CPU or memory limit asked"])


async def test_a_new_placement_forgets_the_notes_and_a_start_without_notes_keeps_an_empty_list(
    subject: Subject,
) -> None:
    await place(subject, "w1", "p1")
    async with subject.units() as store:
        await store.start_run("w1", placement_id="p1", at=T1, host=HOST)
        await store.set_state("w1", state="placed", placement_id="p2")
    moved = await workload_of(subject, "w1")
    assert moved is not None
    assert moved.host_notes is None

    async with subject.units() as store:
        await store.start_run("w1", placement_id="p2", at=T2, host=RunHost(pid=7, runner="process"))
    restarted = await workload_of(subject, "w1")
    assert restarted is not None
    assert (restarted.host_pid, restarted.host_notes) == (7, [])
