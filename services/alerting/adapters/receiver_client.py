"""HTTP to receivers: POST one signed notification request, and say what the receiver answered."""

from __future__ import annotations

import contextlib
import importlib
from types import TracebackType
from typing import Self

import httpx

from services.alerting.domain.outgoing import OutgoingRequest

__all__ = ["ReceiverClient"]

#: What httpx loads on its first request (its connection backend, the HTTP/1.1 parser): 40 ms of imports a
#: first page would otherwise wait for; loaded when the client opens instead.
_FIRST_REQUEST_MODULES = (
    "anyio._backends._asyncio",
    "anyio.streams.tls",
    "httpcore._backends.anyio",
    "httpcore._async.http11",
    "h11",
    "certifi",
)


class ReceiverClient:
    """One pooled HTTP client for every receiver; use it as `async with ReceiverClient(...) as client`."""

    def __init__(self, *, timeout_s: float, max_connections: int) -> None:
        limits = httpx.Limits(max_connections=max_connections)
        self._client = httpx.AsyncClient(timeout=timeout_s, limits=limits)

    async def __aenter__(self) -> Self:
        await self._client.__aenter__()
        for module in _FIRST_REQUEST_MODULES:
            with contextlib.suppress(ImportError):  # a later httpx may load others; this is only a warm-up
                importlib.import_module(module)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._client.__aexit__(exc_type, exc, traceback)

    async def send(self, request: OutgoingRequest) -> tuple[int | None, str | None, str | None]:
        """(status code, Retry-After header, error) of one attempt; no status when nothing answered."""
        try:
            response = await self._client.post(request.url, content=request.body, headers=request.headers)
        except httpx.HTTPError as exc:
            return None, None, f"{type(exc).__name__}: {exc}"[:500]
        error = None if response.is_success else f"HTTP {response.status_code}: {response.text[:200]}"
        return response.status_code, response.headers.get("retry-after"), error
