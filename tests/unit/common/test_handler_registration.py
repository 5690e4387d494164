from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from mypy import api as mypy_api

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.events.platform import ApiKeyRevokedV1, TenantCreatedV1

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True, slots=True)
class _Deps:
    name: str


async def _on_tenant_created(event: TenantCreatedV1, ctx: HandlerContext[_Deps]) -> None:
    pass


async def _on_api_key_revoked(event: ApiKeyRevokedV1, ctx: HandlerContext[_Deps]) -> None:
    pass


def test_registering_a_second_handler_for_one_event_type_is_refused() -> None:
    handlers = Handlers(_Deps(name="x")).on(TenantCreatedV1, _on_tenant_created)

    with pytest.raises(ValueError, match="TenantCreatedV1 has a handler already"):
        handlers.on(TenantCreatedV1, _on_tenant_created)


def test_the_runner_facing_table_holds_each_registered_handler_by_its_event_type() -> None:
    deps = _Deps(name="x")

    handlers = Handlers(deps).on(TenantCreatedV1, _on_tenant_created).on(ApiKeyRevokedV1, _on_api_key_revoked)

    assert dict(handlers.table) == {TenantCreatedV1: _on_tenant_created, ApiKeyRevokedV1: _on_api_key_revoked}
    assert handlers.deps is deps


_PRELUDE = """\
from dataclasses import dataclass

from libs.common.bus.handlers import HandlerContext, Handlers
from libs.common.db.uow import PostgresUnitOfWork
from libs.common.events.platform import ApiKeyRevokedV1, TenantCreatedV1


@dataclass(frozen=True)
class Deps:
    name: str


class StoresUow(PostgresUnitOfWork):
    @property
    def names(self) -> list[str]:
        return []


class OtherDeps:
    pass


async def on_tenant_created(event: TenantCreatedV1, ctx: HandlerContext[Deps]) -> None:
    print(event.tenant_id, ctx.deps.name)


async def on_plain_tenant_created(event: TenantCreatedV1, ctx: HandlerContext) -> None:
    print(event.tenant_id, ctx.envelope.id)


async def on_tenant_created_with_stores(
    event: TenantCreatedV1, ctx: HandlerContext[Deps, StoresUow]
) -> None:
    print(event.tenant_id, ctx.uow.names)


"""
#: One registration per module: the name says whether mypy must accept it.
_CASES = {
    "right_deps": "Handlers(Deps(name='x')).on(TenantCreatedV1, on_tenant_created)",
    "right_no_deps": "Handlers(None).on(TenantCreatedV1, on_plain_tenant_created)",
    "wrong_event": "Handlers(Deps(name='x')).on(ApiKeyRevokedV1, on_tenant_created)",
    "wrong_deps": "Handlers(OtherDeps()).on(TenantCreatedV1, on_tenant_created)",
    "deps_for_a_handler_without": "Handlers(Deps(name='x')).on(TenantCreatedV1, on_plain_tenant_created)",
    "right_uow": "Handlers(Deps(name='x'), uow=StoresUow).on(TenantCreatedV1, on_tenant_created_with_stores)",
    "uow_not_opened": "Handlers(Deps(name='x')).on(TenantCreatedV1, on_tenant_created_with_stores)",
}


@pytest.mark.slow
def test_mypy_rejects_a_handler_registered_for_another_event_type_other_deps_or_another_uow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, registration in _CASES.items():
        (tmp_path / f"{name}.py").write_text(_PRELUDE + textwrap.dedent(registration) + "\n")
    monkeypatch.chdir(ROOT)  # so `libs` resolves and the project's mypy settings apply

    report, errors, _ = mypy_api.run(
        [
            "--strict",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--no-error-summary",
            *(str(tmp_path / f"{name}.py") for name in _CASES),
        ]
    )

    assert errors == ""
    lines = [line for line in report.splitlines() if ": error:" in line]
    assert all('Argument 2 to "on" of "Handlers"' in line for line in lines), report
    assert {Path(line.split(":", 1)[0]).stem for line in lines} == {
        "wrong_event",
        "wrong_deps",
        "deps_for_a_handler_without",
        "uow_not_opened",
    }, report
