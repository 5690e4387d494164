"""Issue 9's journey as steps with assertions, shared by the plain flow and the chaos flow.

Two tenants with keys, shares and quotas; an instance created in three steps and jobs of different
urgencies; the queue with priorities explained; placement on GPUs the agent discovered; running;
tenant-scoped live metrics; memory pressure paging once through a signed webhook; bills exported as
CSV and Parquet that agree with the ledger.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow.parquet as pq
import pytest

from libs.common.events import Envelope, Event
from libs.common.events.scheduler import WorkloadPlacedV1
from tests.integration.alerting.helpers import Receiver
from tests.integration.flows.suite import Suite, fleet_gpus, gpus_of, signature_ok
from tests.integration.support import ADMIN_HEADERS, TopicReader, eventually

__all__ = ["RULE", "SECRET", "TRACE_ID", "Journey"]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
SECRET = "flow-signing-secret-0123456789"
RULE = "GlobexGpuMemoryPressure"
NETWORK = {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"}
Hook = Callable[[str], Awaitable[None]]


def job(*, resources: dict[str, Any], urgency: float, project: str) -> dict[str, Any]:
    """A one-shot creation request for a training job."""
    return {
        "kind": "job",
        "image": {"name": "pytorch", "version": "2.3"},
        "resources": resources,
        "network": NETWORK,
        "urgency": urgency,
        "tags": {"project": project, "team": "ml"},
        "time_limit_s": 3600,
    }


@dataclass
class Journey:
    """The state the steps share; `between(step)` runs before each step (the chaos flow kills there)."""

    suite: Suite
    receiver: Receiver
    scheduler_events: TopicReader
    between: Hook | None = None
    acme: dict[str, str] = field(default_factory=dict)
    globex: dict[str, str] = field(default_factory=dict)
    workloads: dict[str, str] = field(default_factory=dict)  # role -> workload id
    waiting: str = ""

    @property
    def steps(self) -> list[Callable[[], Awaitable[None]]]:
        return [
            self.tenants_with_keys_shares_and_quotas,
            self.fleet_from_the_agents_discovery,
            self.instance_in_three_steps_and_jobs,
            self.queue_with_priorities_explained,
            self.placed_on_discovered_gpus_and_running,
            self.tenant_scoped_live_metrics,
            self.memory_pressure_pages_once,
            self.bills_exported_and_reconciled,
        ]

    async def run(self) -> None:
        for step in self.steps:
            if self.between is not None:
                await self.between(step.__name__)
            await step()

    # --- steps -------------------------------------------------------------------------------

    async def tenants_with_keys_shares_and_quotas(self) -> None:
        s = self.suite
        self.acme, self.globex = await s.create_tenant("acme"), await s.create_tenant("globex")
        for tenant, shares, gpus in (("acme", 2, 6), ("globex", 1, 3)):
            put = await s.scheduler.put(
                f"/v1/admin/tenants/{tenant}/share", json={"shares": shares}, headers=ADMIN_HEADERS
            )
            assert put.status_code == 200, put.text
            quota = {"gpus": gpus, "units": None, "workloads": 5}
            put = await s.scheduler.put(
                f"/v1/admin/tenants/{tenant}/quota", json=quota, headers=ADMIN_HEADERS
            )
            assert put.status_code == 200, put.text
        share = (await s.scheduler.get("/v1/admin/tenants/acme/share", headers=ADMIN_HEADERS)).json()
        assert share["share_fraction"] == 2 / 3

    async def fleet_from_the_agents_discovery(self) -> None:
        expected = {u for uuids in fleet_gpus().values() for u in uuids}

        async def healthy() -> set[str] | None:
            gpus = (await self.suite.inventory.get("/v1/gpus?limit=100", headers=self.acme)).json()
            seen = {g["uuid"] for g in gpus if g["health"] == "healthy"}
            return seen if seen == expected else None

        await eventually(healthy, timeout=60, interval=0.5, what="every fleet GPU registered healthy")
        mig = [
            g
            for g in (await self.suite.inventory.get("/v1/gpus?limit=100", headers=self.acme)).json()
            if g["mig_enabled"]
        ]
        assert [g["uuid"] for g in mig] == [fleet_gpus()["fa-a100"][3]]

    async def instance_in_three_steps_and_jobs(self) -> None:
        sch = self.suite.scheduler
        opened = await sch.post(
            "/v1/workloads/drafts",
            json={"options": {"kind": "instance", "urgency": 0.4, "tags": {"project": "notebooks"}}},
            headers=self.acme,
        )
        assert opened.status_code == 201, opened.text
        draft = opened.json()["draft_id"]
        assert opened.json()["missing"] == ["image", "resources", "network"]
        steps = {
            "image": {"name": "pytorch", "version": "2.3"},
            "resources": {"kind": "gpu", "model": "H100-80GB-SXM", "count": 1},
            "network": NETWORK,
        }
        for step, body in steps.items():
            filled = await sch.put(f"/v1/workloads/drafts/{draft}/{step}", json=body, headers=self.acme)
            assert filled.status_code == 200, filled.text
        assert filled.json()["missing"] == []
        traced = {**self.acme, "traceparent": TRACEPARENT}
        submitted = await sch.post(f"/v1/workloads/drafts/{draft}/submit", headers=traced)
        assert submitted.status_code == 201, submitted.text
        self.workloads["instance"] = submitted.json()["workload_id"]
        await self._submit(
            "urgent",
            self.acme,
            job(resources={"kind": "gpu", "model": "A100-80GB", "count": 1}, urgency=0.9, project="vision"),
        )
        await self._submit(
            "mig",
            self.globex,
            job(resources={"kind": "mig", "profile": "1g.10gb"}, urgency=0.5, project="search"),
        )
        await self._submit(
            "leaky",
            self.globex,
            job(resources={"kind": "gpu", "model": "A100-80GB", "count": 1}, urgency=0.1, project="search"),
        )
        await self._submit(
            "l4",
            self.globex,
            job(resources={"kind": "gpu", "model": "L4", "count": 1}, urgency=0.2, project="search"),
        )
        big = job(
            resources={"kind": "gpu", "model": "H100-80GB-SXM", "count": 4}, urgency=0.7, project="vision"
        )
        await self._submit("waiting", self.acme, big)

    async def _submit(self, role: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        response = await self.suite.scheduler.post("/v1/workloads", json=body, headers=headers)
        assert response.status_code == 201, response.text
        self.workloads[role] = response.json()["workload_id"]

    async def queue_with_priorities_explained(self) -> None:
        sch, waiting = self.suite.scheduler, self.workloads["waiting"]

        async def queued() -> list[dict[str, Any]] | None:
            rows = (await sch.get("/v1/queue", headers=self.acme)).json()
            return rows if [r["workload_id"] for r in rows] == [waiting] and rows[0]["wait_reason"] else None

        rows = await eventually(
            queued, timeout=30, interval=0.3, what="the 4 x H100 job waiting (one H100 is taken)"
        )
        assert rows[0]["position"] == 1
        assert (await sch.get("/v1/queue", headers=self.globex)).json() == []  # tenants see only their own
        explained = {}
        for role in ("urgent", "leaky", "waiting"):
            headers = self.globex if role == "leaky" else self.acme
            explained[role] = (
                await sch.get(f"/v1/workloads/{self.workloads[role]}/priority", headers=headers)
            ).json()
        for e in explained.values():
            assert e["raw"] == pytest.approx(e["urgency_term"] + e["fair_share_term"])
            assert e["priority"] == pytest.approx(min(e["raw"], 1.0))
            assert "0.6 * urgency" in e["explanation"]
        assert explained["urgent"]["priority"] > explained["leaky"]["priority"]
        cancelled = await sch.post(f"/v1/workloads/{waiting}/cancel", headers=self.acme)
        assert cancelled.json()["state"] == "cancelled"

    async def placed_on_discovered_gpus_and_running(self) -> None:
        roles = ("instance", "urgent", "mig", "leaky", "l4")
        for role in roles:
            headers = self.globex if role in ("mig", "leaky", "l4") else self.acme

            async def running(role: str = role, headers: dict[str, str] = headers) -> bool:
                got = (
                    await self.suite.scheduler.get(f"/v1/workloads/{self.workloads[role]}", headers=headers)
                ).json()
                return bool(got["state"] == "running")

            await eventually(running, timeout=60, interval=0.3, what=f"{role} running")
        discovered = {u for uuids in fleet_gpus().values() for u in uuids}
        for role in roles:
            placed = await self.placed(self.workloads[role])
            assert set(gpus_of(placed)) <= discovered
            await eventually(
                functools.partial(self.inventory_holds, placed),  # binds this iteration's placement
                timeout=60,
                what=f"inventory to record {role}'s allocation",
            )
        assert gpus_of(await self.placed(self.workloads["instance"]))[0] in fleet_gpus()["fa-h100"]
        mig = await self.placed(self.workloads["mig"])
        assert mig.allocations[0].partition_id
        assert mig.allocations[0].profile == "1g.10gb"

    async def inventory_holds(self, placed: WorkloadPlacedV1) -> bool:
        """Inventory applied the placement (it lags while a restarted consumer waits for its group)."""
        gpu = gpus_of(placed)[0]
        detail = (await self.suite.inventory.get(f"/v1/gpus/{gpu}", headers=ADMIN_HEADERS)).json()
        return placed.placement_id in {a["placement_id"] for a in detail.get("allocations", [])}

    async def placed(self, workload_id: str) -> WorkloadPlacedV1:
        """The latest placement of a workload, from the scheduler's topic."""
        events = await self.scheduler_events.wait_for(
            lambda evs: any(isinstance(p, WorkloadPlacedV1) and p.workload_id == workload_id for _, p in evs),
            timeout=30,
            what=f"{workload_id} placed",
        )
        return [p for _, p in events if isinstance(p, WorkloadPlacedV1) and p.workload_id == workload_id][-1]

    async def tenant_scoped_live_metrics(self) -> None:
        acme_gpus = {g for r in ("instance", "urgent") for g in gpus_of(await self.placed(self.workloads[r]))}
        globex_gpus = {
            g for r in ("mig", "leaky", "l4") for g in gpus_of(await self.placed(self.workloads[r]))
        }

        async def visible(headers: dict[str, str], want: set[str]) -> list[dict[str, Any]] | None:
            rows = (await self.suite.telemetry.get("/v1/gpus/latest", headers=headers)).json()
            return rows if {r["gpu"] for r in rows} == want else None

        acme = await eventually(
            lambda: visible(self.acme, acme_gpus), timeout=30, interval=0.3, what="acme's GPUs only"
        )
        assert {r["tenant_id"] for r in acme} == {"acme"}
        assert all(r["sm_util_pct"] is not None for r in acme)
        await eventually(
            lambda: visible(self.globex, globex_gpus), timeout=30, interval=0.3, what="globex's GPUs only"
        )
        everything = (await self.suite.telemetry.get("/v1/gpus/latest", headers=ADMIN_HEADERS)).json()
        assert len(everything) >= len(fleet_gpus()["fa-a100"]) + 8

    async def memory_pressure_pages_once(self) -> None:
        s, leaky = self.suite, self.workloads["leaky"]
        receiver = {"name": "pager", "kind": "webhook", "url": self.receiver.url, "secret": SECRET}
        assert (
            await s.alerting.post("/v1/receivers", json=receiver, headers=ADMIN_HEADERS)
        ).status_code == 201
        tree = {"default": {"receiver": "pager", "group_wait": 0, "group_interval": 1}}
        assert (await s.alerting.put("/v1/routes", json=tree, headers=ADMIN_HEADERS)).status_code == 200
        rule = {
            "name": RULE,
            "metric": "fb_used_pct",
            "comparator": ">",
            "threshold": 90,
            "for": "2s",
            "severity": "critical",
            "summary": "GPU memory above 90%",
        }
        created = await s.alerting.post("/v1/rules", json=rule, headers=self.globex)
        assert created.status_code == 201, created.text
        gpu = gpus_of(await self.placed(leaky))[0]

        async def plateau() -> bool:  # the job's memory has grown to its working set (about 78%), now
            got = await s.telemetry.get(f"/v1/gpus/{gpu}/latest", headers=self.globex)
            if got.status_code != 200:
                return False
            fresh = datetime.now(UTC) - datetime.fromisoformat(got.json()["at"]) < timedelta(seconds=3)
            return fresh and (got.json().get("fb_used_pct") or 0) > 70

        await eventually(plateau, timeout=90, interval=0.5, what="the leaky job's memory at its working set")
        injected = await s.telemetry.post(
            "/v1/admin/sim/faults",
            # Thirty times the default creep: above 90% within seconds, so the 2 s rule pages, then the OOM.
            json={"gpu_uuid": gpu, "fault": "memory_leak", "leak_pct_per_min": 30},
            headers=ADMIN_HEADERS,
        )
        assert injected.status_code == 202, injected.text
        await eventually(
            lambda: self._resolved_page(), timeout=90, interval=0.3, what="the page and its resolve"
        )
        firing = self.pages("firing")
        assert len({r.headers["idempotency-key"] for r in firing}) == 1
        assert all(signature_ok(SECRET.encode(), r.body, r.headers) for r in self.receiver.accepted())
        alert = next(a for r in firing for a in r.json()["alerts"] if a["labels"].get("alertname") == RULE)
        assert alert["labels"]["tenant"] == "globex"
        assert alert["labels"]["gpu"] == gpu

    def pages(self, status: str) -> list[Any]:
        """Accepted notifications carrying our rule's alert in `status`."""
        return [
            r
            for r in self.receiver.accepted()
            if any(a["labels"].get("alertname") == RULE and a["status"] == status for a in r.json()["alerts"])
        ]

    async def _resolved_page(self) -> bool:
        return bool(self.pages("firing")) and bool(self.pages("resolved"))

    async def bills_exported_and_reconciled(self) -> None:
        s = self.suite
        for tenant, headers, project in (
            ("acme", self.acme, "vision"),
            ("acme", self.acme, "notebooks"),
            ("globex", self.globex, "search"),
        ):

            async def charged(headers: dict[str, str] = headers, project: str = project) -> bool:
                rows = (await s.billing.get(f"/v1/charges?project={project}", headers=headers)).json()
                return any(r["amount_micro"] > 0 for r in rows)

            await eventually(charged, timeout=30, interval=0.5, what=f"{tenant}/{project} charged")
            # End the window just after the newest entry now: later accruals cannot land inside it.
            seen = (await s.billing.get(f"/v1/charges?project={project}", headers=headers)).json()
            newest = max(datetime.fromisoformat(r["at"]) for r in seen) + timedelta(microseconds=1)
            end = newest.isoformat().replace("+00:00", "Z")
            charges = (
                await s.billing.get("/v1/charges", params={"project": project, "end": end}, headers=headers)
            ).json()
            total = sum(abs(int(r["amount_micro"])) for r in charges)
            for fmt in ("csv", "parquet"):
                export = await s.billing.get(
                    f"/v1/exports/{project}", params={"format": fmt, "end": end}, headers=headers
                )
                assert export.status_code == 200, export.text
                debit = int(export.headers["x-export-debit-micro"])
                credit = int(export.headers["x-export-credit-micro"])
                assert debit == credit == total, (fmt, debit, credit, total, charges)
                rows = _rows(export.content, fmt)
                assert len(rows) == int(export.headers["x-export-rows"]) == 2 * len(charges)
                assert sum(int(r["debit_micro"] or 0) for r in rows) == debit
                assert {r["tenant_id"] for r in rows} == {tenant}
        await eventually(self.reconciled, timeout=30, interval=0.5, what="billing reconciliation equal")

    async def reconciled(self) -> bool:
        got = (await self.suite.billing.get("/v1/admin/reconciliation", headers=ADMIN_HEADERS)).json()
        return bool(got["equal"])


def _rows(content: bytes, fmt: str) -> list[dict[str, Any]]:
    if fmt == "csv":
        return list(csv.DictReader(io.StringIO(content.decode())))
    rows: list[dict[str, Any]] = pq.read_table(io.BytesIO(content)).to_pylist()  # pyarrow is untyped
    return rows


def traced(events: list[tuple[Envelope, Event]], workload_id: str) -> list[tuple[str, str | None]]:
    """(event type, trace id) of every scheduler event about one workload."""
    return [
        (env.type, env.traceparent.split("-")[1] if env.traceparent else None)
        for env, p in events
        if getattr(p, "workload_id", None) == workload_id
    ]
