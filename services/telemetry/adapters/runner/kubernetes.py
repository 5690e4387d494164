"""The Kubernetes runner: each placement is one Pod on the agent's node (kube_pods.py builds it).

The sync WorkloadRunner methods only record intent; one task on the running loop creates and deletes
Pods in order, another watches the node's Pods (by label) and turns their phases into reports, and one
task per running Pod follows its log into the run directory's output.log (files.py), which the Shipper
ships as for the other runners. The Pod is the record: a restarted runner lists its node's Pods and
adopts them (a start of a known placement never creates a second Pod); Pods no placement claimed once
the agent applied its whole history (caught_up) are orphans and deleted; an ended Pod is deleted only
once its exit report was delivered, so an exit is told at least once and, after that, never again.
A Pod that vanished while the watch was down is found missing at the relist and told as deleted. Calls
the API server may answer later (throttling, 5xx, a transport error) are retried in order; any other
refusal is final. No Pod that may run is deleted with a grace of 0 (a forced deletion would free its
GPUs in the API while its processes still hold them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Pod

from libs.common.events.scheduler import AllocationItem, RunSpec
from services.telemetry.adapters.runner import files
from services.telemetry.adapters.runner.exits import ExitReason, StopReason
from services.telemetry.adapters.runner.kube_devices import AssignedDevices
from services.telemetry.adapters.runner.kube_pods import (
    ANNOTATION_PLACEMENT,
    ANNOTATION_TENANT,
    ANNOTATION_WORKLOAD,
    PodRefused,
    as_time,
    container_status,
    node_selector,
    pod_end,
    pod_manifest,
    pod_name,
    stuck_reason,
)
from services.telemetry.adapters.runner.moves import RESTARTED
from services.telemetry.adapters.runner.report import RunnerReport
from services.telemetry.adapters.runner.ship import Shipper

__all__ = ["RETRY_S", "KubernetesRunner"]

log = logging.getLogger(__name__)
_NAME = "kubernetes"
RETRY_S = 1.0  # after a failed call to the API server
_SHORT_GRACE_S = 1  # an orphan's, or an ended Pod's: the shortest that is still no forced deletion
_LATER = frozenset({429, 500, 502, 503, 504})  # answers the same call may not get again
_TRANSPORT = (httpx.TransportError, OSError, TimeoutError)


def _retried(exc: BaseException) -> bool:
    """Whether a failed call is worth the same call again (the API server away or throttling)."""
    if isinstance(exc, ApiError):
        return exc.status.code in _LATER or not exc.status.code
    if isinstance(exc, httpx.HTTPStatusError):  # an answer that is no Status (a proxy's page, say)
        return exc.response.status_code in _LATER
    return isinstance(exc, _TRANSPORT)


def _pod_of(doc: dict[str, Any]) -> Pod:
    """A Pod model from its manifest (lightkube's dataclass mix-in is untyped)."""
    model: Any = Pod
    made = model.from_dict(doc)
    assert isinstance(made, Pod)
    return made


def _doc_of(obj: object) -> dict[str, Any]:
    """A lightkube model as the API's JSON document."""
    model: Any = obj
    doc = model.to_dict()
    assert isinstance(doc, dict)
    return doc


def _front(queue: asyncio.Queue[_Op], op: _Op) -> asyncio.Queue[_Op]:
    """The queue with ``op`` first again (a retried operation keeps its place before later ones)."""
    rest: list[_Op] = []
    while not queue.empty():
        rest.append(queue.get_nowait())
    again: asyncio.Queue[_Op] = asyncio.Queue()
    for item in (op, *rest):
        again.put_nowait(item)
    return again


@dataclass(slots=True)
class _Pod:
    name: str
    workload_id: str
    tenant_id: str
    placement_id: str
    path: Path
    kind: str = "job"
    run: RunSpec | None = None
    allocations: tuple[AllocationItem, ...] = ()
    claimed: bool = False  # a start() named it (adopted Pods are orphans until one does)
    stop: StopReason | None = None
    swallow: bool = False  # left for a move: its end is no exit
    note: str = ""
    started_told: bool = False
    exit: RunnerReport | None = None  # seen ended, told or to be told
    exit_told: bool = False
    gone: bool = False  # deleted in the API
    stuck_since: float | None = None
    stuck_why: str = ""
    pending_since: float | None = None
    logs: asyncio.Task[None] | None = None
    uid: str = ""
    last: dict[str, Any] | None = None  # its latest object, replayed when a start claims it
    ending: bool = False


@dataclass(slots=True)
class _Op:
    what: str  # "create" or "delete"
    pod: _Pod
    grace: int | None = None
    manifest: dict[str, Any] = field(default_factory=dict)


class KubernetesRunner:
    """Runs workloads as Pods on ``node`` in ``namespace``, run directories under ``root``."""

    runner_name = _NAME

    def __init__(
        self,
        *,
        client: AsyncClient,
        namespace: str,
        node: str,
        root: Path,
        devices: AssignedDevices,
        shipper: Shipper | None = None,
        pending_fail_s: float = 300.0,
        start_fail_s: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.node = node
        self.root = root
        self.shipper = shipper
        self.mover = None  # no checkpoint moves: a migrated workload restarts from the start
        self._devices = devices
        self._pending_fail_s = pending_fail_s  # waiting on what does not clear by itself (a bad image)
        self._start_fail_s = start_fail_s  # Pending for any reason (unschedulable, a long pull)
        self._clock = clock
        self._pods: dict[str, _Pod] = {}  # Pod name -> what is known of it
        self._current: dict[str, str] = {}  # workload id -> its Pod's name
        self._ops: asyncio.Queue[_Op] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._side: set[asyncio.Task[None]] = set()  # adopted Pods' replays, held until done
        self._listed = asyncio.Event()
        self._caught_up = False
        self._reports: list[RunnerReport] = []
        self._exits: list[_Pod] = []  # exits among the reports not yet polled
        self._unmarked: list[_Pod] = []  # exits polled since the last delivery
        root.mkdir(parents=True, exist_ok=True)

    # -- the WorkloadRunner port

    def start(
        self,
        *,
        workload_id: str,
        tenant_id: str,
        placement_id: str,
        gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        profile: str,
        duration_s: float | None,
        run: RunSpec | None,
        at: datetime,
        kind: str = "job",
        note: str = "",
    ) -> None:
        self._begin()
        name = pod_name(placement_id)
        known = self._pods.get(name)
        if known is not None:  # adopted, or a redelivered placement: never a second Pod
            self._current[workload_id] = name
            if not known.claimed:
                known.run, known.kind, known.note = known.run or run, kind, known.note or note
                if known.last is not None:
                    self._later(self._claimed(known))
            known.claimed = True
            return
        mine = tuple(a for a in allocations if a.gpu_uuid in set(gpu_uuids))
        pod = _Pod(name, workload_id, tenant_id, placement_id, self._run_dir(workload_id, placement_id))
        pod.kind, pod.run, pod.allocations, pod.claimed, pod.note = kind, run, mine, True, note
        self._pods[name] = pod
        self._current[workload_id] = name
        if self._told(pod):
            return
        try:
            manifest = pod_manifest(
                workload_id=workload_id,
                tenant_id=tenant_id,
                placement_id=placement_id,
                node=self.node,
                namespace=self.namespace,
                kind=kind,
                allocations=mine,
                run=run,
            )
        except PodRefused as exc:
            pod.gone = True
            self._exit(pod, reason="failed", detail=str(exc), code=None)
            return
        self._queue(_Op("create", pod, manifest=manifest))

    def stop(self, *, workload_id: str, reason: StopReason = "cancelled") -> bool:
        name = self._current.pop(workload_id, None)
        pod = self._pods.get(name) if name is not None else None
        if pod is None or pod.exit_told or (pod.gone and pod.exit is None):
            return False
        if pod.exit is not None:
            return True  # it ended by itself first: its exit is told as usual
        pod.stop = reason
        pod.swallow = reason == "moved"
        grace = None if pod.run is None else max(_SHORT_GRACE_S, math.ceil(pod.run.grace_s))
        self._queue(_Op("delete", pod, grace=grace))
        return not pod.swallow

    def migrate(
        self,
        *,
        workload_id: str,
        placement_id: str,
        target_gpu_uuids: Sequence[str],
        allocations: Sequence[AllocationItem],
        at: datetime,
    ) -> bool:
        pod = self._pods.get(self._current.get(workload_id, ""))
        if pod is None:
            return False
        if self.stop(workload_id=workload_id, reason="moved"):
            return True
        self.start(
            workload_id=workload_id,
            tenant_id=pod.tenant_id,
            placement_id=placement_id,
            gpu_uuids=target_gpu_uuids,
            allocations=allocations,
            profile="",
            duration_s=None,
            run=pod.run,
            at=at,
            kind=pod.kind,
            note=f"{RESTARTED}: the Kubernetes runner carries no checkpoint",
        )
        return False

    def set_profile(self, *, workload_id: str, profile: str) -> bool:
        return False  # a Pod's use of its GPUs is its own

    def caught_up(self) -> None:
        """Every live placement was started: the Pods none claimed are orphans, deleted now."""
        if self._caught_up:
            return
        self._caught_up = True
        if self._listed.is_set():
            self._delete_orphans()

    def poll(self, *, now: datetime) -> list[RunnerReport]:
        self._begin()
        self._check_stuck()
        reports, self._reports = self._reports, []
        self._unmarked += self._exits  # only what a poll returned may a delivery cover
        self._exits = []
        return reports

    def delivered(self) -> None:
        for pod in self._unmarked:
            pod.exit_told = True
            if pod.path.exists():  # an agent stopped before the Pod's deletion never tells it again
                files.write_json(pod.path / files.REPORTED, {"exit": True})
            if not pod.gone:
                self._queue(_Op("delete", pod, grace=_SHORT_GRACE_S))
            else:
                self._forget(pod)
        self._unmarked = []

    def pending(self) -> dict[str, str]:
        """The Pods seen Pending and not failed yet, each with what its status says of the wait."""
        return {
            p.name: _pending_why(p.last)
            for p in self._pods.values()
            if p.pending_since is not None and p.exit is None
        }

    async def close(self) -> None:
        """Stop the runner's tasks (the Pods keep running; a new runner adopts them)."""
        tasks = self._tasks + [p.logs for p in self._pods.values() if p.logs is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    # -- intent into work on the loop

    def _begin(self) -> None:
        if self._tasks:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # outside a loop (a replay in a test): the first call on the loop starts them
        self._ops = self._ops or asyncio.Queue()
        self._tasks = [loop.create_task(self._watch()), loop.create_task(self._work())]

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._side.add(task)
        task.add_done_callback(self._side.discard)

    def _queue(self, op: _Op) -> None:
        self._begin()
        self._ops = self._ops or asyncio.Queue()
        self._ops.put_nowait(op)

    async def _work(self) -> None:
        await self._listed.wait()
        assert self._ops is not None
        while True:
            op = await self._ops.get()
            try:
                await self._do(op)
            except Exception as exc:
                if _retried(exc):  # the same operation again, before any later one
                    log.warning("Pod %s: %s failed (%s); retried in %gs", op.pod.name, op.what, exc, RETRY_S)
                    await asyncio.sleep(RETRY_S)
                    self._ops = _front(self._ops, op)
                    continue
                log.error("Pod %s: %s refused: %s", op.pod.name, op.what, exc)
                if op.what == "create":
                    op.pod.gone = True
                    self._exit(op.pod, reason="failed", detail=f"the Pod was refused: {exc}", code=None)

    async def _do(self, op: _Op) -> None:
        if op.what == "create":
            if op.pod.uid or op.pod.gone:
                return  # listed meanwhile (adopted), or stopped before it was created
            self._write_spec(op.pod)
            pod = _pod_of(op.manifest)
            try:
                created = await self.client.create(pod)
            except ApiError as exc:
                if exc.status.code != 409:
                    raise
                return  # made by an earlier try whose answer was lost: the watch brings it
            op.pod.uid = (created.metadata.uid if created.metadata else None) or ""
            return
        try:
            await self.client.delete(Pod, op.pod.name, namespace=self.namespace, grace_period=op.grace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            self._deleted(op.pod)

    def _selector(self) -> dict[str, Any]:
        return dict(node_selector(self.node))

    def _delete_orphans(self) -> None:
        for pod in list(self._pods.values()):
            if not pod.claimed and not pod.gone:
                log.info("Pod %s: no live placement (%s): deleted", pod.name, pod.placement_id)
                pod.swallow = True
                self._queue(_Op("delete", pod, grace=_SHORT_GRACE_S))

    def _check_stuck(self) -> None:
        now = self._clock()
        for pod in self._pods.values():
            if pod.exit is not None or not pod.claimed:
                continue
            if pod.stuck_since is not None and now - pod.stuck_since >= self._pending_fail_s:
                detail = f"not started after {self._pending_fail_s:g}s: {pod.stuck_why}"
            elif pod.pending_since is not None and now - pod.pending_since >= self._start_fail_s:
                detail = f"still Pending after {self._start_fail_s:g}s: {_pending_why(pod.last)}"
            else:
                continue
            self._exit(pod, reason="failed", detail=detail, code=None)

    # -- the watch

    async def _watch(self) -> None:
        while True:
            try:
                await self._watch_once()
            except Exception as exc:  # the API server away, or too old a version (410): list again
                log.warning(
                    "the watch of node %s's Pods ended (%s); listed again in %gs", self.node, exc, RETRY_S
                )
                await asyncio.sleep(RETRY_S)

    async def _watch_once(self) -> None:
        version = await self._list()
        if not self._listed.is_set():
            self._listed.set()
            if self._caught_up:
                self._delete_orphans()
        watch = self.client.watch(
            Pod, namespace=self.namespace, labels=self._selector(), resource_version=version
        )
        async for kind, obj in watch:
            doc = _doc_of(obj)
            version = doc.get("metadata", {}).get("resourceVersion") or version
            await self._seen(kind, doc)

    async def _list(self) -> str | None:
        """Every Pod of the node seen again; a known one missing was deleted while no watch looked."""
        before = {name for name, pod in self._pods.items() if pod.uid and not pod.gone}
        listed: set[str] = set()
        listing = self.client.list(Pod, namespace=self.namespace, labels=self._selector())
        async for obj in listing:
            doc = _doc_of(obj)
            listed.add(str(doc.get("metadata", {}).get("name")))
            await self._seen("ADDED", doc)
        for name in before - listed:
            if (pod := self._pods.get(name)) is not None and not pod.gone:
                log.warning("Pod %s: deleted while the watch was down", name)
                self._deleted(pod)
        return listing.resourceVersion

    async def _claimed(self, pod: _Pod) -> None:
        """An adopted Pod a start claimed: what it had done is told now."""
        if pod.last is not None:
            await self._seen("MODIFIED", pod.last)

    async def _seen(self, kind: str, doc: dict[str, Any]) -> None:
        meta = doc.get("metadata", {})
        pod = self._pods.get(str(meta.get("name")))
        if pod is None:
            pod = self._adopt(meta)
            if pod is None:
                return
        pod.uid = str(meta.get("uid") or pod.uid)
        status = doc.get("status") or {}
        phase = status.get("phase")
        if kind == "DELETED":
            if pod.claimed and phase in ("Succeeded", "Failed"):
                await self._ended(pod, phase, status)  # it ended before it went: that end is its exit
            self._deleted(pod)
            return
        pod.last = doc
        if not pod.claimed:
            return  # adopted: told once a start claims it, deleted as an orphan otherwise
        if phase == "Pending":
            self._pending(pod, status)
        elif phase in ("Running", "Succeeded", "Failed"):
            pod.stuck_since = pod.pending_since = None
            await self._running(pod, status)
            if phase != "Running":
                await self._ended(pod, phase, status)

    def _adopt(self, meta: dict[str, Any]) -> _Pod | None:
        notes = meta.get("annotations") or {}
        wl, tenant, pl = (
            notes.get(k) for k in (ANNOTATION_WORKLOAD, ANNOTATION_TENANT, ANNOTATION_PLACEMENT)
        )
        if not (wl and pl) or meta.get("name") != pod_name(pl):
            return None  # not one of ours (or one edited by hand)
        pod = _Pod(pod_name(pl), wl, tenant or "", pl, self._run_dir(wl, pl))
        self._pods[pod.name] = pod
        if self._told(pod):
            pass
        elif self._caught_up and self._listed.is_set():  # appeared after the catch-up, claimed by no one
            pod.swallow = True
            self._queue(_Op("delete", pod, grace=_SHORT_GRACE_S))
        return pod

    def _pending(self, pod: _Pod, status: dict[str, Any]) -> None:
        if pod.pending_since is None:
            pod.pending_since = self._clock()
        why = stuck_reason(status)
        if why is None:
            pod.stuck_since = None
            return
        if pod.stuck_since is None:
            log.warning("Pod %s waits: %s", pod.name, why)
            pod.stuck_since = self._clock()
        pod.stuck_why = why

    async def _running(self, pod: _Pod, status: dict[str, Any]) -> None:
        if pod.exit is not None:
            return  # failed already (refused, or not started in time): a start now is no news
        if (pod.logs is None or pod.logs.done()) and not pod.gone:  # again after an error: no line twice
            pod.logs = asyncio.create_task(self._follow(pod))
        if pod.started_told or pod.swallow:
            return
        pod.started_told = True
        container = container_status(status)
        started = ((container.get("state") or {}).get("running") or {}).get("startedAt")
        got = await self._assigned(pod)
        self._reports.append(
            RunnerReport(
                workload_id=pod.workload_id,
                event="started",
                at=as_time(started or status.get("startTime")),
                placement_id=pod.placement_id,
                container_id=container.get("containerID"),
                runner=_NAME,
                notes=(pod.note,) if pod.note else (),
                gpu_uuids=got or None,
            )
        )

    async def _assigned(self, pod: _Pod) -> tuple[str, ...]:
        """The devices read back; () (as placed) when they cannot be read, which is logged."""
        if not pod.uid:
            return ()
        try:
            return await self._devices.assigned(pod_uid=pod.uid)
        except Exception as exc:  # NVML missing or failing must not stop the watch of every Pod
            log.warning("Pod %s: its devices could not be read back: %s", pod.name, exc)
            return ()

    async def _ended(self, pod: _Pod, phase: str, status: dict[str, Any]) -> None:
        if pod.exit is not None or pod.ending:
            return
        pod.ending = True
        if pod.logs is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(pod.logs), timeout=2.0)
        end = pod_end(phase=phase, status=status)
        self._exit(pod, reason=end.reason, detail=end.detail, code=end.code, at=end.at, ran=end.ran)

    def _deleted(self, pod: _Pod) -> None:
        pod.gone = True
        if pod.logs is not None:
            pod.logs.cancel()
        if pod.exit is None and not pod.swallow and pod.claimed:
            reason: ExitReason = "preempted" if pod.stop == "preempted" else "cancelled"
            self._exit(pod, reason=reason, detail=f"{reason}: the Pod was deleted", code=None)
        elif pod.exit_told or pod.swallow or not pod.claimed:
            self._forget(pod)

    def _exit(
        self,
        pod: _Pod,
        *,
        reason: ExitReason,
        detail: str,
        code: int | None,
        at: Any = None,
        ran: bool = False,
    ) -> None:
        """Record the end once; it is reported unless the Pod was left for a move or was an orphan."""
        if pod.stop in ("cancelled", "preempted"):  # its end is the stop's, whatever the exit code
            reason = "preempted" if pod.stop == "preempted" else "cancelled"
        report = RunnerReport(
            workload_id=pod.workload_id,
            event="finished" if reason == "succeeded" else "failed",
            at=as_time(at),
            reason=detail,
            placement_id=pod.placement_id,
            runner=_NAME,
            exit_reason=reason,
            exit_code=code,
        )
        pod.exit = report
        if pod.path.exists():
            doc = {"reason": reason, "detail": detail, "exit_code": code, "at": report.at.isoformat()}
            files.write_json(pod.path / files.EXIT, doc)  # the Shipper finalizes the run's log on it
        if pod.swallow or not pod.claimed:
            return
        if ran and not pod.started_told:  # ran and ended between two looks: told as started first
            pod.started_told = True
            self._reports.append(
                RunnerReport(
                    pod.workload_id, "started", report.at, placement_id=pod.placement_id, runner=_NAME
                )
            )
        self._reports.append(report)
        self._exits.append(pod)

    def _told(self, pod: _Pod) -> bool:
        """Whether its exit was told and delivered before a restart: then only its deletion is left."""
        if not (files.read_json(pod.path / files.REPORTED) or {}).get("exit"):
            return False
        pod.exit_told = pod.swallow = True
        self._queue(_Op("delete", pod, grace=_SHORT_GRACE_S))
        return True

    def _forget(self, pod: _Pod) -> None:
        if self._pods.get(pod.name) is pod:
            del self._pods[pod.name]
        if self._current.get(pod.workload_id) == pod.name:
            del self._current[pod.workload_id]

    # -- run directories and logs

    def _run_dir(self, workload_id: str, placement_id: str) -> Path:
        return self.root / files.run_dir_name(workload_id=workload_id, placement_id=placement_id)

    def _write_spec(self, pod: _Pod) -> None:
        pod.path.mkdir(parents=True, exist_ok=True)
        (pod.path / files.OUTPUT_DIR).mkdir(exist_ok=True)
        if not (pod.path / files.SPEC).exists():
            doc = {"workload_id": pod.workload_id, "placement_id": pod.placement_id, "runner": _NAME}
            files.write_json(pod.path / files.SPEC, doc)

    async def _follow(self, pod: _Pod) -> None:
        """The Pod's log (followed) appended to output.log; a restart skips the lines already there."""
        self._write_spec(pod)
        out = pod.path / files.LOG
        skip = _lines(out)
        try:
            # One local append per log line, as the supervisors write theirs: nothing to wait on.
            with open(out, "a", encoding="utf-8") as sink:  # noqa: ASYNC230
                lines = self.client.log(pod.name, namespace=self.namespace, follow=True)
                async for line in lines:
                    if skip > 0:
                        skip -= 1
                        continue
                    sink.write(line if line.endswith("\n") else line + "\n")
                    sink.flush()
        except Exception as exc:  # not started yet, or the API server away: followed again at the next look
            log.info("Pod %s: its log stopped: %s", pod.name, exc)


def _pending_why(doc: dict[str, Any] | None) -> str:
    """What a Pending Pod's status says of its wait (a condition not met, a container waiting)."""
    status = (doc or {}).get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("reason"):
            return f"{condition['reason']}: {condition.get('message', '')}".rstrip(": ")
    waiting = (container_status(status).get("state") or {}).get("waiting") or {}
    if waiting.get("reason"):
        return f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    return "no reason given"


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0
