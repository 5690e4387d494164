"""The three-step creation path: open a draft, fill image, resources and network, then submit it."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, cast

from fastapi import APIRouter, Body, Path, Request, status

from libs.common.auth import Caller, tenant_filter
from libs.common.http.app import DocumentedBody
from libs.common.http.errors import Conflict, NotFound, Unprocessable, error_responses
from services.scheduler.adapters.draft_store import DraftStore
from services.scheduler.adapters.workload_store import WorkloadStore
from services.scheduler.api.access import ctx_of, submitting_tenant
from services.scheduler.api.errors import unprocessable
from services.scheduler.api.schemas import DRAFT_STEP_DOC, DraftIn, DraftOut, DraftStepIn, WorkloadOut
from services.scheduler.domain.creation import CreationDraft, CreationSpec, Step, apply_step, complete_draft
from services.scheduler.domain.errors import ValidationError
from services.scheduler.service.submission import submit

__all__ = ["router"]

router = APIRouter(prefix="/v1/workloads/drafts", tags=["drafts"])
_STEPS = ("image", "resources", "network")
_OPTIONS = frozenset(CreationSpec.model_fields) - set(_STEPS)


def _out(draft_id: str, tenant: str, draft: CreationDraft, workload_id: str | None) -> DraftOut:
    steps = draft.model_dump(mode="json")
    return DraftOut(
        draft_id=draft_id,
        tenant_id=tenant,
        steps=steps,
        missing=[s for s in _STEPS if steps[s] is None],
        workload_id=workload_id,
    )


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403))
async def open_draft(
    request: Request,
    caller: Caller,
    body: Annotated[DraftIn, Body()],
    tenant_id: str | None = None,
) -> DraftOut:
    tenant = submitting_tenant(caller, tenant_id)
    options = body.options.model_dump(mode="json", exclude_unset=True)
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise Unprocessable(f"unknown option {unknown[0]!r}", field=f"options.{unknown[0]}")
    draft = CreationDraft(options=options)
    draft_id = f"dr-{uuid.uuid4().hex[:16]}"
    await DraftStore(ctx_of(request).runtime.pool).insert_draft(
        draft_id=draft_id, tenant=tenant, body=draft.model_dump(mode="json")
    )
    return _out(draft_id, tenant, draft, None)


@router.get("/{draft_id}", responses=error_responses(404))
async def get_draft(draft_id: str, request: Request, caller: Caller) -> DraftOut:
    async with ctx_of(request).uow() as uow:
        row = await uow.drafts.draft(draft_id, tenant=tenant_filter(caller))
    if row is None:
        raise NotFound(f"no draft {draft_id!r}", field="draft_id")
    return _out(draft_id, row.tenant_id, CreationDraft.model_validate(row.body), row.workload_id)


@router.put("/{draft_id}/{step}", responses=error_responses(404, 409))
async def fill_step(
    draft_id: str,
    step: Annotated[str, Path(json_schema_extra={"enum": list(_STEPS)})],
    request: Request,
    caller: Caller,
    body: Annotated[dict[str, Any], Body(description=DRAFT_STEP_DOC), DocumentedBody(DraftStepIn)],
) -> DraftOut:
    if step not in _STEPS:
        raise Unprocessable(f"unknown step {step!r}; one of {', '.join(_STEPS)}", field="step")
    ctx = ctx_of(request)
    async with ctx.uow() as uow:
        store = uow.drafts
        row = await store.draft(draft_id, tenant=tenant_filter(caller))
        if row is None:
            raise NotFound(f"no draft {draft_id!r}", field="draft_id")
        if row.workload_id is not None:
            raise Conflict(f"draft {draft_id!r} was already submitted", field="draft_id")
        try:
            draft = apply_step(
                CreationDraft.model_validate(row.body),
                step=cast(Step, step),
                payload=body,
                catalog=ctx.catalog,
            )
        except ValidationError as exc:
            raise unprocessable(exc) from None
        await store.update_draft(draft_id, body=draft.model_dump(mode="json"), workload_id=None)
        await uow.commit()
    return _out(draft_id, row.tenant_id, draft, None)


@router.post(
    "/{draft_id}/submit", status_code=status.HTTP_201_CREATED, responses=error_responses(404, 409, 429)
)
async def submit_draft(draft_id: str, request: Request, caller: Caller) -> WorkloadOut:
    ctx = ctx_of(request)
    async with ctx.uow() as uow:
        store = uow.drafts
        row = await store.draft(draft_id, tenant=tenant_filter(caller))
        if row is None:
            raise NotFound(f"no draft {draft_id!r}", field="draft_id")
        if row.workload_id is not None:
            raise Conflict(f"draft {draft_id!r} was already submitted as {row.workload_id}", field="draft_id")
        try:
            spec = complete_draft(CreationDraft.model_validate(row.body), catalog=ctx.catalog)
            created = await submit(ctx, tenant=row.tenant_id, spec=spec)
        except ValidationError as exc:
            raise unprocessable(exc) from None
        await store.update_draft(draft_id, body=row.body, workload_id=created.workload_id)
        await uow.commit()
    found = await WorkloadStore(ctx.runtime.pool).workload(created.workload_id)
    assert found is not None
    return WorkloadOut.of(found)
