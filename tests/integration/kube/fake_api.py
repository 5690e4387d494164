"""A small Kubernetes API server for Pods, served by uvicorn on a loopback port in the test's loop.

Pods list, create, get and delete (with a grace, recorded), a watch (JSON lines, resumable from a
resourceVersion) and each Pod's log (followed until the test ends it), with label and field selectors.
The test drives phases and container statuses, and the edges: a call answered with an error (once the
Pod is made, or instead), a Pod gone with no event (as a watch too old to resume misses it), every
watch dropped, and graceful deletions that end only when the test says. Every object it returns is
checked against the Kubernetes OpenAPI schema: a failure there is kept in ``invalid`` and fails the test.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import kubernetes_validate
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["KUBERNETES_VERSION", "FakeKubeApi"]

KUBERNETES_VERSION = "1.30.0"
_PODS = "/api/v1/namespaces/{namespace}/pods"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _matches(selector: str | None, values: dict[str, str]) -> bool:
    for term in filter(None, (selector or "").split(",")):
        key, _, want = term.partition("=")
        if values.get(key.rstrip("!=")) != want.lstrip("="):
            return False
    return True


class FakeKubeApi:
    """The Pods of one cluster in memory; ``url`` once started."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.deletions: list[tuple[str, int | None]] = []  # (name, gracePeriodSeconds)
        self.created: list[str] = []
        self.posted: list[str] = []  # the name of every Pod create asked for, answered or failed
        self.invalid: list[str] = []
        self._version = 0
        self._events: list[tuple[int, str, dict[str, Any]]] = []
        self._changed = asyncio.Condition()
        self._logs: dict[str, list[str]] = {}
        self._log_done: set[str] = set()
        self._failing: list[tuple[str, int, bool]] = []  # (method, code, after doing it)
        self._watch_epoch = 0
        self._compacted = 0  # watches from this version or older are answered 410 Gone
        self.hold_deletes = False  # a graceful deletion leaves the Pod terminating until finish()
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.url = ""
        self.app = Starlette(
            routes=[
                Route(_PODS, self._collection, methods=["GET", "POST"]),
                Route(_PODS + "/{name}", self._one, methods=["GET", "DELETE"]),
                Route(_PODS + "/{name}/log", self._log, methods=["GET"]),
            ]
        )

    async def start(self) -> None:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:  # noqa: ASYNC110 (uvicorn sets a flag, with no event to await)
            await asyncio.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        self._log_done.update(self._logs)
        async with self._changed:
            self._changed.notify_all()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            await self._task

    # -- what the test drives

    async def set_status(
        self, name: str, *, phase: str, namespace: str = "", reason: str | None = None, **container: Any
    ) -> None:
        """Give the Pod a phase (and a reason) and its container a state (running, terminated, waiting)."""
        pod = self._find(name, namespace)
        self._set(pod, phase=phase, reason=reason, container=container)
        await self._changed_pod("MODIFIED", pod)

    @staticmethod
    def _set(pod: dict[str, Any], *, phase: str, reason: str | None, container: dict[str, Any]) -> None:
        status: dict[str, Any] = {"phase": phase, "startTime": _now()}
        if reason is not None:
            status["reason"] = reason
        if container:
            status["containerStatuses"] = [
                {
                    "name": pod["spec"]["containers"][0]["name"],
                    "image": pod["spec"]["containers"][0]["image"],
                    "imageID": "",
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "containerID": f"containerd://{pod['metadata']['uid'][:12]}",
                    "state": container,
                }
            ]
        pod["status"] = status

    def fail_next(self, method: str, code: int, *, after: bool = False) -> None:
        """Answer the next ``method`` call on Pods with ``code`` (``after``: once it was done)."""
        self._failing.append((method, code, after))

    async def vanish(self, name: str) -> None:
        """Remove the Pod with no watch event (what a watch that could not resume never saw)."""
        pod = self._find(name, "")
        del self.pods[(pod["metadata"]["namespace"], name)]

    async def drop_watches(self) -> None:
        """End every open watch and forget the history, as an API server restart with a compacted store
        does: a watch resumed from an earlier version is answered 410 Gone, so its client lists again."""
        self._watch_epoch += 1
        self._compacted = self._version
        self._version += 1
        async with self._changed:
            self._changed.notify_all()

    async def finish(self, name: str, *, phase: str, **container: Any) -> None:
        """End a Pod held terminating: its final status, then its deletion (one DELETED event)."""
        pod = self._find(name, "")
        self._set(pod, phase=phase, reason=None, container=container)  # told by the DELETED event alone
        del self.pods[(pod["metadata"]["namespace"], name)]
        await self._changed_pod("DELETED", pod)

    def write_log(self, name: str, text: str) -> None:
        self._logs.setdefault(name, []).extend(text.splitlines(keepends=True))

    async def end_log(self, name: str) -> None:
        self._log_done.add(name)
        async with self._changed:
            self._changed.notify_all()

    async def put(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """A Pod made by someone else (an orphan, say)."""
        return await self._create(manifest["metadata"]["namespace"], copy.deepcopy(manifest))

    def named(self, name: str) -> dict[str, Any] | None:
        return next((p for (_, n), p in self.pods.items() if n == name), None)

    # -- the API

    def _failure(self, method: str, *, after: bool) -> Response | None:
        for i, (what, code, late) in enumerate(self._failing):
            if what == method and late == after:
                del self._failing[i]
                return self._status(
                    code, "InternalError" if code >= 500 else "Refused", f"told to fail ({code})"
                )
        return None

    async def _collection(self, request: Request) -> Response:
        namespace = request.path_params["namespace"]
        if request.method == "POST":
            doc = await request.json()
            self.posted.append(doc["metadata"]["name"])
            if (failed := self._failure("POST", after=False)) is not None:
                return failed
            if any(k == (namespace, doc["metadata"]["name"]) for k in self.pods):
                return self._status(409, "AlreadyExists", f"pods {doc['metadata']['name']!r} already exists")
            made = await self._create(namespace, doc)
            return self._failure("POST", after=True) or self._json(made, status=201)
        labels, fields = request.query_params.get("labelSelector"), request.query_params.get("fieldSelector")
        if request.query_params.get("watch") in ("true", "1"):
            since = int(request.query_params.get("resourceVersion") or self._version)
            if since <= self._compacted:
                gone = self._status_doc(410, "Expired", f"too old resource version: {since}")
                return Response(json.dumps({"type": "ERROR", "object": gone}) + "\n")
            return StreamingResponse(self._watch(namespace, labels, fields, since))
        items = [
            p for (ns, _), p in self.pods.items() if ns == namespace and self._selected(p, labels, fields)
        ]
        listing = {
            "apiVersion": "v1",
            "kind": "PodList",
            "metadata": {"resourceVersion": str(self._version)},
            "items": items,
        }
        return self._json(listing)

    async def _one(self, request: Request) -> Response:
        key = (request.path_params["namespace"], request.path_params["name"])
        pod = self.pods.get(key)
        if pod is None:
            return self._status(404, "NotFound", f"pods {key[1]!r} not found")
        if request.method == "GET":
            return self._json(pod)
        if (failed := self._failure("DELETE", after=False)) is not None:
            return failed
        grace = request.query_params.get("gracePeriodSeconds")
        self.deletions.append((key[1], None if grace is None else int(grace)))
        if grace != "0" and pod.get("status", {}).get("phase") == "Running":
            pod["metadata"]["deletionTimestamp"] = _now()
            spec_grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
            pod["metadata"]["deletionGracePeriodSeconds"] = spec_grace if grace is None else int(grace)
            await self._changed_pod("MODIFIED", pod)
            if self.hold_deletes:
                return self._json(pod)
        del self.pods[key]
        await self._changed_pod("DELETED", pod)
        return self._json(pod)

    async def _log(self, request: Request) -> Response:
        name = request.path_params["name"]
        if (request.path_params["namespace"], name) not in self.pods:
            return self._status(404, "NotFound", f"pods {name!r} not found")
        follow = request.query_params.get("follow") in ("true", "True", "1")
        return StreamingResponse(self._follow(name, follow), media_type="text/plain")

    async def _follow(self, name: str, follow: bool) -> AsyncIterator[bytes]:
        sent = 0
        while True:
            lines = self._logs.get(name, [])
            for line in lines[sent:]:
                yield line.encode()
            sent = len(lines)
            if not follow or name in self._log_done:
                return
            async with self._changed:
                await self._changed.wait()

    async def _watch(
        self, namespace: str, labels: str | None, fields: str | None, since: int
    ) -> AsyncIterator[bytes]:
        epoch = self._watch_epoch
        while True:
            if epoch != self._watch_epoch:
                return
            for version, kind, pod in list(self._events):
                if version > since:
                    since = version
                    ns = pod["metadata"]["namespace"]
                    if ns == namespace and self._selected(pod, labels, fields):
                        yield (json.dumps({"type": kind, "object": self._checked(pod)}) + "\n").encode()
            if self._server is not None and self._server.should_exit:
                return
            async with self._changed:
                if (self._events and self._events[-1][0] > since) or epoch != self._watch_epoch:
                    continue
                await self._changed.wait()

    # -- the store

    async def _create(self, namespace: str, doc: dict[str, Any]) -> dict[str, Any]:
        meta = doc.setdefault("metadata", {})
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=_now())
        doc["status"] = {"phase": "Pending"}
        self.pods[(namespace, meta["name"])] = doc
        self.created.append(meta["name"])
        await self._changed_pod("ADDED", doc)
        return doc

    async def _changed_pod(self, kind: str, pod: dict[str, Any]) -> None:
        self._version += 1
        pod["metadata"]["resourceVersion"] = str(self._version)
        self._events.append((self._version, kind, copy.deepcopy(pod)))
        async with self._changed:
            self._changed.notify_all()

    def _find(self, name: str, namespace: str) -> dict[str, Any]:
        pod = self.named(name) if not namespace else self.pods.get((namespace, name))
        if pod is None:
            raise KeyError(f"no Pod {name!r}")
        return pod

    @staticmethod
    def _selected(pod: dict[str, Any], labels: str | None, fields: str | None) -> bool:
        meta = pod["metadata"]
        values = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "spec.nodeName": pod["spec"].get("nodeName", ""),
            "status.phase": pod.get("status", {}).get("phase", ""),
        }
        return _matches(labels, meta.get("labels") or {}) and _matches(fields, values)

    def _checked(self, doc: dict[str, Any]) -> dict[str, Any]:
        if doc.get("kind") == "Status":
            return doc  # kubernetes-validate ships no schema for it
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            first = str(exc).splitlines()[0]  # the rest is the whole schema
            self.invalid.append(f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}: {first}")
        return doc

    def _json(self, doc: dict[str, Any], *, status: int = 200) -> Response:
        if doc.get("kind") == "PodList":
            for item in doc["items"]:
                self._checked({"apiVersion": "v1", "kind": "Pod", **item})
        self._checked(doc)
        return JSONResponse(doc, status_code=status)

    def _status(self, code: int, reason: str, message: str) -> Response:
        return self._json(self._status_doc(code, reason, message), status=code)

    @staticmethod
    def _status_doc(code: int, reason: str, message: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
