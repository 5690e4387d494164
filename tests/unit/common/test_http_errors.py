from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from libs.common.http import Conflict, NotFound, install_error_handlers


class Body(BaseModel):
    count: int = Field(ge=1)
    name: str


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/things")
    async def create(body: Body) -> dict[str, int]:
        if body.name == "taken":
            raise Conflict("thing 'taken' exists", field="name")
        return {"count": body.count}

    @app.get("/things/{thing_id}")
    async def get(thing_id: str) -> None:
        raise NotFound(f"no thing {thing_id!r}")

    return app


def test_validation_error_is_422_naming_the_field() -> None:
    response = TestClient(_app()).post("/things", json={"count": 0, "name": "x"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "count"
    assert error["code"] == "validation_error"
    assert error["message"].startswith("count:")


def test_domain_errors_keep_their_status_code_and_field() -> None:
    client = TestClient(_app())
    conflict = client.post("/things", json={"count": 1, "name": "taken"})
    assert conflict.status_code == 409
    assert conflict.json()["error"] == {
        "status": 409,
        "code": "conflict",
        "message": "thing 'taken' exists",
        "field": "name",
        "details": None,
    }
    missing = client.get("/things/x")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_unknown_route_uses_the_same_error_shape() -> None:
    response = TestClient(_app()).get("/nowhere")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
