"""Schemathesis against each service's OpenAPI document, on the running app (real Postgres, Redis, broker).

Every operation is called with generated data as the admin, as tenant A and as tenant B (B names A where a
path or query names a tenant, and B's key is tried on A's seeded resources). Each response must not be a
5xx, must have a status code, content type and body the document declares, and no answer to B may carry
A's tenant id or the id of a resource A created, unless B's own request named it.

Bounded: ``MAX_EXAMPLES`` generated cases per operation and caller, derandomized, no shrinking (a failure
is recorded with the request that caused it instead, so one run reports every failing check).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode
from schemathesis.schemas import APIOperation as _APIOperation

from tests.integration.scheduler.helpers import spec
from tests.integration.support import (
    ADMIN_HEADERS,
    Isolation,
    eventually,
    key_works,
    provision_tenant,
    running,
)

# Hypothesis watches the global `random` while it draws a case; the app, serving on the event loop in the
# other thread meanwhile, draws from it (retry jitter), which Hypothesis takes for the strategy's doing.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)
MAX_EXAMPLES = 15
#: Cases per operation that break the schema on purpose (as the admin): each must be a 4xx, never a 5xx.
MAX_NEGATIVE = 5
BASE_URL = "http://service"
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
]
#: A path the tenant keys are known to work on once the service has learnt them, per service.
KEYED_PATH = {
    "inventory": "/v1/gpus",
    "scheduler": "/v1/workloads",
    "telemetry": "/v1/gpus/latest",
    "alerting": "/v1/rules",
    "billing": "/v1/balances",
    "recovery": "/v1/incidents",
}
#: Operations not fuzzed, each with the reason.
EXCLUDED = {
    # An endless server-sent event stream: the in-process transport waits for a body that never ends.
    "GET /v1/stream",
}
#: Settings every app gets: no rate limit in reach (the fuzzer sends hundreds of writes a second).
APIOperation = _APIOperation[Any, Any, Any, Any]
UNLIMITED = {
    "rate_limit_write_per_s": 100_000.0,
    "rate_limit_write_burst": 1_000_000,
    "rate_limit_read_per_s": 100_000.0,
    "rate_limit_read_burst": 1_000_000,
}


@dataclass
class Caller:
    name: str
    headers: dict[str, str]
    #: Path and query values fixed for this caller (B names A's tenant).
    fixed: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    """What one service's run did: requests, failures by check, and one example of each failure."""

    operations: int = 0
    requests: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    examples: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def fail(self, check: str, label: str, caller: str, detail: str) -> None:
        self.failures[check] += 1
        self.examples.setdefault((label, caller, check), detail[:1500])


@dataclass
class Tenants:
    a: str
    b: str
    a_headers: dict[str, str]
    b_headers: dict[str, str]
    #: What A created: path parameter name -> its values (and every value is one B must never see).
    seeded: dict[str, list[str]] = field(default_factory=dict)

    def secrets_of_a(self) -> list[str]:
        return [self.a, *(v for values in self.seeded.values() for v in values if len(v) >= 8)]


def _settings(service: str, iso: Isolation) -> Any:
    module = importlib.import_module(f"services.{service}.settings")
    cls = next(v for k, v in vars(module).items() if k.endswith("Settings") and k.lower().startswith(service))
    return iso.settings(cls, service, **UNLIMITED)


async def _tenants(service: str, iso: Isolation, client: httpx.AsyncClient) -> Tenants:
    token = secrets.token_hex(3)
    a, b = f"sta{token}", f"stb{token}"
    if service == "scheduler":  # the scheduler keeps tenants itself: its admin API creates them
        keys = []
        for tenant in (a, b):
            created = await client.post(
                "/v1/admin/tenants", json={"tenant_id": tenant, "name": tenant}, headers=ADMIN_HEADERS
            )
            assert created.status_code == 201, created.text
            keys.append(created.json()["key"]["api_key"])
    else:
        keys = [await provision_tenant(iso, tenant) for tenant in (a, b)]
    for key in keys:

        async def works(key: str = key) -> bool:
            return await key_works(client, key, KEYED_PATH[service])

        await eventually(works, what="tenant key")
    return Tenants(a=a, b=b, a_headers={"X-API-Key": keys[0]}, b_headers={"X-API-Key": keys[1]})


async def _created(response: Awaitable[httpx.Response], key: str) -> str:
    answer = await response
    assert answer.status_code in (200, 201), answer.text
    value: str = answer.json()[key]
    return value


