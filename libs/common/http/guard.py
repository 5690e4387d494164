"""The edge guard every service's app runs first: body size and NUL characters, refused before any work.

A body over the limit answers 413 without being read in full (a declared ``Content-Length`` is refused
before a byte is read; a chunked body is counted as it streams and abandoned at the limit). A NUL
character, which PostgreSQL cannot store in text and which no name or value needs, answers 422 naming
where it was: the path parameter, the query parameter, or the JSON field (or the body, for a raw NUL byte).
The checks are substring searches; only a request that holds a NUL pays for finding its field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl

from fastapi.routing import iter_route_contexts
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from libs.common.http.errors import error_response

__all__ = ["RequestGuard"]

_JSON_NUL = b"\\u0000"


class RequestGuard:
    """Plain ASGI middleware: 413 for a body over ``max_body_bytes``, 422 for a NUL anywhere in the input.

    ``routes`` (the app's) let a NUL in the path be reported by the name of the path parameter.
    ``larger``: the few paths allowed a larger body (a job array, a fleet file), path -> limit; every
    other path keeps ``max_body_bytes``, so what an unauthenticated caller can make a service buffer
    stays small.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        routes: list[BaseRoute] | None = None,
        larger: Mapping[str, int] | None = None,
    ) -> None:
        self._app = app
        self._max = max_body_bytes
        self._larger = dict(larger or {})
        self._routes = routes or []
        self._templates: list[re.Pattern[str]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        field = self._nul_in_target(scope)
        if field is not None:
            await _nul_refusal(field)(scope, receive, send)
            return
        limit = self._larger.get(scope["path"], self._max)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _too_large(limit)(scope, receive, send)
            return
        if declared == 0:
            await self._app(scope, receive, send)
            return
        try:
            body = await _read_body(receive, limit)
        except _ClientGone:
            return
        if body is None:
            await _too_large(limit)(scope, receive, send)
            return
        field = _nul_in_body(body)
        if field is not None:
            await _nul_refusal(field)(scope, receive, send)
            return
        await self._app(scope, _replay(body, receive), send)

    def _nul_in_target(self, scope: Scope) -> str | None:
        """The path parameter or query parameter that holds a NUL, or None."""
        if "\x00" in scope["path"]:
            return self._path_parameter(scope)
        query: bytes = scope.get("query_string", b"")
        if b"%00" in query or b"\x00" in query:
            for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
                if "\x00" in name or "\x00" in value:
                    return _printable(name)
        return None

    def _path_parameter(self, scope: Scope) -> str:
        """The name of the path parameter holding the NUL (``path`` when no route template matches)."""
        if self._templates is None:  # built on the first such request, once every router is included
            paths = {c.path for c in iter_route_contexts(self._routes) if c.path}
            self._templates = [compile_path(path)[0] for path in sorted(paths)]
        for template in self._templates:
            match = template.match(scope["path"])
            if match is not None:
                for name, value in match.groupdict().items():
                    if "\x00" in value:
                        return name
        return "path"


class _ClientGone(Exception):
    """The client disconnected before its body was read: nothing to answer, nothing to run."""


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes the limit (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _too_large(limit: int) -> JSONResponse:
    return error_response(
        413,
        "payload_too_large",
        f"body: the request body is larger than the limit of {limit} bytes",
        field="body",
        details={"limit_bytes": limit},
    )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the body already read, then whatever the client sends next."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _nul_in_body(body: bytes) -> str | None:
    """The JSON field (dotted path) whose key or string holds a NUL, ``body`` for a raw NUL byte, or None."""
    if b"\x00" in body:
        return "body"
    if _JSON_NUL not in body:
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not JSON (or an escaped backslash before "u0000"): the route judges it
    return next(_nul_paths(document), None)


def _nul_paths(document: Any) -> Iterator[str]:
    """Dotted paths of the keys and strings holding a NUL, depth first (iterative: no recursion limit)."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                yield ".".join(path) or "body"
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                if "\x00" in key:
                    yield ".".join((*path, _printable(key)))
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, str(i)), item) for i, item in reversed(list(enumerate(value))))


def _printable(name: str) -> str:
    return name.replace("\x00", "\\u0000")


def _nul_refusal(field: str) -> JSONResponse:
    message = "must not contain a NUL character (\\u0000, %00)"
    return error_response(
        422,
        "validation_error",
        f"{field}: {message}",
        field=field,
        details=[{"field": field, "message": message}],
    )
