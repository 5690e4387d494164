"""The six services as the gateway calls them: one shared httpx client, streamed bodies both ways."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from services.gateway.domain.sse import SseEvent, SseParser

__all__ = ["UpstreamDown", "UpstreamRefused", "UpstreamResponse", "Upstreams", "create_client"]


class UpstreamDown(Exception):
    """A service could not be reached (refused, reset, timed out)."""

    def __init__(self, service: str, reason: str) -> None:
        super().__init__(f"{service}: {reason}")
        self.service = service
        self.reason = reason


class UpstreamRefused(Exception):
    """A service answered a gateway-made call (not a proxied one) with an error status."""

    def __init__(self, service: str, status: int) -> None:
        super().__init__(f"{service} answered {status}")
        self.service = service
        self.status = status


@dataclass(frozen=True, slots=True)
class UpstreamResponse:
    """A proxied response whose body is still to be read; ``close`` releases the connection."""

    status: int
    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes]
    close: Callable[[], Awaitable[None]]


def create_client(*, timeout_s: float) -> httpx.AsyncClient:
    """The one client every call shares (its pool is sized for one telemetry stream per browser tab)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
        limits=httpx.Limits(max_connections=2000, max_keepalive_connections=100),
        follow_redirects=False,
        trust_env=False,
    )


class Upstreams:
    """Calls to the services by name; a transport failure becomes UpstreamDown naming the service."""

    def __init__(self, *, client: httpx.AsyncClient, urls: Mapping[str, str]) -> None:
        self._client = client
        self._urls = dict(urls)

    def knows(self, service: str) -> bool:
        """Whether ``service`` is one the gateway proxies."""
        return service in self._urls

    async def open(
        self,
        *,
        service: str,
        method: str,
        path: str,
        query: str,
        headers: Sequence[tuple[str, str]],
        body: AsyncIterator[bytes] | None,
    ) -> UpstreamResponse:
        """Send a request with a streamed body; the answer's body streams too."""
        url = f"{self._urls[service]}/{path.lstrip('/')}" + (f"?{query}" if query else "")
        request = self._client.build_request(method, url, headers=list(headers), content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise UpstreamDown(service, type(exc).__name__) from exc
        return UpstreamResponse(
            status=response.status_code,
            headers=list(response.headers.multi_items()),
            body=_raw(response, service),
            close=response.aclose,
        )

    async def get_json(
        self, service: str, path: str, *, api_key: str, params: Mapping[str, str] | None = None
    ) -> Any:
        """A GET made with ``api_key``; its JSON body when 200, else UpstreamRefused."""
        try:
            response = await self._client.get(
                f"{self._urls[service]}{path}", params=params, headers={"X-API-Key": api_key}
            )
        except httpx.TransportError as exc:
            raise UpstreamDown(service, type(exc).__name__) from exc
        if response.status_code != 200:
            raise UpstreamRefused(service, response.status_code)
        return response.json()

    async def whoami(self, api_key: str) -> dict[str, Any] | None:
        """Who the scheduler says ``api_key`` is (key_id, tenant_id, role), or None for an unknown key."""
        try:
            found = await self.get_json("scheduler", "/v1/whoami", api_key=api_key)
        except UpstreamRefused as exc:
            if exc.status == 401:
                return None
            raise
        return dict(found)

    async def events(
        self, service: str, path: str, *, api_key: str, params: Mapping[str, str] | None = None
    ) -> AsyncIterator[SseEvent]:
        """The events of a service's Server-Sent Events stream, until it ends (UpstreamRefused if not 200)."""
        url = f"{self._urls[service]}{path}"
        headers = {"X-API-Key": api_key, "Accept": "text/event-stream"}
        timeout = httpx.Timeout(None, connect=5.0)  # a stream is read for as long as the browser stays
        try:
            async with self._client.stream("GET", url, params=params, headers=headers, timeout=timeout) as r:
                if r.status_code != 200:
                    raise UpstreamRefused(service, r.status_code)
                parser = SseParser()
                async for text in r.aiter_text():
                    for event in parser.feed(text):
                        yield event
        except httpx.TransportError as exc:
            raise UpstreamDown(service, type(exc).__name__) from exc


async def _raw(response: httpx.Response, service: str) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except httpx.TransportError as exc:
        raise UpstreamDown(service, type(exc).__name__) from exc
