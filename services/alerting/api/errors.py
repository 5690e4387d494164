"""The one map from domain errors to HTTP: a domain object that refuses its fields is a 422."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from libs.common.auth import Principal
from libs.common.http import Forbidden, Unprocessable
from services.alerting.domain.matchers import Matcher
from services.alerting.domain.silences import confine_to_tenant

__all__ = ["confined", "domain_error"]


def domain_error(exc: ValidationError | ValueError, *, prefix: str = "") -> Unprocessable:
    """A 422 naming the first offending field."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        message = str(first["msg"]).removeprefix("Value error, ")
        return Unprocessable(f"{field}: {message}", field=f"{prefix}{field}" if field else prefix or None)
    return Unprocessable(str(exc), field=prefix or None)


def confined(caller: Principal, matchers: Iterable[Matcher]) -> tuple[Matcher, ...]:
    """A tenant's matchers (of a silence, a rule) narrowed to its own tenant; a 422 naming the matcher
    that reaches beyond it. An admin's stay as written."""
    if not caller.is_admin and not caller.tenant_id:
        raise Forbidden("this key belongs to no tenant", field="X-API-Key")
    try:
        return confine_to_tenant(matchers, None if caller.is_admin else caller.tenant_id)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise Unprocessable(str(exc), field=field if message else None) from None
