"""Tenant API: job arrays, many creation requests accepted together (Slurm's --array, Kueue's batches)."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Request, status
from fastapi.responses import JSONResponse

from libs.common.auth import Caller, tenant_filter
from libs.common.http.app import DocumentedBody
from libs.common.http.errors import NotFound, Unprocessable, error_responses
from services.scheduler.adapters.array_store import ArrayStore
from services.scheduler.api.access import ctx_of, submitting_tenant
from services.scheduler.api.errors import items_unprocessable, unprocessable
from services.scheduler.api.schemas import WorkloadArrayIn, WorkloadArrayOut
from services.scheduler.domain.errors import ItemsInvalid, ValidationError
from services.scheduler.service.arrays import submit_array

__all__ = ["ARRAYS_PATH", "IDEMPOTENCY_KEY", "router"]

router = APIRouter(tags=["workloads"])
#: Where arrays are submitted; the one scheduler path allowed a body over max_request_bytes.
ARRAYS_PATH = "/v1/workload-arrays"
#: The request header that makes a submission a retry of the one sent before under the same key.
IDEMPOTENCY_KEY = "Idempotency-Key"
_REPLAYED = {"description": "A retry: the array accepted before under this key and body, answered again."}
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=IDEMPOTENCY_KEY,
        min_length=1,
        max_length=255,
        description="Makes the request safe to retry: the same key and the same body bytes answer the "
        "array accepted first (200) without storing anything; the same key with another body is a 409.",
    ),
]


def _items(body: dict[str, Any]) -> list[Any]:
    unknown = sorted(set(body) - {"items"})
    if unknown:
        raise Unprocessable(f"{unknown[0]}: unknown field {unknown[0]!r}", field=unknown[0])
    items = body.get("items")
    if not isinstance(items, list):
        raise Unprocessable("items: a list of POST /v1/workloads bodies is required", field="items")
    return items


@router.post(
    ARRAYS_PATH,
    status_code=status.HTTP_201_CREATED,
    response_model=WorkloadArrayOut,
    responses={200: {**_REPLAYED, "model": WorkloadArrayOut}, **error_responses(403, 409, 429)},
)
async def create_workload_array(
    request: Request,
    caller: Caller,
    body: Annotated[dict[str, Any], Body(), DocumentedBody(WorkloadArrayIn)],
    idempotency_key: IdempotencyKey = None,
    tenant_id: str | None = None,
) -> JSONResponse:
    ctx = ctx_of(request)
    tenant = submitting_tenant(caller, tenant_id)
    items = _items(body)
    digest = hashlib.sha256(await request.body()).hexdigest()
    try:
        done = await submit_array(ctx, tenant=tenant, items=items, key=idempotency_key, body_sha256=digest)
    except ValidationError as exc:
        raise unprocessable(exc) from None
    except ItemsInvalid as exc:
        raise items_unprocessable(exc) from None
    code = status.HTTP_200_OK if done.replayed else status.HTTP_201_CREATED
    return JSONResponse(WorkloadArrayOut.body(done.array), status_code=code)


@router.get("/v1/workload-arrays/{array_id}", response_model=WorkloadArrayOut, responses=error_responses(404))
async def get_workload_array(array_id: str, request: Request, caller: Caller) -> JSONResponse:
    found = await ArrayStore(ctx_of(request).runtime.pool).array(array_id, tenant=tenant_filter(caller))
    if found is None:
        raise NotFound(f"no workload array {array_id!r}", field="array_id")
    return JSONResponse(WorkloadArrayOut.body(found))
