"""POST, GET and DELETE /api/session: log in with an API key, see the session, log out."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from libs.common.http.errors import error_responses
from services.gateway.api.access import Authenticated, clear_cookies, context_of, same_origin, set_cookies

__all__ = ["router"]

router = APIRouter(tags=["session"])


class LoginIn(BaseModel):
    """An API key to open a browser session with."""

    model_config = ConfigDict(extra="forbid")

    api_key: str = Field(min_length=1, max_length=512, description="A tenant's API key or the admin key.")


class SessionOut(BaseModel):
    """The browser's session (the key itself never comes back)."""

    tenant_id: str | None = Field(description="The key's tenant; null for the admin key.")
    role: Literal["tenant", "admin"]
    key_id: str
    csrf_token: str = Field(description="Echo it in X-CSRF-Token on every POST, PUT, PATCH and DELETE.")
    expires_at: datetime


@router.post(
    "/api/session",
    dependencies=[Depends(same_origin)],
    responses=error_responses(401, 403, 422),
)
async def login(body: LoginIn, request: Request, response: Response) -> SessionOut:
    context = context_of(request)
    token, session = await context.sessions.login(body.api_key.strip())
    secure = context.web.secure_cookies
    set_cookies(response, token=token, session=session, secure=secure, ttl_s=context.sessions.ttl_s)
    response.headers["Cache-Control"] = "no-store"
    return SessionOut.model_validate(session.public())


@router.get("/api/session", responses=error_responses(401, 403))
async def current(current: Authenticated, response: Response) -> SessionOut:
    response.headers["Cache-Control"] = "no-store"
    return SessionOut.model_validate(current.session.public())


@router.delete("/api/session", status_code=204, responses=error_responses(401, 403))
async def logout(current: Authenticated, request: Request) -> Response:
    context = context_of(request)
    await context.sessions.logout(current.token)
    response = Response(status_code=204)
    clear_cookies(response, secure=context.web.secure_cookies)
    return response
