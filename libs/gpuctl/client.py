"""The HTTP client: the one place that turns the services' error shape into a typed error and an exit code.

Every service answers errors as ``{"error": {"status", "code", "message", "field", "details"}}``; a
``GpuctlError`` carries those parts and the exit code that says what went wrong, so a script can branch
on ``$?`` and a person reads the service's own message and the field it names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from libs.gpuctl.config import Context

__all__ = ["ApiClient", "ExitCode", "GpuctlError", "error_from", "exit_code_for"]

USER_AGENT = "gpuctl/0.1"


class ExitCode(IntEnum):
    """What ``$?`` says after a command (docs/cli.md lists them)."""

    OK = 0
    ERROR = 1  # anything else: a watch that timed out, an incident that escalated
    USAGE = 2  # a bad flag or argument, caught before any request
    AUTH = 3  # 401/403: no key, a wrong key, or a key that may not do this
    NOT_FOUND = 4  # 404
    CONFLICT = 5  # 409/429: the state forbids it now, or too many requests
    SERVER = 6  # 5xx, or the service could not be reached
    VALIDATION = 7  # 422 (and 400/413): the service refused a field


class GpuctlError(Exception):
    """A failed command: the message to print, the field it concerns and the exit code."""

    def __init__(
        self,
        message: str,
        *,
        exit_code: ExitCode = ExitCode.ERROR,
        field: str | None = None,
        status: int | None = None,
        code: str | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.field = field
        self.status = status
        self.code = code
        self.details = details

    def line(self) -> str:
        """One line for stderr: the field (unless the message starts with it), the message, the status."""
        text = self.message
        if self.field and not text.startswith(f"{self.field}:") and self.field not in ("context", "config"):
            text = f"{self.field}: {text}"
        if self.status is not None:
            text += f" (HTTP {self.status}{' ' + self.code if self.code else ''})"
        return f"error: {text}"


def exit_code_for(status: int) -> ExitCode:
    """The exit code an HTTP error status maps to."""
    if status in (401, 403):
        return ExitCode.AUTH
    if status == 404:
        return ExitCode.NOT_FOUND
    if status in (409, 429):
        return ExitCode.CONFLICT
    if status >= 500:
        return ExitCode.SERVER
    if status in (400, 413, 422):
        return ExitCode.VALIDATION
    return ExitCode.ERROR


def error_from(response: httpx.Response, *, service: str) -> GpuctlError:
    """The typed error of a failed response; a body without the error shape still gives its status."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    shape = body.get("error") if isinstance(body, dict) else None
    if isinstance(shape, dict) and isinstance(shape.get("message"), str):
        field = shape.get("field")
        return GpuctlError(
            shape["message"],
            exit_code=exit_code_for(status),
            field=field if isinstance(field, str) else None,
            status=status,
            code=shape.get("code") if isinstance(shape.get("code"), str) else None,
            details=shape.get("details"),
        )
    text = response.text.strip()[:200] or response.reason_phrase
    return GpuctlError(f"{service}: {text}", exit_code=exit_code_for(status), status=status)


class ApiClient:
    """Sync HTTP to the six services of one context, with its key on every request."""

    def __init__(
        self, *, context: Context, transport: httpx.BaseTransport | None = None, timeout_s: float = 30.0
    ) -> None:
        self._context = context
        headers = {"User-Agent": USER_AGENT}
        if context.api_key:
            headers["X-API-Key"] = context.api_key
        self._http = httpx.Client(headers=headers, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def url(self, service: str, path: str) -> str:
        """The absolute URL of ``path`` on ``service``."""
        return self._context.service_url(service) + path

    def get(self, service: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET and decode the JSON answer."""
        return self.request("GET", service, path, params=params)

    def get_text(self, service: str, path: str) -> str:
        """GET a body that is not JSON (a rule file), as text."""
        text: str = self.request("GET", service, path, text=True)
        return text

    def post(self, service: str, path: str, **kwargs: Any) -> Any:
        """POST (``json=``, ``content=``, ``params=``, ``headers=``) and decode the answer."""
        return self.request("POST", service, path, **kwargs)

    def put(self, service: str, path: str, **kwargs: Any) -> Any:
        """PUT and decode the answer."""
        return self.request("PUT", service, path, **kwargs)

    def delete(self, service: str, path: str, **kwargs: Any) -> Any:
        """DELETE (204 answers None)."""
        return self.request("DELETE", service, path, **kwargs)

    def request(
        self,
        method: str,
        service: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        text: bool = False,
    ) -> Any:
        """One request; a failed one raises GpuctlError with the service's message and field.

        The answer is its JSON (None for an empty body), or with ``text`` its body as text.
        """
        self._need_key()
        try:
            response = self._http.request(
                method,
                self.url(service, path),
                params=_clean(params),
                json=json,
                content=content,
                headers=headers,
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(service, exc) from None
        if response.is_error:
            raise error_from(response, service=service)
        if text:
            return response.text
        return _decoded(response, service=service)

    @contextmanager
    def stream(
        self, service: str, path: str, params: Mapping[str, Any] | None = None
    ) -> Iterator[httpx.Response]:
        """A streamed GET whose status was checked (the error body is read and raised)."""
        self._need_key()
        try:
            with self._http.stream("GET", self.url(service, path), params=_clean(params)) as response:
                if response.is_error:
                    response.read()
                    raise error_from(response, service=service)
                yield response
        except httpx.HTTPError as exc:
            raise self._unreachable(service, exc) from None

    def _need_key(self) -> None:
        if not self._context.api_key:
            raise GpuctlError(
                "no API key: run 'gpuctl login' or set GPUCTL_API_KEY",
                exit_code=ExitCode.AUTH,
                field="api_key",
            )

    def _unreachable(self, service: str, exc: httpx.HTTPError) -> GpuctlError:
        where = self._context.service_url(service)
        return GpuctlError(
            f"cannot reach {service} at {where}: {exc or type(exc).__name__}", exit_code=ExitCode.SERVER
        )


def _clean(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Query parameters without the unset ones; booleans as the services read them."""
    if params is None:
        return None
    return {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items() if v is not None}


def _decoded(response: httpx.Response, *, service: str) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        raise GpuctlError(
            f"{service} answered {response.status_code} with a body that is not JSON ({kind})",
            exit_code=ExitCode.SERVER,
        ) from None
