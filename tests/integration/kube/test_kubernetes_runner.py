from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.core_v1 import Pod

from libs.common.events.scheduler import AllocationItem, RunSpec, WorkloadPlacedV1
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.kube_devices import FakeAssignedDevices
from services.telemetry.adapters.runner.kube_pods import pod_name
from services.telemetry.adapters.runner.kubernetes import KubernetesRunner
from services.telemetry.adapters.runner.report import RunnerReport
from services.telemetry.domain.probe import GpuInfo, NodeDiscovery
from services.telemetry.service.agent.placements import PlacementBook
from services.telemetry.service.agent.runner import WorkloadRunner
from services.telemetry.service.agent.setup import AgentSetup, with_runner
from services.telemetry.settings import TelemetrySettings
from tests.integration.kube.fake_api import FakeKubeApi

REAL = bool(os.environ.get("KUBECONFIG"))
driven = pytest.mark.skipif(REAL, reason="drives Pod phases: needs the fake API server, not a real cluster")
NODE = "node-a"
NS = "gpucloud-workloads"
NOW = datetime(2026, 12, 2, tzinfo=UTC)
GPU = AllocationItem(gpu_uuid="GPU-1", units=Decimal(1), model="H100")
RUN = RunSpec(image="busybox:1.36", command=["sh", "-c"], args=["echo hi"], grace_s=7, cpu_millis=500)


def kubeconfig(url: str) -> KubeConfig:
    return KubeConfig.from_dict(
        {
            "clusters": [{"name": "fake", "cluster": {"server": url}}],
            "users": [{"name": "agent", "user": {"token": "test"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "agent", "namespace": NS}}],
            "current-context": "fake",
        }
    )


@pytest.fixture
async def api() -> AsyncIterator[FakeKubeApi]:
    fake = FakeKubeApi()
    await fake.start()
    yield fake
    await fake.stop()
    assert fake.invalid == []


@pytest.fixture
def make(api: FakeKubeApi, tmp_path: Path) -> Callable[..., KubernetesRunner]:
    made: list[KubernetesRunner] = []

    def runner(devices: FakeAssignedDevices | None = None, **kw: Any) -> KubernetesRunner:
        client = AsyncClient(kubeconfig(api.url))
        made.append(
            KubernetesRunner(
                client=client,
                namespace=NS,
                node=NODE,
                root=tmp_path,
                devices=devices or FakeAssignedDevices(),
                **kw,
            )
        )
        return made[-1]

    return runner


def start(
    runner: KubernetesRunner, placement: str = "pl-1", run: RunSpec | None = RUN, kind: str = "job"
) -> None:
    runner.start(
        workload_id="wl-1",
        tenant_id="t-1",
        placement_id=placement,
        gpu_uuids=["GPU-1"],
        allocations=[GPU],
        profile="training",
        duration_s=None,
        run=run,
        at=NOW,
        kind=kind,
    )


