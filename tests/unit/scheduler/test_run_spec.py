"""What a workload runs: the request's run fields validated, the image resolved, kept, placed and reported."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from libs.common.events.agent import WorkloadExitedV1, WorkloadStartedV1
from libs.common.events.scheduler import RunSpec
from libs.common.testing import handler_context
from services.scheduler.adapters.catalog_loader import load_catalog, load_default_catalog
from services.scheduler.adapters.unit_of_work_fake import FakeSchedulerUnitOfWork
from services.scheduler.api.schemas import WorkloadOut
from services.scheduler.domain.creation import parse_spec, run_of
from services.scheduler.domain.errors import ValidationError
from services.scheduler.domain.model import Workload
from services.scheduler.domain.run import RunRequest
from services.scheduler.domain.stored import StoredWorkload, WaitingWorkload
from services.scheduler.service.cancellation import cancel
from services.scheduler.service.handlers import SchedulerDeps, on_workload_exited, on_workload_started
from services.scheduler.service.pass_inputs import PassCache
from tests.unit.scheduler.test_run_handlers import placed

CATALOG = load_default_catalog()
T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
DEPS = SchedulerDeps(half_life=timedelta(days=7))
#: The placement ``placed`` makes, as the agent names it.
IDS: Any = {"workload_id": "w1", "tenant_id": "acme", "placement_id": "p1", "node": "n1"}
NETWORK = {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"}
BASE: dict[str, Any] = {
    "kind": "job",
    "image": {"name": "pytorch", "version": "2.4"},
    "resources": {"kind": "gpu", "model": "A100", "count": 1},
    "network": NETWORK,
}
RUN: dict[str, Any] = {
    "command": ["python", "train.py"],
    "args": ["--lr", "0.1", "--note", "tab\tand\nnewline"],
    "env": {"WANDB_MODE": "offline", "_X1": ""},
    "working_dir": "/workspace",
    "cpu_millis": 2500,
    "memory_bytes": 8 * 1024**3,
    "time_limit_s": 600,
    "grace_s": 12.5,
}


def _refused(**fields: Any) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        parse_spec({**BASE, **fields}, catalog=CATALOG)
    return caught.value


def test_a_spec_with_a_run_resolves_its_image_and_keeps_every_field() -> None:
    run = run_of(parse_spec({**BASE, **RUN}, catalog=CATALOG), catalog=CATALOG)

    assert run == RunRequest(
        image="docker.io/pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
        command=("python", "train.py"),
        args=("--lr", "0.1", "--note", "tab\tand\nnewline"),
        env={"WANDB_MODE": "offline", "_X1": ""},
        working_dir="/workspace",
        cpu_millis=2500,
        memory_bytes=8 * 1024**3,
        time_limit_s=600.0,
        grace_s=12.5,
    )


def test_a_spec_without_a_run_still_runs_its_image_with_the_default_grace() -> None:
    run = run_of(parse_spec(BASE, catalog=CATALOG), catalog=CATALOG)
    assert (run.image, run.command, run.env, run.grace_s) == (
        "docker.io/pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
        (),
        {},
        30.0,
    )


def test_the_run_kept_as_json_is_placed_as_the_events_run_spec() -> None:
    run = run_of(parse_spec({**BASE, **RUN}, catalog=CATALOG), catalog=CATALOG)
    stored = StoredWorkload(
        workload_id="w1",
        tenant_id="acme",
        kind="job",
        state="queued",
        spec=parse_spec({**BASE, **RUN}, catalog=CATALOG).model_dump(mode="json"),
        urgency=0.5,
        preemptible=False,
        tags={},
        submitted_at=T0,
        priority=0.5,
        pinned_priority=None,
        avoid_gpus=[],
        wait_reason=None,
        position=None,
        estimated_start=None,
        placement_id=None,
        ended_at=None,
        outcome=None,
        reason="",
        traceparent=None,
        run_spec=run.model_dump(mode="json"),
    )

    workload = _read(stored)

    assert workload.run == run
    assert RunSpec.model_validate(workload.run.model_dump()) == RunSpec(
        image=run.image,
        command=["python", "train.py"],
        args=["--lr", "0.1", "--note", "tab\tand\nnewline"],
        env={"WANDB_MODE": "offline", "_X1": ""},
        working_dir="/workspace",
        cpu_millis=2500,
        memory_bytes=8 * 1024**3,
        time_limit_s=600.0,
        grace_s=12.5,
    )
    assert WorkloadOut.of(stored).run is not None
    assert _read(StoredWorkload(**{**_fields(stored), "run_spec": None})).run is None


def _read(stored: StoredWorkload) -> Workload:
    """The workload as a pass sees it: its request kept once, then found for its waiting row."""
    cache = PassCache()
    cache.keep(stored)
    found = cache.workload(WaitingWorkload.of(stored))
    assert found is not None
    return found


def _fields(stored: StoredWorkload) -> dict[str, Any]:
    return {name: getattr(stored, name) for name in stored.__dataclass_fields__}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"command": "python train.py"}, "command"),
        ({"command": ["python", "a\x00b"]}, "command.1"),
        ({"args": ["ok", "bell\x07"]}, "args.1"),
        ({"args": ["x" * 4097]}, "args.0"),
        ({"args": ["x"] * 257}, "args"),
        ({"command": ["x"] * 200, "args": ["y"] * 57}, "args"),
        ({"command": ["x" * 4000] * 33}, "command"),
        ({"env": {"1ABC": "x"}}, "env.1ABC.[key]"),
        ({"env": {"A-B": "x"}}, "env.A-B.[key]"),
        ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env.CUDA_VISIBLE_DEVICES.[key]"),
        ({"env": {"NVIDIA_VISIBLE_DEVICES": "all"}}, "env.NVIDIA_VISIBLE_DEVICES.[key]"),
        ({"env": {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}}, "env.CUDA_DEVICE_ORDER.[key]"),
        ({"env": {"GPUCLOUD_OUTPUT_DIR": "/out"}}, "env.GPUCLOUD_OUTPUT_DIR.[key]"),
        ({"env": {"OK": "nul\x00"}}, "env.OK"),
        ({"env": {f"V{i}": "x" for i in range(129)}}, "env"),
        ({"env": {f"V{i}": "x" * 4000 for i in range(33)}}, "env"),
        ({"env": {"OK": 1}}, "env.OK"),
        ({"working_dir": "workspace"}, "working_dir"),
        ({"working_dir": "/work\nspace"}, "working_dir"),
        ({"cpu_millis": 5}, "cpu_millis"),
        ({"cpu_millis": 2_000_000}, "cpu_millis"),
        ({"cpu_millis": 1.5}, "cpu_millis"),
        ({"memory_bytes": 1024}, "memory_bytes"),
        ({"memory_bytes": 32 * 1024**4}, "memory_bytes"),
        ({"grace_s": -1}, "grace_s"),
        ({"grace_s": 7200}, "grace_s"),
        ({"runner": "process"}, "runner"),
    ],
)
def test_a_bad_run_field_is_refused_naming_it(fields: dict[str, Any], field: str) -> None:
    assert _refused(**fields).field == field


def test_a_reserved_variable_is_refused_saying_the_platform_sets_it() -> None:
    assert "set by the platform" in _refused(env={"GPUCLOUD_RESTORE_FROM": "/ckpt"}).message


def test_every_catalog_version_resolves_to_an_oci_reference_and_overrides_replace_one(tmp_path: Path) -> None:
    for image in CATALOG.images.values():
        for version in image.versions:
            reference = CATALOG.reference(name=image.name, version=version)
            repository, _, tag = reference.rpartition(":")
            assert "/" in repository, reference
            assert tag, reference

    mirrored = load_catalog(file=None, references={"pytorch:2.4": "registry.local/pytorch:2.4"})
    assert mirrored.reference(name="pytorch", version="2.4") == "registry.local/pytorch:2.4"
    assert mirrored.reference(name="pytorch", version="2.3") == CATALOG.reference(
        name="pytorch", version="2.3"
    )
    with pytest.raises(ValueError, match=r"pytorch:9\.9"):
        load_catalog(file=None, references={"pytorch:9.9": "registry.local/pytorch:9.9"})

    own = tmp_path / "images.yaml"
    own.write_text(
        "images:\n  base:\n    framework: CUDA\n    versions: ['1']\n"
        "    references: {'1': registry.local/base:1}\n",
        encoding="utf-8",
    )
    assert (
        load_catalog(file=own, references={}).reference(name="base", version="1") == "registry.local/base:1"
    )
    own.write_text(
        "images:\n  base:\n    framework: CUDA\n    versions: ['1', '2']\n    references: {'1': a/b:1}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="without one"):
        load_catalog(file=own, references={})


async def test_the_hosts_process_and_exit_are_kept_with_the_workload() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    started = WorkloadStartedV1(**IDS, pid=4242, runner="process", at=T0)
    exited = WorkloadExitedV1(**IDS, outcome="failed", exit_reason="oom_killed", signal=9, at=T0)
    async with uow:
        await on_workload_started(started, handler_context(started, uow=uow, deps=DEPS, time=T0))
        await uow.commit()
    async with uow:
        await on_workload_exited(exited, handler_context(exited, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    shown = WorkloadOut.of(uow.workloads.workloads["w1"])
    assert shown.state == "failed"
    assert shown.host is not None
    assert (shown.host.pid, shown.host.container_id, shown.host.runner) == (4242, None, "process")
    assert shown.exit is not None
    assert (shown.exit.reason, shown.exit.code, shown.exit.signal) == ("oom_killed", None, 9)


async def test_a_cancelled_workloads_late_exit_keeps_the_hosts_facts_and_emits_nothing_more() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    await cancel(uow, "w1", tenant="acme", now=T0)
    emitted = len(uow.events)
    late = WorkloadExitedV1(**IDS, outcome="failed", exit_reason="cancelled", signal=15, at=T0)
    async with uow:
        await on_workload_exited(late, handler_context(late, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    shown = WorkloadOut.of(uow.workloads.workloads["w1"])
    assert (shown.state, shown.outcome) == ("cancelled", "cancelled")
    assert shown.exit is not None
    assert (shown.exit.reason, shown.exit.code, shown.exit.signal) == ("cancelled", None, 15)
    assert len(uow.events) == emitted


async def test_an_exit_report_without_host_facts_leaves_a_cancelled_workloads_view_alone() -> None:
    uow = FakeSchedulerUnitOfWork()
    await placed(uow)
    await cancel(uow, "w1", tenant="acme", now=T0)
    old_agent = WorkloadExitedV1(**IDS, outcome="completed", at=T0)
    async with uow:
        await on_workload_exited(old_agent, handler_context(old_agent, uow=uow, deps=DEPS, time=T0))
        await uow.commit()

    assert WorkloadOut.of(uow.workloads.workloads["w1"]).exit is None
