"""The CSRF rule: unsafe methods echo the session's token (double submit), and no foreign Origin passes."""

from __future__ import annotations

import hmac

__all__ = ["UNSAFE_METHODS", "csrf_refusal", "origin_of", "origin_refusal"]

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, lower-cased, without a default port ('' when it has no scheme)."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep or not scheme:
        return ""
    scheme = scheme.lower()
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1].lower()
    if authority.startswith("["):  # an IPv6 literal keeps its brackets
        end = authority.find("]") + 1
        host, tail = authority[:end], authority[end:]
        port = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port = authority.partition(":")
    default = {"http": "80", "https": "443"}.get(scheme)
    return f"{scheme}://{host}" if port in ("", default) else f"{scheme}://{host}:{port}"


def origin_refusal(origin: str | None, *, allowed: frozenset[str]) -> str | None:
    """Why a request's ``Origin`` header is refused, or None (absent, or one of ``allowed``)."""
    if origin is None:
        return None
    if origin_of(origin) not in allowed:
        return f"origin {origin!r} is not this gateway's origin"
    return None


def csrf_refusal(*, method: str, presented: str | None, expected: str) -> str | None:
    """Why an unsafe request is refused for its ``X-CSRF-Token`` header, or None when it may pass."""
    if method.upper() not in UNSAFE_METHODS:
        return None
    if not presented:
        return "missing X-CSRF-Token header: send the csrf_token of the session"
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        return "X-CSRF-Token does not match the session's token"
    return None