async def until(check: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    return value


async def reports(runner: KubernetesRunner, count: int, timeout: float = 5.0) -> list[RunnerReport]:
    got: list[RunnerReport] = []

    def more() -> bool:
        got.extend(runner.poll(now=NOW))
        return len(got) >= count

    await until(more, f"{count} reports", timeout)
    return got


@driven
async def test_a_placed_job_becomes_a_pod_pinned_to_the_node_with_its_resources_and_grace(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    start(runner)
    pod = await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    spec = pod["spec"]
    assert spec["nodeName"] == NODE
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 7
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1", "cpu": "500m"}
    assert pod["metadata"]["annotations"]["gpucloud.io/placement-id"] == "pl-1"
    await runner.close()


@driven
async def test_phase_changes_become_reports_in_order_with_the_devices_read_back(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner], tmp_path: Path
) -> None:
    devices = FakeAssignedDevices()
    runner = make(devices)
    start(runner)
    pod = await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    devices.devices[pod["metadata"]["uid"]] = ("GPU-7",)
    api.write_log(pod_name("pl-1"), "hello\nworld\n")
    await api.set_status(pod_name("pl-1"), phase="Running", running={"startedAt": "2026-12-02T00:00:01Z"})
    await api.end_log(pod_name("pl-1"))
    await api.set_status(
        pod_name("pl-1"), phase="Succeeded", terminated={"exitCode": 0, "reason": "Completed"}
    )
    started, finished = await reports(runner, 2)
    assert (started.event, started.runner, started.gpu_uuids) == ("started", "kubernetes", ("GPU-7",))
    assert started.container_id is not None
    assert started.container_id.startswith("containerd://")
    assert (finished.event, finished.exit_reason, finished.exit_code) == ("finished", "succeeded", 0)
    run_dir = tmp_path / files.run_dir_name(workload_id="wl-1", placement_id="pl-1")
    assert (run_dir / files.LOG).read_text() == "hello\nworld\n"
    assert runner.poll(now=NOW) == []  # each once
    runner.delivered()
    await until(lambda: api.named(pod_name("pl-1")) is None, "the ended Pod deleted after delivery")
    await runner.close()


@driven
async def test_an_oom_killed_container_is_reported_as_oom_killed(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.end_log(pod_name("pl-1"))
    await api.set_status(
        pod_name("pl-1"),
        phase="Failed",
        terminated={"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-12-02T00:00:01Z"},
    )
    got = await reports(runner, 2)
    assert [r.event for r in got] == ["started", "failed"]
    assert (got[1].exit_reason, got[1].exit_code) == ("oom_killed", 137)
    await runner.close()


@driven
async def test_a_pod_past_its_deadline_is_reported_as_time_limit(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.end_log(pod_name("pl-1"))
    terminated = {"exitCode": 143, "reason": "Error", "startedAt": "2026-12-02T00:00:01Z"}
    await api.set_status(pod_name("pl-1"), phase="Failed", reason="DeadlineExceeded", terminated=terminated)
    got = await reports(runner, 2)
    assert (got[1].event, got[1].exit_reason, got[1].exit_code) == ("failed", "time_limit", 143)
    await runner.close()


@driven
async def test_preemption_deletes_the_pod_with_its_grace_and_reports_preempted(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.set_status(pod_name("pl-1"), phase="Running", running={"startedAt": "2026-12-02T00:00:01Z"})
    await reports(runner, 1)
    assert runner.stop(workload_id="wl-1", reason="preempted") is True
    (ended,) = await reports(runner, 1)
    assert api.deletions == [(pod_name("pl-1"), 7)]
    assert (ended.event, ended.exit_reason) == ("failed", "preempted")
    await runner.close()


@driven
async def test_a_restarted_runner_adopts_its_pod_and_deletes_orphans(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    first = make()
    start(first)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await first.close()
    orphan = dict(api.named(pod_name("pl-1")) or {})
    orphan = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name("pl-old"),
            "namespace": NS,
            "labels": orphan["metadata"]["labels"],
            "annotations": {**orphan["metadata"]["annotations"], "gpucloud.io/placement-id": "pl-old"},
        },
        "spec": orphan["spec"],
    }
    await api.put(orphan)
    second = make()
    start(second)  # the agent's catch-up replays the placement
    await api.set_status(pod_name("pl-1"), phase="Running", running={"startedAt": "2026-12-02T00:00:01Z"})
    (started,) = await reports(second, 1)  # polls while the catch-up may still go on
    assert started.placement_id == "pl-1"
    await asyncio.sleep(0.2)
    assert api.named(pod_name("pl-old")) is not None  # no orphan before the whole history is in
    second.caught_up()
    await until(lambda: api.named(pod_name("pl-old")) is None, "the orphan deleted")
    assert api.created.count(pod_name("pl-1")) == 1  # adopted, never a second Pod
    assert second.stop(workload_id="wl-1", reason="preempted") is True
    await reports(second, 1)
    assert api.deletions == [(pod_name("pl-old"), 1), (pod_name("pl-1"), 7)]  # the placement's grace
    await second.close()


async def test_a_placement_without_an_image_is_refused_with_a_clear_failure(
    make: Callable[..., KubernetesRunner],
) -> None:
    runner = make()
    start(runner, run=RunSpec(command=["true"]))
    (failed,) = await reports(runner, 1)
    assert failed.event == "failed"
    assert "needs an image" in failed.reason
    await runner.close()


@pytest.mark.skipif(not REAL, reason="KUBECONFIG not set")
async def test_a_job_runs_to_completion_on_a_real_cluster(tmp_path: Path) -> None:
    client = AsyncClient(KubeConfig.from_file(os.environ["KUBECONFIG"]))
    node = os.environ.get("KUBE_TEST_NODE", "")
    assert node, "KUBE_TEST_NODE names the node the test Pod runs on"
    namespace = os.environ.get("KUBE_TEST_NAMESPACE", "default")
    runner = KubernetesRunner(
        client=client, namespace=namespace, node=node, root=tmp_path, devices=FakeAssignedDevices()
    )
    runner.start(
        workload_id="wl-real",
        tenant_id="t-real",
        placement_id=f"pl-real-{os.getpid()}",
        gpu_uuids=[],
        allocations=[],
        profile="training",
        duration_s=None,
        run=RunSpec(image="busybox:1.36", command=["sh", "-c", "echo hi"]),
        at=NOW,
    )
    got = await reports(runner, 2, timeout=120)
    assert [r.event for r in got] == ["started", "finished"]
    runner.delivered()
    name = pod_name(f"pl-real-{os.getpid()}")
    for _ in range(600):  # the ended Pod deleted by the runner, before it is closed
        try:
            await client.get(Pod, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"Pod {name} was not deleted")
    await runner.close()


@driven
async def test_a_migration_deletes_the_old_pod_and_starts_the_target_from_the_start(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    moved = runner.migrate(
        workload_id="wl-1", placement_id="pl-2", target_gpu_uuids=["GPU-1"], allocations=[GPU], at=NOW
    )
    assert moved is False
    await until(lambda: api.named(pod_name("pl-2")) and not api.named(pod_name("pl-1")), "the move")
    await api.set_status(pod_name("pl-2"), phase="Running", running={"startedAt": "2026-12-02T00:00:01Z"})
    (started,) = await reports(runner, 1)  # the old Pod's end is no exit
    assert started.placement_id == "pl-2"
    assert "restarted from the start" in started.notes[0]
    await runner.close()


@driven
async def test_a_pod_stuck_pulling_its_image_fails_after_the_bound(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    now = [0.0]
    runner = make(pending_fail_s=60.0, clock=lambda: now[0])
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.set_status(
        pod_name("pl-1"), phase="Pending", waiting={"reason": "ImagePullBackOff", "message": "no such image"}
    )
    await until(lambda: "ImagePullBackOff" in runner.pending().get(pod_name("pl-1"), ""), "the wait seen")
    assert runner.poll(now=NOW) == []
    now[0] = 61.0
    (failed,) = await reports(runner, 1)  # it never ran: no started
    assert failed.event == "failed"
    assert "ImagePullBackOff" in failed.reason
    await api.set_status(pod_name("pl-1"), phase="Running", running={"startedAt": "2026-12-02T00:02:00Z"})
    await asyncio.sleep(0.2)
    assert runner.poll(now=NOW) == []  # a start after its failure is no news
    runner.delivered()
    await until(lambda: api.named(pod_name("pl-1")) is None, "the stuck Pod deleted")
    await runner.close()


@driven
async def test_a_restarted_runner_resumes_the_log_without_duplicating_it(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner], tmp_path: Path
) -> None:
    first = make()
    start(first)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    api.write_log(pod_name("pl-1"), "one\n")
    await api.set_status(pod_name("pl-1"), phase="Running", running={"startedAt": "2026-12-02T00:00:01Z"})
    out = tmp_path / files.run_dir_name(workload_id="wl-1", placement_id="pl-1") / files.LOG
    await until(lambda: out.exists() and out.read_text() == "one\n", "the first line")
    await first.close()
    api.write_log(pod_name("pl-1"), "two\n")
    second = make()
    start(second)
    second.caught_up()
    await until(lambda: out.read_text() == "one\ntwo\n", "the log resumed")
    await second.close()


@driven
async def test_the_book_passes_the_placed_kind_so_an_instance_pod_restarts_always(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    book = PlacementBook(runner=runner, gpus=frozenset({"GPU-1"}))
    placed = WorkloadPlacedV1(
        workload_id="wl-1",
        tenant_id="t-1",
        placement_id="pl-1",
        node=NODE,
        allocations=[GPU],
        kind="instance",
        run=RUN,
    )
    book.apply(placed, at=NOW)
    pod = await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    assert pod["spec"]["restartPolicy"] == "Always"
    await runner.close()


async def test_the_settings_build_a_kubernetes_runner_on_the_namespace_and_kubeconfig(
    tmp_path: Path,
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    settings = TelemetrySettings(
        agent_runner="kubernetes",
        agent_workload_dir=tmp_path / "runs",
        agent_kube_namespace="team-a",
        agent_kube_config=config,
        object_store_url=f"file://{tmp_path / 'store'}",
    )
    gpu = GpuInfo(uuid="GPU-1", index=0, model_name="H100")
    discoveries = {NODE: NodeDiscovery(hostname=NODE, gpus=(gpu,))}
    unset = cast(WorkloadRunner, object())  # NVML's setup would give the process runner; unused here
    setup = AgentSetup(source="nvml", probes={}, discoveries=discoveries, runner=unset)
    chosen = with_runner(setup, settings=settings)
    assert isinstance(chosen.runner, KubernetesRunner)
    assert (chosen.runner.namespace, chosen.runner.node) == ("team-a", NODE)
    assert chosen.shipper is not None
    assert chosen.shipper is chosen.runner.shipper
    await chosen.runner.close()


@driven
async def test_a_pod_that_ended_while_the_agent_was_away_is_told_once_and_never_again(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    first = make()
    start(first)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await first.close()
    await api.end_log(pod_name("pl-1"))
    ended = {"exitCode": 0, "reason": "Completed", "startedAt": "2026-12-02T00:00:01Z"}
    await api.set_status(pod_name("pl-1"), phase="Succeeded", terminated=ended)
    second = make()
    start(second)  # the catch-up claims the Pod
    got = await reports(second, 2)
    assert [r.event for r in got] == ["started", "finished"]
    second.delivered()
    await second.close()  # stopped before it could delete the Pod
    assert api.named(pod_name("pl-1")) is not None
    third = make()
    start(third)
    await until(lambda: api.named(pod_name("pl-1")) is None, "the told Pod deleted")
    assert third.poll(now=NOW) == []
    await third.close()


RUNNING = {"startedAt": "2026-12-02T00:00:01Z"}


@driven
async def test_a_pod_deleted_while_the_watch_was_down_is_told_at_the_relist(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.set_status(pod_name("pl-1"), phase="Running", running=RUNNING)
    await reports(runner, 1)
    await api.vanish(pod_name("pl-1"))
    await api.drop_watches()
    (gone,) = await reports(runner, 1)
    assert (gone.event, gone.exit_reason) == ("failed", "cancelled")
    assert "deleted" in gone.reason
    await runner.close()


@driven
async def test_answers_that_may_change_are_retried_and_a_refusal_is_final(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    api.fail_next("POST", 503)
    api.fail_next("POST", 500, after=True)  # made, but the answer says otherwise: tried again
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.set_status(pod_name("pl-1"), phase="Running", running=RUNNING)
    (started,) = await reports(runner, 1)
    assert started.placement_id == "pl-1"
    # The create answered 500 after it was made is asked again (and answered 409, already there): only once
    # that third ask is in is the next failure armed, or the retry, not pl-2's create, would meet it.
    await until(lambda: api.posted.count(pod_name("pl-1")) >= 3, "the create asked again after the 500")
    api.fail_next("POST", 403)
    runner.start(
        workload_id="wl-2",
        tenant_id="t-1",
        placement_id="pl-2",
        gpu_uuids=["GPU-1"],
        allocations=[GPU],
        profile="training",
        duration_s=None,
        run=RUN,
        at=NOW,
    )
    (refused,) = await reports(runner, 1, timeout=8)
    assert (refused.workload_id, refused.event) == ("wl-2", "failed")
    assert "refused" in refused.reason
    assert api.created == [pod_name("pl-1")]  # one Pod for the retried create, none for the refused
    await runner.close()


@driven
async def test_a_pod_pending_past_the_start_bound_fails_with_what_its_status_says(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    now = [0.0]
    runner = make(start_fail_s=600.0, clock=lambda: now[0])
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.set_status(pod_name("pl-1"), phase="Pending", waiting={"reason": "ContainerCreating"})
    await until(lambda: runner.pending().get(pod_name("pl-1")) == "ContainerCreating", "the wait seen")
    now[0] = 599.0
    assert runner.poll(now=NOW) == []
    now[0] = 601.0
    (failed,) = await reports(runner, 1)
    assert failed.event == "failed"
    assert "still Pending after 600s: ContainerCreating" in failed.reason
    await runner.close()


@driven
async def test_a_pod_that_ended_as_it_was_deleted_reports_its_own_end(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    runner = make()
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.set_status(pod_name("pl-1"), phase="Running", running=RUNNING)
    await reports(runner, 1)
    await api.end_log(pod_name("pl-1"))
    await api.finish(pod_name("pl-1"), phase="Succeeded", terminated={"exitCode": 0, "reason": "Completed"})
    (ended,) = await reports(runner, 1)
    assert (ended.event, ended.exit_reason, ended.exit_code) == ("finished", "succeeded", 0)
    await runner.close()


@driven
async def test_a_cancelled_pod_is_told_ended_only_once_it_is_gone(
    api: FakeKubeApi, make: Callable[..., KubernetesRunner]
) -> None:
    api.hold_deletes = True
    runner = make()
    start(runner)
    await until(lambda: api.named(pod_name("pl-1")), "the Pod")
    await api.set_status(pod_name("pl-1"), phase="Running", running=RUNNING)
    await reports(runner, 1)
    assert runner.stop(workload_id="wl-1", reason="cancelled") is True
    await until(lambda: api.deletions, "the deletion asked")
    assert api.deletions == [(pod_name("pl-1"), 7)]
    await asyncio.sleep(0.2)
    assert runner.poll(now=NOW) == []  # still terminating: its GPUs are not free yet
    await api.end_log(pod_name("pl-1"))
    await api.finish(pod_name("pl-1"), phase="Failed", terminated={"exitCode": 143, "reason": "Error"})
    (ended,) = await reports(runner, 1)
    assert (ended.event, ended.exit_reason, ended.exit_code) == ("failed", "cancelled", 143)
    await runner.close()
