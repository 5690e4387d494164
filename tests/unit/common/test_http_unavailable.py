from __future__ import annotations

import asyncpg
import pytest
import redis.exceptions
from fastapi import FastAPI
from fastapi.testclient import TestClient

from libs.common.http import install_error_handlers

FAILURES: dict[str, Exception] = {
    "refused": ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
    "acquire-timeout": TimeoutError(),
    "starting-up": asyncpg.CannotConnectNowError("the database system is starting up"),
    "no-slots": asyncpg.TooManyConnectionsError("sorry, too many clients already"),
    "closed-mid-query": asyncpg.ConnectionDoesNotExistError(
        "connection was closed in the middle of operation"
    ),
    "redis-down": redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379."),
}


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/fail/{name}")
    async def fail(name: str) -> None:
        raise FAILURES[name]

    @app.get("/bug")
    async def bug() -> None:
        raise KeyError("not a store failure")

    return app


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_an_unreachable_store_answers_503_with_the_error_shape_and_retry_after(name: str) -> None:
    response = TestClient(_app()).get(f"/fail/{name}")
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "2"
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["status"] == 503
    assert error["code"] == "service_unavailable"
    assert "retry" in error["message"]
    assert error["details"] == {"error": type(FAILURES[name]).__name__}


def test_any_other_exception_stays_a_500() -> None:
    response = TestClient(_app(), raise_server_exceptions=False).get("/bug")
    assert response.status_code == 500
