"""The client turns the services' error shape into a typed error with the exit code that names the problem."""

from __future__ import annotations

import httpx
import pytest

from libs.gpuctl.client import ApiClient, ExitCode, GpuctlError, error_from, exit_code_for
from libs.gpuctl.config import Context
from tests.unit.gpuctl.conftest import KEY, error


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, ExitCode.AUTH),
        (403, ExitCode.AUTH),
        (404, ExitCode.NOT_FOUND),
        (409, ExitCode.CONFLICT),
        (429, ExitCode.CONFLICT),
        (422, ExitCode.VALIDATION),
        (400, ExitCode.VALIDATION),
        (500, ExitCode.SERVER),
        (503, ExitCode.SERVER),
        (405, ExitCode.ERROR),
    ],
)
def test_each_error_status_maps_to_the_exit_code_that_names_it(status: int, code: ExitCode) -> None:
    assert exit_code_for(status) is code


def test_the_error_shape_gives_the_message_field_status_and_code() -> None:
    response = error(422, "validation_error", "pytorch has no version '9'", "image.version")
    failure = error_from(response, service="scheduler")
    assert (failure.message, failure.field, failure.status, failure.code) == (
        "pytorch has no version '9'",
        "image.version",
        422,
        "validation_error",
    )
    assert failure.exit_code is ExitCode.VALIDATION
    assert failure.line() == "error: image.version: pytorch has no version '9' (HTTP 422 validation_error)"


def test_a_message_that_already_names_its_field_is_not_prefixed_twice() -> None:
    failure = error_from(error(422, "validation_error", "bogus: Extra inputs", "bogus"), service="scheduler")
    assert failure.line() == "error: bogus: Extra inputs (HTTP 422 validation_error)"


def test_a_body_without_the_error_shape_still_gives_the_status_and_some_text() -> None:
    failure = error_from(httpx.Response(502, text="Bad Gateway from the proxy"), service="billing")
    assert failure.exit_code is ExitCode.SERVER
    assert failure.line() == "error: billing: Bad Gateway from the proxy (HTTP 502)"


def _client(handler: httpx.MockTransport | None = None, *, key: str | None = KEY) -> ApiClient:
    return ApiClient(context=Context(url="http://gpucloud.test", api_key=key), transport=handler)


def test_every_request_carries_the_key_and_drops_unset_parameters() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=[])

    _client(httpx.MockTransport(answer)).get("scheduler", "/v1/workloads", {"state": None, "all": True})
    assert seen[0].headers["x-api-key"] == KEY
    assert str(seen[0].url) == "http://gpucloud.test:8002/v1/workloads?all=true"


def test_an_unreachable_service_is_a_server_error_naming_where_it_was_looked_for() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(GpuctlError) as raised:
        _client(httpx.MockTransport(refuse)).get("billing", "/v1/costs")
    assert raised.value.exit_code is ExitCode.SERVER
    assert "cannot reach billing at http://gpucloud.test:8005" in raised.value.message


def test_without_a_key_nothing_is_sent_and_the_error_says_how_to_get_one() -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request without a key")

    with pytest.raises(GpuctlError) as raised:
        _client(httpx.MockTransport(never), key=None).get("scheduler", "/v1/workloads")
    assert raised.value.exit_code is ExitCode.AUTH
    assert "gpuctl login" in raised.value.message


def test_a_streamed_error_is_read_and_raised_with_its_field() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return error(422, "validation_error", "a project name is 1-63 characters", "project")

    with (
        pytest.raises(GpuctlError) as raised,
        _client(httpx.MockTransport(refuse)).stream("billing", "/v1/exports/x"),
    ):
        pass
    assert (raised.value.field, raised.value.exit_code) == ("project", ExitCode.VALIDATION)


def test_an_answer_that_is_not_json_is_a_server_error_not_a_crash() -> None:
    def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, text="<html>a proxy's login page</html>", headers={"content-type": "text/html"}
        )

    with pytest.raises(GpuctlError) as raised:
        _client(httpx.MockTransport(html)).get("telemetry", "/v1/gpus/latest")
    assert raised.value.exit_code is ExitCode.SERVER
    assert "not JSON (text/html)" in raised.value.message


def test_a_rule_file_is_read_as_text() -> None:
    def yaml_file(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="groups: []\n", headers={"content-type": "application/yaml"})

    assert _client(httpx.MockTransport(yaml_file)).get_text("alerting", "/v1/rules/export") == "groups: []\n"
