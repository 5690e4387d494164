"""The layering check itself: it catches what it is for, and names the file and the import."""

from __future__ import annotations

from pathlib import Path

from tests.unit.architecture.layers import check_service_tree


def _service(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "services" / "shop"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _messages(root: Path) -> list[str]:
    return [str(v) for v in check_service_tree(root)]


def test_a_domain_module_importing_asyncpg_is_refused_naming_file_and_import(tmp_path: Path) -> None:
    root = _service(tmp_path, {"domain/__init__.py": "", "domain/rules.py": "import asyncpg\n"})
    [message] = _messages(root)
    assert message.endswith("domain/rules.py:1: import asyncpg (the domain imports only the standard "
                            "library, pydantic, promql_parser and itself, not asyncpg)")  # fmt: skip


def test_a_service_importing_another_service_is_refused(tmp_path: Path) -> None:
    source = "from services.billing.domain.prices import Price\n"
    root = _service(tmp_path, {"service/__init__.py": "", "service/handlers.py": source})
    [message] = _messages(root)
    assert "service/handlers.py:1: import services.billing.domain.prices" in message
    assert "a service never imports another service (services.billing)" in message


def test_a_domain_module_reading_the_clock_or_making_ids_is_refused(tmp_path: Path) -> None:
    source = "import datetime\nimport uuid\nx = datetime.datetime.now()\ny = uuid.uuid4()\n"
    root = _service(tmp_path, {"domain/__init__.py": "", "domain/clock.py": source})
    messages = _messages(root)
    assert any("import uuid (the domain is pure: no uuid)" in m for m in messages)
    assert any("domain/clock.py:3: call now() (the domain reads no clock)" in m for m in messages)
    assert any("domain/clock.py:4: call uuid4() (the domain makes no fresh ids)" in m for m in messages)


def test_a_relative_import_of_a_higher_layer_is_refused(tmp_path: Path) -> None:
    files = {
        "adapters/__init__.py": "",
        "adapters/store.py": "from ..service import handlers\n",
        "service/__init__.py": "",
        "service/handlers.py": "",
    }
    [message] = _messages(_service(tmp_path, files))
    assert "adapters/store.py:1: import services.shop.service" in message
    assert "the adapters layer may not import the service layer" in message


def test_only_adapters_touch_drivers_and_only_the_api_knows_http(tmp_path: Path) -> None:
    files = {
        "service/__init__.py": "",
        "service/loop.py": "import redis.asyncio\n",
        "adapters/__init__.py": "",
        "adapters/cache.py": "import redis.asyncio\nfrom fastapi import Request\n",
        "api/__init__.py": "",
        "api/routes.py": "from fastapi import APIRouter\n",
    }
    messages = _messages(_service(tmp_path, files))
    assert len(messages) == 2
    assert any("service/loop.py:1: import redis.asyncio (only adapters" in m for m in messages)
    assert any("adapters/cache.py:2: import fastapi (only the api layer" in m for m in messages)


def test_a_new_module_outside_every_layer_is_refused_by_where_it_lives(tmp_path: Path) -> None:
    root = _service(tmp_path, {"app.py": "", "helpers.py": "", "stuff/__init__.py": ""})
    messages = _messages(root)
    assert any("helpers.py:1: module outside every layer" in m for m in messages)
    assert any("stuff:1: folder outside every layer" in m for m in messages)
    assert not any("app.py" in m for m in messages)


def test_a_module_that_keeps_the_rules_passes(tmp_path: Path) -> None:
    files = {
        "domain/__init__.py": "",
        "domain/rules.py": "from datetime import datetime\nfrom pydantic import BaseModel\nfrom . import x\n",
        "domain/x.py": "",
        "api/__init__.py": "",
        "api/routes.py": "from fastapi import APIRouter\nfrom services.shop.service import loop\n",
        "service/__init__.py": "",
        "service/loop.py": "from services.shop.adapters import store\nfrom libs.common.db import uow\n",
        "adapters/__init__.py": "",
        "adapters/store.py": "import asyncpg\nfrom services.shop.domain import rules\n",
    }
    assert _messages(_service(tmp_path, files)) == []
