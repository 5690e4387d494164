"""The checks every /api route makes: the Origin header, the session cookie, and the CSRF token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Response

from libs.common.http.errors import Unauthorized
from services.gateway.api.errors import CsrfRefused
from services.gateway.domain.csrf import csrf_refusal, origin_of, origin_refusal
from services.gateway.domain.session import Session
from services.gateway.service.context import GatewayContext

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "Authenticated",
    "Current",
    "clear_cookies",
    "context_of",
    "same_origin",
    "set_cookies",
]

SESSION_COOKIE = "gpucloud_session"
CSRF_COOKIE = "gpucloud_csrf"
CSRF_HEADER = "X-CSRF-Token"


def context_of(request: Request) -> GatewayContext:
    """The gateway's shared state."""
    context: GatewayContext = request.app.state.gateway
    return context


def same_origin(request: Request) -> None:
    """403 for a request whose Origin header names another site (or ``null``)."""
    web = context_of(request).web
    own = origin_of(web.public_origin) if web.public_origin else origin_of(str(request.base_url))
    why = origin_refusal(request.headers.get("origin"), allowed=frozenset({own}))
    if why is not None:
        raise CsrfRefused(why, field="Origin")


@dataclass(frozen=True, slots=True)
class Current:
    """The caller's session and the cookie token it was found by."""

    token: str
    session: Session


async def authenticated(request: Request, _: Annotated[None, Depends(same_origin)]) -> Current:
    """The caller's live session (401 otherwise); an unsafe method must also echo its CSRF token (403)."""
    token = request.cookies.get(SESSION_COOKIE)
    session = await context_of(request).sessions.current(token)
    if token is None or session is None:
        raise Unauthorized("no session: log in with POST /api/session", field=SESSION_COOKIE)
    why = csrf_refusal(
        method=request.method, presented=request.headers.get(CSRF_HEADER), expected=session.csrf_token
    )
    if why is not None:
        raise CsrfRefused(why, field=CSRF_HEADER)
    return Current(token=token, session=session)


Authenticated = Annotated[Current, Depends(authenticated)]


def set_cookies(response: Response, *, token: str, session: Session, secure: bool, ttl_s: float) -> None:
    """The session cookie (HttpOnly) and the CSRF cookie (readable by the console's script)."""
    for name, value, http_only in ((SESSION_COOKIE, token, True), (CSRF_COOKIE, session.csrf_token, False)):
        response.set_cookie(
            name, value, max_age=int(ttl_s), path="/", secure=secure, httponly=http_only, samesite="strict"
        )


def clear_cookies(response: Response, *, secure: bool) -> None:
    """Both cookies, expired."""
    for name, http_only in ((SESSION_COOKIE, True), (CSRF_COOKIE, False)):
        response.delete_cookie(name, path="/", secure=secure, httponly=http_only, samesite="strict")
