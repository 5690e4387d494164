"""Submit a task, get the result: a job submitted as ``POST /v1/workloads`` would, answered when it ends."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import pydantic
from fastapi import APIRouter, Body, Depends, Query, Request, Response, status
from pydantic import BaseModel, Field

from libs.common.auth import Caller, tenant_filter
from libs.common.http.app import DocumentedBody
from libs.common.http.errors import Unprocessable, error_responses
from libs.common.objectstore import ObjectStore
from services.scheduler.api.access import ctx_of, submitting_tenant
from services.scheduler.api.errors import unprocessable
from services.scheduler.api.results import Objects, Workloads, visible
from services.scheduler.domain.creation import CreationSpec, parse_spec
from services.scheduler.domain.errors import ValidationError
from services.scheduler.service.results import WorkloadReader
from services.scheduler.service.submission import submit
from services.scheduler.service.tasks import LOG_TAIL_LINES, EndWatch, TaskResult, task_result

__all__ = ["TaskIn", "TaskLinks", "TaskOut", "router", "watch_of"]

log = logging.getLogger(__name__)
router = APIRouter(tags=["tasks"])
MAX_WAIT_S = 300.0
DEFAULT_WAIT_S = 30.0
WaitSeconds = Annotated[float, Field(ge=0, le=MAX_WAIT_S)]
_WAIT = pydantic.TypeAdapter(WaitSeconds)


class TaskIn(CreationSpec):
    """A job's submission (``POST /v1/workloads``'s body; ``kind`` job, ``command`` required) and the wait."""

    wait_s: WaitSeconds = Field(
        default=DEFAULT_WAIT_S, description=f"Seconds to wait for the end, 0 to {MAX_WAIT_S:g}."
    )


class TaskLinks(BaseModel):
    """Where the task's workload, log and outputs are read."""

    workload: str
    logs: str
    outputs: str


class TaskOut(BaseModel):
    """A task's result once its job ended (200); while it runs (202) only its id, state and links."""

    workload_id: str
    state: str
    exit_reason: str | None = Field(description="succeeded, failed, oom_killed, time_limit, cancelled...")
    exit_code: int | None
    signal: int | None
    reason: str | None = Field(description="Why it ended, for people.")
    log_tail: str | None = Field(description=f"The log's last {LOG_TAIL_LINES} lines.")
    outputs: list[dict[str, Any]] | None = Field(description="The output manifest's files: path, size.")
    links: TaskLinks

    @classmethod
    def of(cls, result: TaskResult) -> TaskOut:
        """From a task's result."""
        base = f"/v1/workloads/{result.workload_id}"
        links = TaskLinks(workload=base, logs=f"{base}/logs", outputs=f"{base}/outputs")
        return cls(
            workload_id=result.workload_id,
            state=result.state,
            exit_reason=result.exit_reason,
            exit_code=result.exit_code,
            signal=result.signal,
            reason=result.reason,
            log_tail=result.log_tail,
            outputs=result.outputs,
            links=links,
        )


def watch_of(request: Request) -> EndWatch:
    """The process's waiters on workloads' ends."""
    watch: EndWatch = request.app.state.end_watch
    return watch


Watch = Annotated[EndWatch, Depends(watch_of)]
_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"description": "Not ended within wait_s: the same shape, result fields null; `Location` polls it."}
}


def _task_body(raw: dict[str, Any], *, request: Request) -> tuple[CreationSpec, float]:
    body = dict(raw)
    try:
        wait_s = _WAIT.validate_python(body.pop("wait_s", DEFAULT_WAIT_S))
    except pydantic.ValidationError as exc:
        raise Unprocessable(f"wait_s: {exc.errors()[0]['msg']}", field="wait_s") from None
    body.setdefault("kind", "job")
    if body["kind"] != "job":
        raise Unprocessable(f"kind: a task is a job, not {body['kind']!r}", field="kind")
    try:
        spec = parse_spec(body, catalog=ctx_of(request).catalog)
    except ValidationError as exc:
        raise unprocessable(exc) from None
    if not spec.command:
        raise Unprocessable("command: a task runs a command; give command (and args)", field="command")
    return spec, wait_s


async def _answer(
    response: Response,
    *,
    workload_id: str,
    tenant: str | None,
    wait_s: float,
    objects: ObjectStore,
    reader: WorkloadReader,
    watch: EndWatch,
) -> TaskOut:
    row = await reader.workload(workload_id, tenant=tenant)
    assert row is not None  # visible a moment ago; workloads are never deleted
    result = await task_result(objects, row)
    if not result.ended and wait_s > 0 and await watch.wait(workload_id, timeout_s=wait_s):
        row = await reader.workload(workload_id, tenant=tenant)
        assert row is not None
        result = await task_result(objects, row)
    return _accepted(response, result) if not result.ended else TaskOut.of(result)


def _accepted(response: Response, result: TaskResult) -> TaskOut:
    response.status_code = status.HTTP_202_ACCEPTED
    response.headers["Location"] = f"/v1/tasks/{result.workload_id}"
    return TaskOut.of(result)


@router.post("/v1/tasks", responses={**_RESPONSES, **error_responses(403, 409, 429)})
async def run_task(
    request: Request,
    response: Response,
    caller: Caller,
    objects: Objects,
    workloads: Workloads,
    watch: Watch,
    body: Annotated[dict[str, Any], Body(), DocumentedBody(TaskIn)],
    tenant_id: str | None = None,
) -> TaskOut:
    """Submit a job and wait up to ``wait_s`` for its result: 200 once it ended, else 202."""
    tenant = submitting_tenant(caller, tenant_id)
    spec, wait_s = _task_body(body, request=request)
    try:
        created = await submit(ctx_of(request), tenant=tenant, spec=spec)
    except ValidationError as exc:
        raise unprocessable(exc) from None
    try:
        return await _answer(
            response,
            workload_id=created.workload_id,
            tenant=tenant,
            wait_s=wait_s,
            objects=objects,
            reader=workloads,
            watch=watch,
        )
    except Exception:  # submitted: a 5xx would make the client retry and submit the job twice
        log.warning("task %s submitted, its result unread", created.workload_id, exc_info=True)
        return _accepted(
            response, TaskResult(workload_id=created.workload_id, state=created.state, ended=False)
        )


@router.get("/v1/tasks/{workload_id}", responses={**_RESPONSES, **error_responses(404)})
async def get_task(
    workload_id: str,
    response: Response,
    caller: Caller,
    objects: Objects,
    workloads: Workloads,
    watch: Watch,
    wait_s: Annotated[float, Query(ge=0, le=MAX_WAIT_S, description="Seconds to wait for the end.")] = 0,
) -> TaskOut:
    """A task's result (200) or, while it has not ended within ``wait_s``, its state (202)."""
    row = await visible(workloads, workload_id, caller)
    return await _answer(
        response,
        workload_id=row.workload_id,
        tenant=tenant_filter(caller),
        wait_s=wait_s,
        objects=objects,
        reader=workloads,
        watch=watch,
    )