async def _seed(service: str, client: httpx.AsyncClient, tenants: Tenants) -> None:
    """A's resources: a workload and a draft, a rule and a silence, a budget."""
    headers, seeded = tenants.a_headers, tenants.seeded
    if service == "scheduler":
        workload = client.post("/v1/workloads", json=spec(), headers=headers)
        seeded["workload_id"] = [await _created(workload, "workload_id")]
        draft = client.post("/v1/workloads/drafts", json={}, headers=headers)
        seeded["draft_id"] = [await _created(draft, "draft_id")]
    elif service == "alerting":
        rule = {
            "name": f"rule{tenants.a}",
            "metric": "fb_used_pct",
            "comparator": ">",
            "threshold": 90,
            "for": "5m",
            "matchers": [{"name": "node", "op": "=", "value": "node-1"}],
            "severity": "critical",
            "summary": "GPU memory above 90%",
        }
        seeded["name"] = [await _created(client.post("/v1/rules", json=rule, headers=headers), "name")]
        silence = {
            "matchers": [{"name": "alertname", "op": "=", "value": "GpuHot"}],
            "ends_at": "2999-01-01T00:00:00Z",
            "comment": "maintenance",
        }
        posted = client.post("/v1/silences", json=silence, headers=headers)
        seeded["silence_id"] = [await _created(posted, "id")]
    elif service == "billing":
        project = f"proj{tenants.a}"
        budget = {"tenant_id": tenants.a, "limit_micro": 1_000_000, "hard_stop": False}
        answer = await client.put(f"/v1/budgets/{project}", json=budget, headers=headers)
        assert answer.status_code == 200, answer.text
        seeded["project"] = [project]


def _callers(operation: APIOperation, tenants: Tenants) -> list[Caller]:
    names = {p.name for p in operation.iter_parameters() if p.location in ("path", "query")}
    names_tenant = {n for n in names if n in ("tenant", "tenant_id")}
    callers = [
        Caller("admin", dict(ADMIN_HEADERS)),
        Caller("tenant A", tenants.a_headers),
    ]
    if names_tenant or operation.method.upper() == "GET":
        callers.append(Caller("tenant B", tenants.b_headers, dict.fromkeys(names_tenant, tenants.a)))
    return callers


def _request_kwargs(case: Any) -> dict[str, Any]:
    """Schemathesis' serialized request, in httpx's terms."""
    raw = case.as_transport_kwargs(base_url=BASE_URL)
    kwargs: dict[str, Any] = {
        "method": raw["method"],
        "url": raw["url"],
        "headers": raw.get("headers") or {},
        "params": raw.get("params") or None,
        "cookies": raw.get("cookies") or None,
    }
    if "json" in raw:
        kwargs["json"] = raw["json"]
    elif isinstance(raw.get("data"), (bytes, str)):
        kwargs["content"] = raw["data"]
    elif raw.get("data") is not None:
        kwargs["data"] = raw["data"]
    return kwargs


