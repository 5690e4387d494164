"""Which headers cross the gateway: hop-by-hop ones never do, nor the browser's credentials."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["HOP_BY_HOP", "request_headers", "response_headers"]

#: RFC 9110 section 7.6.1 connection-specific headers, plus the old Keep-Alive and Proxy-Connection.
HOP_BY_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "transfer-encoding", "upgrade",
    }
)  # fmt: skip
#: The browser's credentials and what only the gateway may set: the session becomes X-API-Key.
_REQUEST_DROPPED = frozenset({"host", "cookie", "authorization", "x-api-key", "x-csrf-token"})
#: A service may not set cookies on the console's origin.
_RESPONSE_DROPPED = frozenset({"set-cookie"})


def _named_by_connection(headers: Iterable[tuple[str, str]]) -> frozenset[str]:
    named = set()
    for name, value in headers:
        if name.lower() == "connection":
            named |= {token.strip().lower() for token in value.split(",") if token.strip()}
    return frozenset(named)


def _kept(headers: list[tuple[str, str]], dropped: frozenset[str]) -> list[tuple[str, str]]:
    gone = HOP_BY_HOP | dropped | _named_by_connection(headers)
    return [(name, value) for name, value in headers if name.lower() not in gone]


def request_headers(headers: Iterable[tuple[str, str]], *, api_key: str) -> list[tuple[str, str]]:
    """The browser's headers as a service receives them: its credentials gone, the session's key set."""
    return [*_kept(list(headers), _REQUEST_DROPPED), ("x-api-key", api_key)]


def response_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """A service's response headers as the browser receives them (Content-Type, Content-Disposition...)."""
    return _kept(list(headers), _RESPONSE_DROPPED)
