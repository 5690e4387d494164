"""A real Prometheus (Debian's 2.42) scraping the whole stack with deploy/prometheus/prometheus.yml finds a
series for every query of every shipped dashboard and of NVIDIA's DCGM dashboard; promtool finds nothing in
any exposition that docs/telemetry.md does not list with its reason."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from libs.common.settings import DEV_ADMIN_KEY
from libs.devkit.broker import free_port
from tests.integration.flows.journey import job
from tests.integration.flows.suite import SERVICES, Suite, fleet_gpus, running_suite
from tests.integration.support import ADMIN_HEADERS, Isolation, eventually
from tests.integration.telemetry import dashboards

CONFIG = dashboards.ROOT / "deploy" / "prometheus" / "prometheus.yml"
DOCS = dashboards.ROOT / "docs" / "telemetry.md"
A100 = {"kind": "gpu", "model": "A100-80GB", "count": 1}
XID_GPU, LOST_GPU = fleet_gpus()["fa-l4a"][0], fleet_gpus()["fa-l4b"][1]  # free: the job runs on an A100


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        reason = f"{name} is not installed (`make promtools` installs Debian's prometheus)"
        if os.environ.get("CI"):
            pytest.fail(reason + ", and CI must run this test")
        pytest.skip(reason)
    return found


@dataclass
class Prometheus:
    """A Prometheus process on a free port and a client of its HTTP API."""

    url: str
    http: httpx.AsyncClient

    async def get(self, path: str, **params: Any) -> Any:
        response = await self.http.get(self.url + path, params=params)
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    async def label_values(self, label: str, selector: str | None) -> list[str]:
        params = {"match[]": selector} if selector else {}
        return list(await self.get(f"/api/v1/label/{label}/values", **params))

    async def targets_up(self) -> list[str] | None:
        """Every scrape job, once each has a target that is up; None until then (or while it starts)."""
        try:
            active = (await self.get("/api/v1/targets"))["activeTargets"]
        except httpx.HTTPError:
            return None
        jobs = {t["labels"]["job"] for t in active}
        up = {t["labels"]["job"] for t in active if t["health"] == "up"}
        return sorted(jobs) if active and up == jobs else None


def _config(suite: Suite, key_file: Path) -> dict[str, Any]:
    """The shipped scrape config, aimed at this stack: each target's port is its service's here."""
    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    config["global"] |= {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    for job_config in config["scrape_configs"]:
        for static in job_config["static_configs"]:
            static["targets"] = [f"127.0.0.1:{suite.stack.port(t.split(':')[0])}" for t in static["targets"]]
        if "authorization" in job_config:
            job_config["authorization"]["credentials_file"] = str(key_file)
    return config


@contextmanager
def _prometheus(binary: str, suite: Suite, tmp_path: Path) -> Iterator[str]:
    """Prometheus scraping the stack every second; killed however the test ends."""
    key_file, config_file = tmp_path / "admin_api_key", tmp_path / "prometheus.yml"
    key_file.write_text(DEV_ADMIN_KEY)
    config_file.write_text(yaml.safe_dump(_config(suite, key_file)))
    port = free_port()
    with (tmp_path / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.kill()
            proc.wait(timeout=10)


async def _activity(suite: Suite) -> None:
    """What the dashboards show: a tenant's job running (queue, placements, costs) and a receiver that
    fails (delivery attempts)."""
    acme = await suite.create_tenant("acme")
    quota = {"gpus": 4, "units": None, "workloads": 5}
    put = await suite.scheduler.put("/v1/admin/tenants/acme/quota", json=quota, headers=ADMIN_HEADERS)
    assert put.status_code == 200, put.text
    submitted = await suite.scheduler.post(
        "/v1/workloads", json=job(resources=A100, urgency=0.5, project="vision"), headers=acme
    )
    assert submitted.status_code == 201, submitted.text
    receiver = {"name": "down", "kind": "webhook", "url": f"http://127.0.0.1:{free_port()}/hook"}
    created = await suite.alerting.post("/v1/receivers", json=receiver, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    tested = await suite.alerting.post("/v1/receivers/down/test", headers=ADMIN_HEADERS)
    assert tested.status_code in (200, 202), tested.text


async def _fault(suite: Suite, gpu: str, **fault: Any) -> None:
    injected = await suite.telemetry.post(
        "/v1/admin/sim/faults", json={"gpu_uuid": gpu, **fault}, headers=ADMIN_HEADERS
    )
    assert injected.status_code == 202, injected.text


async def _empty_queries(prometheus: Prometheus) -> list[str]:
    """Every dashboard query (and variable) that finds nothing, or finds what it is expected not to."""
    problems: list[str] = []
    for board in [*dashboards.shipped(), dashboards.nvidia()]:
        queries, unresolved = await dashboards.expand(board, prometheus.label_values)
        problems += unresolved
        for written, run in queries.items():
            answer = (
                await prometheus.http.get(f"{prometheus.url}/api/v1/query", params={"query": run})
            ).json()
            if answer["status"] != "success":
                problems.append(f"{board.name}: {answer.get('error')}: {run}")
            elif bool(answer["data"]["result"]) == (written in board.expected_empty):
                found = "found series" if answer["data"]["result"] else "no series"
                problems.append(f"{board.name}: {found}: {run}")
    return problems


def _accepted_findings() -> list[re.Pattern[str]]:
    """The promtool findings docs/telemetry.md accepts: its 'Accepted promtool findings' table, with
    `<family>` standing for any metric name."""
    section = DOCS.read_text().split("### Accepted promtool findings", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| `")]
    findings = [re.fullmatch(r"\s*`(.+)`\s*", row[1]) for row in rows]
    return [re.compile(re.escape(f[1]).replace(re.escape("<family>"), r"\S+")) for f in findings if f]


def _unaccepted(promtool: str, text: str, accepted: list[re.Pattern[str]]) -> list[str]:
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )
    assert checked.returncode in (0, 3), checked.stdout + checked.stderr  # 3: lint findings only
    findings = [line for line in (checked.stdout + checked.stderr).splitlines() if line.strip()]
    return [f for f in findings if not any(p.fullmatch(f) for p in accepted)]


async def test_every_dashboard_query_finds_series_in_a_real_prometheus_scraping_the_stack(
    isolation: Isolation, tmp_path: Path
) -> None:
    binary, promtool = _tool("prometheus"), _tool("promtool")
    async with running_suite(isolation, tmp_path) as suite, httpx.AsyncClient(timeout=10) as http:
        await _activity(suite)
        with _prometheus(binary, suite, tmp_path) as url:
            prometheus = Prometheus(url=url, http=http)
            jobs = await eventually(prometheus.targets_up, timeout=30, interval=0.3, what="targets up")
            assert jobs == sorted([*SERVICES, "gpus", "tenants"])
            # After the first scrape, so increase() sees the XIDs; the lost GPU is reset by recovery within
            # seconds, which the 1 s scrapes see.
            await _fault(suite, XID_GPU, fault="xid", xid=63)
            await _fault(suite, LOST_GPU, fault="fall_off_bus")

            problems: list[str] = []

            async def settled() -> bool:
                nonlocal problems
                problems = await _empty_queries(prometheus)
                return not problems

            try:
                await eventually(settled, timeout=40, interval=1.0, what="every query to find series")
            except AssertionError:
                pytest.fail("queries that found nothing (or what they should not):\n" + "\n".join(problems))

        accepted = _accepted_findings()
        unaccepted: dict[str, list[str]] = {}
        for service in SERVICES:
            text = (await suite.http[service].get("/metrics")).text
            unaccepted[f"{service} /metrics"] = _unaccepted(promtool, text, accepted)
        gpus = (await suite.telemetry.get("/metrics/gpus", headers=ADMIN_HEADERS)).text
        unaccepted["telemetry /metrics/gpus"] = _unaccepted(promtool, gpus, accepted)
        # The tenant-labelled metrics are an admin's only: never in the open /metrics.
        for service, name in (
            ("scheduler", "scheduler_pending_workloads"),
            ("billing", "billing_posted_micros"),
        ):
            assert name not in (await suite.http[service].get("/metrics")).text
            assert (await suite.http[service].get("/metrics/tenants")).status_code == 401
            tenants = (await suite.http[service].get("/metrics/tenants", headers=ADMIN_HEADERS)).text
            assert name in tenants
            unaccepted[f"{service} /metrics/tenants"] = _unaccepted(promtool, tenants, accepted)
        assert {k: v for k, v in unaccepted.items() if v} == {}
