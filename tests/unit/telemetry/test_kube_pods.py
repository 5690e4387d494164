from __future__ import annotations

from decimal import Decimal

import kubernetes_validate
import pytest

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner.kube_pods import (
    PodRefused,
    label_value,
    pod_end,
    pod_manifest,
    pod_name,
    stuck_reason,
)

RUN = RunSpec(
    image="ghcr.io/acme/train:1",
    command=["python"],
    args=["train.py"],
    env={"B": "2", "A": "1"},
    working_dir="/work",
    cpu_millis=2500,
    memory_bytes=8 << 30,
    time_limit_s=90.5,
    grace_s=12.2,
)


def item(gpu: str, *, partition: str | None = None, profile: str | None = None) -> AllocationItem:
    return AllocationItem(
        gpu_uuid=gpu, partition_id=partition, profile=profile, units=Decimal(1), model="H100"
    )


def manifest(**kw: object) -> dict[str, object]:
    args: dict[str, object] = {
        "workload_id": "wl-1",
        "tenant_id": "Tenant One",
        "placement_id": "pl-1",
        "node": "node-a",
        "namespace": "gpucloud-workloads",
        "kind": "job",
        "allocations": [item("GPU-1"), item("GPU-2")],
        "run": RUN,
    }
    return pod_manifest(**{**args, **kw})  # type: ignore[arg-type]


def test_a_job_pod_asks_for_its_whole_gpus_and_limits_and_never_restarts() -> None:
    pod = manifest()
    kubernetes_validate.validate(pod, "1.30.0", strict=True)
    spec = pod["spec"]
    assert isinstance(spec, dict)
    assert (spec["nodeName"], spec["restartPolicy"]) == ("node-a", "Never")
    assert (spec["terminationGracePeriodSeconds"], spec["activeDeadlineSeconds"]) == (13, 91)
    (container,) = spec["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2", "cpu": "2500m", "memory": str(8 << 30)}
    assert container["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert (container["command"], container["args"], container["workingDir"]) == (
        ["python"],
        ["train.py"],
        "/work",
    )


def test_an_instance_restarts_always_and_mig_items_ask_for_their_profile() -> None:
    mig = [
        item("GPU-1", partition="mig-1", profile="3g.40gb"),
        item("GPU-1", partition="mig-2", profile="1g.10gb"),
    ]
    pod = manifest(kind="instance", allocations=mig)
    kubernetes_validate.validate(pod, "1.30.0", strict=True)
    spec = pod["spec"]
    assert isinstance(spec, dict)
    assert spec["restartPolicy"] == "Always"
    assert "activeDeadlineSeconds" not in spec
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/mig-3g.40gb"] == "1"
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"


def test_labels_are_sanitised_and_annotations_keep_the_raw_ids() -> None:
    meta = manifest()["metadata"]
    assert isinstance(meta, dict)
    assert meta["labels"]["gpucloud.io/tenant"] != "Tenant One"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "gpucloud-agent"
    assert meta["annotations"]["gpucloud.io/tenant-id"] == "Tenant One"
    assert label_value("ok-1") == "ok-1"
    assert label_value("a" * 80) != label_value("a" * 81)
    assert all(len(label_value(v)) <= 63 for v in ("x" * 200, "-a-", "é"))


def test_pod_names_are_dns_labels_unique_per_placement() -> None:
    long = "Placement/" + "X" * 100
    for raw in (long, "pl_1", "---", "PL-1"):
        name = pod_name(raw)
        assert len(name) <= 63
        assert name == name.lower()
        assert name[0].isalnum()
        assert name[-1].isalnum()
    assert pod_name("pl_1") != pod_name("pl-1")


def test_a_placement_without_an_image_or_with_an_unknown_kind_is_refused() -> None:
    with pytest.raises(PodRefused, match="needs an image"):
        manifest(run=RunSpec(command=["true"]))
    with pytest.raises(PodRefused, match="needs an image"):
        manifest(run=None)
    with pytest.raises(PodRefused, match="kind 'batch'"):
        manifest(kind="batch")


def _terminated(**state: object) -> dict[str, object]:
    return {"containerStatuses": [{"state": {"terminated": state}}]}


def test_an_ended_pod_reads_as_its_exit_reason() -> None:
    started = "2026-12-02T00:00:01Z"
    ok = pod_end(phase="Succeeded", status=_terminated(exitCode=0, startedAt=started))
    assert (ok.reason, ok.code, ok.ran) == ("succeeded", 0, True)
    oom = pod_end(phase="Failed", status=_terminated(exitCode=137, reason="OOMKilled"))
    assert (oom.reason, oom.code, oom.ran) == ("oom_killed", 137, False)
    late = pod_end(phase="Failed", status={"reason": "DeadlineExceeded", **_terminated(reason="Error")})
    assert late.reason == "time_limit"
    plain = pod_end(phase="Failed", status=_terminated(exitCode=3, reason="Error"))
    assert (plain.reason, plain.detail) == ("failed", "Error: exit code 3")


def test_a_pending_pod_is_stuck_only_on_what_does_not_clear_by_itself() -> None:
    pulling = {"containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff", "message": "x"}}}]}
    assert stuck_reason(pulling) == "ImagePullBackOff: x"
    creating = {"containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}
    assert stuck_reason(creating) is None
    unschedulable = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    assert stuck_reason(unschedulable) == "Unschedulable"