class Fuzzer:
    """Runs hypothesis in a worker thread; each request goes to the app on the test's event loop."""

    def __init__(
        self, *, loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient, tenants: Tenants, run: Run
    ) -> None:
        self._loop, self._client, self._tenants, self.run = loop, client, tenants, run

    def send(self, kwargs: dict[str, Any]) -> httpx.Response:
        future = asyncio.run_coroutine_threadsafe(self._client.request(**kwargs), self._loop)
        return future.result(timeout=60)

    def check(self, case: Any, caller: Caller, label: str) -> None:
        kwargs = _request_kwargs(case)
        self.run.requests += 1
        try:
            response = self.send(kwargs)
        except Exception as exc:  # the app raised: a 500 the transport re-raised
            self.run.fail("not_a_server_error", label, caller.name, f"{kwargs!r}\n{exc!r}")
            return
        for check in CHECKS:
            try:
                case.validate_response(response, checks=[check])
            except (Exception, BaseExceptionGroup) as exc:  # a failed check raises a FailureGroup
                detail = f"{kwargs!r}\n-> {response.status_code} {response.text[:400]}\n{exc}"
                self.run.fail(check.__name__, label, caller.name, detail)
        if caller.name == "tenant B":
            self._no_leak(kwargs, response, label)

    def _no_leak(self, kwargs: dict[str, Any], response: httpx.Response, label: str) -> None:
        sent = json.dumps(kwargs, default=str)
        for value in self._tenants.secrets_of_a():
            if value in response.text and value not in sent:
                self.run.fail("cross_tenant", label, "tenant B", f"{kwargs!r}\n-> {response.text[:400]}")

    def fuzz(
        self, operation: APIOperation, caller: Caller, mode: GenerationMode = GenerationMode.POSITIVE
    ) -> None:
        label = f"{operation.method.upper()} {operation.path}"
        path_fixed = {k: v for k, v in caller.fixed.items() if _in(operation, k, "path")}
        query_fixed = {k: v for k, v in caller.fixed.items() if _in(operation, k, "query")}
        strategy = operation.as_strategy(
            mode,
            headers=caller.headers,
            path_parameters=path_fixed or None,
            query=query_fixed or None,
        )

        @hypothesis.settings(
            max_examples=MAX_EXAMPLES if mode is GenerationMode.POSITIVE else MAX_NEGATIVE,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @hypothesis.given(strategy)
        def each(case: Any) -> None:
            self.check(case, caller, label)

        try:
            each()
        except hypothesis.errors.Unsatisfiable:
            if mode is GenerationMode.POSITIVE:
                raise  # a negative case cannot be made for an operation that takes no input

    def probe_seeded(self, operation: APIOperation) -> None:
        """B's key on each of A's resources that this operation's path names."""
        params = [p.name for p in operation.iter_parameters() if p.location == "path"]
        if len(params) != 1 or params[0] not in self._tenants.seeded:
            return
        caller = Caller("tenant B", self._tenants.b_headers)
        for value in self._tenants.seeded[params[0]]:
            case = operation.Case(path_parameters={params[0]: value}, headers=caller.headers)
            self.check(case, caller, f"{operation.method.upper()} {operation.path} (A's {params[0]})")


def _in(operation: APIOperation, name: str, location: str) -> bool:
    return any(p.name == name and p.location == location for p in operation.iter_parameters())


def _report(service: str, run: Run, seconds: float) -> str:
    by_check = ", ".join(f"{k}={v}" for k, v in sorted(run.failures.items())) or "none"
    lines = [
        f"schemathesis {service}: {run.operations} operations, {run.requests} requests, "
        f"failures by check: {by_check}, {seconds:.1f}s"
    ]
    lines += [
        f"  {label} [{caller}] {check}:\n    {detail}"
        for (label, caller, check), detail in run.examples.items()
    ]
    return "\n".join(lines)


SERVICES = ("inventory", "scheduler", "telemetry", "alerting", "billing", "recovery")


@pytest.mark.parametrize("service", SERVICES)
async def test_every_operation_answers_within_its_schema_for_the_admin_and_two_tenants(
    service: str, isolation: Isolation, capsys: pytest.CaptureFixture[str]
) -> None:
    create_app: Callable[[Any], FastAPI] = importlib.import_module(f"services.{service}.app").create_app
    app = create_app(_settings(service, isolation))
    started = time.monotonic()
    async with running(app) as lifespan_client:
        tenants = await _tenants(service, isolation, lifespan_client)
        await _seed(service, lifespan_client, tenants)
        schema = schemathesis.openapi.from_dict(app.openapi())
        run = Run()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            fuzzer = Fuzzer(loop=asyncio.get_running_loop(), client=client, tenants=tenants, run=run)
            for result in schema.get_all_operations():
                operation = result.ok()  # type: ignore[union-attr]  # an invalid document raises here
                if f"{operation.method.upper()} {operation.path}" in EXCLUDED:
                    continue
                run.operations += 1
                for caller in _callers(operation, tenants):
                    await asyncio.to_thread(fuzzer.fuzz, operation, caller)
                admin = Caller("admin", dict(ADMIN_HEADERS))
                await asyncio.to_thread(fuzzer.fuzz, operation, admin, GenerationMode.NEGATIVE)
                await asyncio.to_thread(fuzzer.probe_seeded, operation)
    report = _report(service, run, time.monotonic() - started)
    with capsys.disabled():
        print("\n" + report)
    assert not run.failures, report


#: Routes that answer something other than JSON, and the media types their 200 must document.
NON_JSON = {
    ("inventory", "/metrics"): {"text/plain"},
    ("telemetry", "/metrics/gpus"): {"text/plain"},
    ("alerting", "/v1/rules/export"): {"application/yaml"},
    ("billing", "/v1/exports/{project}"): {
        "text/csv",
        "application/x-ndjson",
        "application/vnd.apache.parquet",
    },
}


@pytest.mark.parametrize(("service", "path"), sorted(NON_JSON))
def test_a_route_that_answers_text_csv_or_yaml_documents_that_media_type_not_json(
    service: str, path: str
) -> None:
    app: FastAPI = importlib.import_module(f"services.{service}.app").create_app()
    documented = app.openapi()["paths"][path]["get"]["responses"]["200"]["content"]
    assert set(documented) == NON_JSON[(service, path)]


async def test_a_body_that_is_not_utf8_is_a_422_naming_the_body_not_a_bare_400() -> None:
    app: FastAPI = importlib.import_module("services.scheduler.app").create_app()
    transport = httpx.ASGITransport(app=app)  # not started: the refusal comes before any store
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        headers = {**ADMIN_HEADERS, "content-type": "application/json"}
        response = await http.post("/v1/workloads", content=b"\x86\xf1Z", headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", "body")
    assert "UTF-8 JSON" in error["message"]
