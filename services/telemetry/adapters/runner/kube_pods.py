"""A placement as a Kubernetes Pod manifest, and what a Pod's status says (pure: no client, no IO).

One Pod per placement, pinned to the agent's node by ``nodeName`` (the scheduler already chose it), asking
the device plugin for whole GPUs (``nvidia.com/gpu``) or one MIG instance per MIG item
(``nvidia.com/mig-<profile>``, the plugin's mixed strategy). The labels select the agent's Pods; the
annotations keep the raw ids, which labels may not hold verbatim.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner.exits import ExitReason

__all__ = [
    "ANNOTATION_PLACEMENT",
    "ANNOTATION_TENANT",
    "ANNOTATION_WORKLOAD",
    "CONTAINER",
    "LABEL_MANAGED_BY",
    "LABEL_NODE",
    "LABEL_PLACEMENT",
    "MANAGED_BY",
    "NEEDS_IMAGE",
    "STUCK_REASONS",
    "PodEnd",
    "PodRefused",
    "as_time",
    "container_status",
    "label_value",
    "node_selector",
    "pod_end",
    "pod_manifest",
    "pod_name",
    "stuck_reason",
]

MANAGED_BY = "gpucloud-agent"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_WORKLOAD = "gpucloud.io/workload"
LABEL_TENANT = "gpucloud.io/tenant"
LABEL_PLACEMENT = "gpucloud.io/placement"
LABEL_NODE = "gpucloud.io/node"
ANNOTATION_WORKLOAD = "gpucloud.io/workload-id"
ANNOTATION_TENANT = "gpucloud.io/tenant-id"
ANNOTATION_PLACEMENT = "gpucloud.io/placement-id"
CONTAINER = "workload"
NEEDS_IMAGE = "the Kubernetes runner needs an image"

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]+")
_RESTART = {"job": "Never", "instance": "Always"}
#: A Pending Pod waiting for one of these is told as failed after the runner's bound (a note is logged
#: when first seen): none of them clears without someone changing the image, the node or the spec.
STUCK_REASONS = frozenset(
    {"Unschedulable", "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}
)
_ENDS: dict[str, ExitReason] = {"OOMKilled": "oom_killed", "DeadlineExceeded": "time_limit"}


class PodRefused(ValueError):
    """The placement cannot be a Pod (the reason is the message)."""


def pod_name(placement_id: str) -> str:
    """A DNS-1123 label from the placement id: readable, unique by a digest, at most 63 characters."""
    digest = hashlib.sha256(placement_id.encode()).hexdigest()[:10]
    readable = _NOT_DNS.sub("-", placement_id.lower()).strip("-")[:40].strip("-")
    return f"gc-{readable}-{digest}" if readable else f"gc-{digest}"


def label_value(raw: str) -> str:
    """A valid label value (at most 63 of [A-Za-z0-9._-], alphanumeric at both ends); a value changed
    on the way keeps a digest of the original, so two ids never share one."""
    clean = _NOT_LABEL.sub("_", raw)
    if clean == raw and len(raw) <= 63 and (not raw or (raw[0].isalnum() and raw[-1].isalnum())):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    body = clean[:54].strip("._-")
    return f"{body}-{digest}" if body else digest


def node_selector(node: str) -> dict[str, str]:
    """The labels that select every Pod this agent manages on its node."""
    return {LABEL_MANAGED_BY: MANAGED_BY, LABEL_NODE: label_value(node)}


def pod_manifest(
    *,
    workload_id: str,
    tenant_id: str,
    placement_id: str,
    node: str,
    namespace: str,
    kind: str,
    allocations: Sequence[AllocationItem],
    run: RunSpec | None,
) -> dict[str, Any]:
    """The Pod of a placement; PodRefused names why it cannot be one (no image, an unknown kind)."""
    if run is None or not run.image:
        raise PodRefused(NEEDS_IMAGE)
    if kind not in _RESTART:
        raise PodRefused(f"workload kind {kind!r}: expected one of {sorted(_RESTART)}")
    labels = {
        **node_selector(node),
        LABEL_WORKLOAD: label_value(workload_id),
        LABEL_TENANT: label_value(tenant_id),
        LABEL_PLACEMENT: label_value(placement_id),
    }
    annotations = {
        ANNOTATION_WORKLOAD: workload_id,
        ANNOTATION_TENANT: tenant_id,
        ANNOTATION_PLACEMENT: placement_id,
    }
    spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": _RESTART[kind],
        "terminationGracePeriodSeconds": math.ceil(run.grace_s),
        "containers": [_container(run, allocations)],
    }
    if run.time_limit_s is not None and kind == "job":  # an instance (restartPolicy Always) has none
        spec["activeDeadlineSeconds"] = max(1, math.ceil(run.time_limit_s))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(placement_id),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def _container(run: RunSpec, allocations: Sequence[AllocationItem]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINER, "image": run.image}
    if run.command:
        container["command"] = list(run.command)
    if run.args:
        container["args"] = list(run.args)
    if run.env:
        container["env"] = [{"name": k, "value": v} for k, v in sorted(run.env.items())]
    if run.working_dir:
        container["workingDir"] = run.working_dir
    limits = _device_limits(allocations)
    if run.cpu_millis is not None:
        limits["cpu"] = f"{run.cpu_millis}m"
    if run.memory_bytes is not None:
        limits["memory"] = str(run.memory_bytes)
    if limits:
        container["resources"] = {"limits": limits}
    return container


def _device_limits(allocations: Sequence[AllocationItem]) -> dict[str, str]:
    """Whole GPUs (and time-sliced shares) as nvidia.com/gpu: N; each MIG item as one
    nvidia.com/mig-<profile>."""
    limits: dict[str, int] = {}
    for item in allocations:
        if item.partition_id is not None and item.profile:
            key = f"nvidia.com/mig-{item.profile}"
        else:  # a whole GPU, or a time-sliced share (the plugin's time-slicing replicas of nvidia.com/gpu)
            key = "nvidia.com/gpu"
        limits[key] = limits.get(key, 0) + 1
    return {k: str(v) for k, v in sorted(limits.items())}


@dataclass(frozen=True, slots=True)
class PodEnd:
    """How an ended Pod ended."""

    reason: ExitReason
    detail: str
    code: int | None
    at: datetime
    ran: bool  # its container started (it was running, if only between two looks)


def pod_end(*, phase: str, status: dict[str, Any]) -> PodEnd:
    """Succeeded, or Failed with the reason of the container (OOMKilled) or of the Pod (DeadlineExceeded)."""
    terminated = (container_status(status).get("state") or {}).get("terminated") or {}
    code = terminated.get("exitCode")
    at, ran = as_time(terminated.get("finishedAt")), terminated.get("startedAt") is not None
    if phase == "Succeeded":
        return PodEnd("succeeded", "exit code 0", 0, at, ran)
    pod_why = str(status.get("reason") or "")  # DeadlineExceeded is the Pod's, not its container's
    why = pod_why if pod_why in _ENDS else str(terminated.get("reason") or pod_why)
    detail = f"{why or 'failed'}: exit code {code}" if code is not None else why or "failed"
    return PodEnd(_ENDS.get(why, "failed"), detail, code, at, ran)


def container_status(status: dict[str, Any]) -> dict[str, Any]:
    """The status of the Pod's (one) container; {} before it has one."""
    statuses = status.get("containerStatuses") or []
    return statuses[0] if statuses else {}


def stuck_reason(status: dict[str, Any]) -> str | None:
    """Why a Pending Pod waits, where it waits on something that does not clear by itself."""
    for condition in status.get("conditions") or []:
        if condition.get("reason") in STUCK_REASONS and condition.get("status") == "False":
            return f"{condition['reason']}: {condition.get('message', '')}".rstrip(": ")
    waiting = (container_status(status).get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in STUCK_REASONS:
        return f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    return None


def as_time(value: Any) -> datetime:
    """A status time (RFC 3339 text or a datetime); now where it has none."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return datetime.now(UTC)
