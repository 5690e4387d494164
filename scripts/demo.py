"""`make demo`: a guided tour of a running suite. Start it first with `make run` in another terminal.

Every step says what it does and why, calls the public APIs only (with the keys a user would have),
and waits for outcomes with a deadline. Exports land in .run/exports/.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
SERVICES = ("inventory", "scheduler", "telemetry", "alerting", "billing", "recovery")
NETWORK = {
    "vpc_id": "vpc-demo1",
    "subnet_id": "subnet-demo1",
    "security_group_id": "sg-default",
    "public_ip": False,
}


def say(title: str, why: str = "") -> None:
    print(f"\n== {title}", flush=True)
    if why:
        print(f"   why: {why}", flush=True)


def show(label: str, value: object) -> None:
    text = value if isinstance(value, str) else json.dumps(value, indent=None, default=str)
    print(f"   {label}: {text[:400]}", flush=True)


def wait(probe: Callable[[], T | None], *, timeout: float, what: str, every: float = 1.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise SystemExit(f"   gave up after {timeout:.0f}s waiting for {what}")


class Receiver(BaseHTTPRequestHandler):
    """A pager stand-in: records every signed webhook it receives."""

    received: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the handler threads on purpose

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        Receiver.received.append({"headers": dict(self.headers), "body": body})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


class Tour:
    """HTTP access to the six services with the admin key and the tenants' keys."""

    def __init__(self, *, base_port: int, admin_key: str) -> None:
        self.http = httpx.Client(timeout=10.0)
        self.urls = {s: f"http://127.0.0.1:{base_port + i}" for i, s in enumerate(SERVICES)}
        self.admin = {"X-API-Key": admin_key}

    def call(self, method: str, service: str, path: str, key: dict[str, str], **kw: Any) -> httpx.Response:
        return self.http.request(method, self.urls[service] + path, headers=key, **kw)

    def ok(self, method: str, service: str, path: str, key: dict[str, str], **kw: Any) -> Any:
        response = self.call(method, service, path, key, **kw)
        if response.status_code >= 400:
            raise SystemExit(f"   {method} {service}{path} -> {response.status_code}: {response.text[:300]}")
        return response.json() if response.content else None


def tenants(tour: Tour) -> dict[str, dict[str, str]]:
    say(
        "Two tenants with API keys, shares and quotas",
        "each team gets its own key; shares set its fair share, quotas cap what it may hold at once",
    )
    keys = {}
    for tenant, shares, gpus in (("acme", 2, 8), ("globex", 1, 4)):
        created = tour.call(
            "POST",
            "scheduler",
            "/v1/admin/tenants",
            tour.admin,
            json={"tenant_id": tenant, "name": tenant.title()},
        )
        if created.status_code == 409:
            key = tour.ok("POST", "scheduler", f"/v1/admin/tenants/{tenant}/keys", tour.admin)["api_key"]
        else:
            key = created.json()["key"]["api_key"]
        keys[tenant] = {"X-API-Key": key}
        tour.ok("PUT", "scheduler", f"/v1/admin/tenants/{tenant}/share", tour.admin, json={"shares": shares})
        tour.ok(
            "PUT",
            "scheduler",
            f"/v1/admin/tenants/{tenant}/quota",
            tour.admin,
            json={"gpus": gpus, "units": gpus * 16, "workloads": 10},
        )
        show(tenant, f"{shares} shares, at most {gpus} GPUs; key {key[:14]}…")
    for tenant, key in keys.items():
        for service in SERVICES:
            wait(
                lambda s=service, k=key: (
                    tour.call("GET", s, "/healthz", k).status_code == 200
                    and tour.call("GET", s, "/v1/catalog" if s == "inventory" else "/readyz", k).status_code
                    != 401
                ),
                timeout=30,
                what=f"{tenant}'s key to reach {service}",
            )
    return keys


def fleet(tour: Tour, acme: dict[str, str]) -> None:
    say(
        "The pool as users see it",
        "the node agent discovered the GPUs; inventory turns them into compute units",
    )
    summary = wait(
        lambda: (
            (c := tour.ok("GET", "inventory", "/v1/capacity?group_by=model", acme))
            and c.get("total", {}).get("total_gpus")
            and c
        ),
        timeout=60,
        what="GPUs from the agent's discovery",
    )
    show("total", summary["total"])
    for model, figures in sorted(summary.get("by_model", {}).items()):
        show(
            model,
            {k: figures[k] for k in ("total_gpus", "free_gpus", "total_units", "free_units") if k in figures},
        )


def instance(tour: Tour, acme: dict[str, str]) -> str:
    say("An instance in three steps", "image, then resources, then network — each step validated on its own")
    draft = tour.ok(
        "POST",
        "scheduler",
        "/v1/workloads/drafts",
        acme,
        json={"options": {"kind": "instance", "urgency": 0.7, "tags": {"project": "vision", "team": "cv"}}},
    )
    did = draft["draft_id"]
    tour.ok(
        "PUT",
        "scheduler",
        f"/v1/workloads/drafts/{did}/image",
        acme,
        json={"name": "pytorch", "version": "2.3"},
    )
    show("step 1", "image pytorch 2.3")
    tour.ok(
        "PUT",
        "scheduler",
        f"/v1/workloads/drafts/{did}/resources",
        acme,
        json={"kind": "gpu", "model": "A100-80GB", "count": 1},
    )
    show("step 2", "1 x A100-80GB")
    tour.ok("PUT", "scheduler", f"/v1/workloads/drafts/{did}/network", acme, json=NETWORK)
    show("step 3", NETWORK)
    workload = tour.ok("POST", "scheduler", f"/v1/workloads/drafts/{did}/submit", acme)
    show("submitted", {k: workload[k] for k in ("workload_id", "state", "priority")})
    return str(workload["workload_id"])


def jobs(tour: Tour, keys: dict[str, dict[str, str]]) -> list[str]:
    say("Jobs with different urgencies", "priority = min(0.6 x urgency + 0.4 x (1 - fair_share), 1.0)")
    ids = []
    for tenant, urgency, model in (("acme", 0.9, "H100-80GB"), ("acme", 0.2, "L4"), ("globex", 0.5, "L4")):
        body = {
            "kind": "job",
            "image": {"name": "jax", "version": "0.4.30"},
            "urgency": urgency,
            "resources": {"kind": "gpu", "model": model, "count": 1},
            "network": NETWORK,
            "tags": {"project": "nlp" if tenant == "acme" else "ads", "team": "research"},
            "time_limit_s": 3600,
        }
        created = tour.call("POST", "scheduler", "/v1/workloads", keys[tenant], json=body)
        if created.status_code >= 400:
            show(f"{tenant} {model}", f"refused: {created.json()['error']['message']}")
            continue
        ids.append(created.json()["workload_id"])
        show(
            f"{tenant} urgency {urgency}",
            {k: created.json()[k] for k in ("workload_id", "state", "priority")},
        )
    return ids


def queue(tour: Tour, acme: dict[str, str], workload_id: str) -> None:
    say("The queue, and why a workload has its priority", "like Slurm's sprio: every term is shown")
    show("queue", tour.ok("GET", "scheduler", "/v1/queue", acme))
    show("priority", tour.ok("GET", "scheduler", f"/v1/workloads/{workload_id}/priority", acme))


def running(tour: Tour, acme: dict[str, str], workload_id: str) -> str:
    say("Placed, then running", "the scheduler places; only the node agent on the host reports it running")
    wait(
        lambda: tour.ok("GET", "scheduler", f"/v1/workloads/{workload_id}", acme)["state"] == "running",
        timeout=90,
        what="the instance to run",
    )
    samples = wait(
        lambda: [
            s
            for s in tour.ok("GET", "telemetry", "/v1/gpus/latest", acme)
            if s.get("workload_id") == workload_id
        ],
        timeout=30,
        what="live metrics of the instance's GPU",
    )
    sample = samples[0]
    show("running on", f"{sample.get('gpu')} ({sample.get('node')})")
    show("live metrics", {k: sample.get(k) for k in ("sm_util_pct", "fb_used_pct", "gpu_temp_c", "power_w")})
    return str(sample["gpu"])


def pager(tour: Tour, acme: dict[str, str], gpu: str) -> None:
    say("Memory pressure pages someone", "the article's rule: GPU memory above 90% for a while pages on-call")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    created = tour.call(
        "POST",
        "alerting",
        "/v1/receivers",
        tour.admin,
        json={"name": "demo-pager", "kind": "webhook", "url": url},
    )
    secret = created.json().get("signing_secret", "") if created.status_code == 201 else ""
    if created.status_code == 409:
        tour.ok(
            "PUT",
            "alerting",
            "/v1/receivers/demo-pager",
            tour.admin,
            json={"url": url, "secret": "demo-" * 4},
        )
        secret = "demo-" * 4
    tour.ok(
        "PUT",
        "alerting",
        "/v1/routes",
        tour.admin,
        json={"default": {"receiver": "demo-pager"}, "routes": []},
    )
    rule = {
        "name": "DemoGpuMemoryHigh",
        "metric": "fb_used_pct",
        "comparator": ">",
        "threshold": 90,
        "for": "10s",
        "matchers": [{"name": "gpu", "op": "=", "value": gpu}],
        "severity": "critical",
        "summary": "GPU memory above 90% for 10s",
    }
    if tour.call("POST", "alerting", "/v1/rules", tour.admin, json=rule).status_code == 409:
        tour.ok("PUT", "alerting", "/v1/rules/DemoGpuMemoryHigh", tour.admin, json=rule)
    tour.ok(
        "POST",
        "telemetry",
        "/v1/admin/sim/faults",
        tour.admin,
        json={"gpu_uuid": gpu, "fault": "memory_leak"},
    )
    show("injected", f"a memory leak on {gpu}; the rule fires after 10 s above 90%")
    page = wait(
        lambda: next((r for r in Receiver.received if b"DemoGpuMemoryHigh" in r["body"]), None),
        timeout=180,
        what="the page",
    )
    stamp = page["headers"].get("X-GpuCloud-Timestamp", "")
    expected = hmac.new(secret.encode(), stamp.encode() + b"." + page["body"], hashlib.sha256).hexdigest()
    valid = page["headers"].get("X-GpuCloud-Signature", "") == f"sha256={expected}"
    show(
        "page received",
        f"{json.loads(page['body'])['status']}, signature {'valid' if valid else 'NOT valid'}",
    )
    server.shutdown()


def recovery(tour: Tour, acme: dict[str, str], workload_id: str, gpu: str) -> None:
    say(
        "A GPU falls off the bus (XID 79)",
        "recovery drains it and migrates the work elsewhere, with progress",
    )
    tour.ok(
        "POST",
        "telemetry",
        "/v1/admin/sim/faults",
        tour.admin,
        json={"gpu_uuid": gpu, "fault": "xid", "xid": 79},
    )
    incident = wait(
        lambda: next(iter(tour.ok("GET", "recovery", f"/v1/incidents?gpu={gpu}", acme)), None),
        timeout=60,
        what="the incident",
    )
    iid, seen = incident["incident_id"], set()

    def closed() -> dict[str, Any] | None:
        detail = tour.ok("GET", "recovery", f"/v1/incidents/{iid}", acme)
        for change in detail["history"]:
            if change["state"] not in seen:
                seen.add(change["state"])
                show("incident", f"{change['state']} {change.get('reason', '')}")
        for m in detail.get("migrations", []):
            step = f"{m['workload_id']}: {m['phase']} {m['percent']}%"
            if step not in seen:
                seen.add(step)
                show("migration", step)
        return detail if detail["state"] in ("resolved", "escalated") else None

    detail = wait(closed, timeout=240, what="the incident to close", every=2.0)
    show("closed", detail["state"])
    after = tour.ok("GET", "scheduler", f"/v1/workloads/{workload_id}", acme)
    show("workload now", {k: after[k] for k in ("state", "placement_id")})


def bills(tour: Tour, acme: dict[str, str], out: Path) -> None:
    say(
        "The project's bill",
        "every allocation is charged from placement to end, in micro-units, double-entry",
    )
    tour.ok("POST", "billing", "/v1/admin/accrual", tour.admin)
    show("balances", tour.ok("GET", "billing", "/v1/balances", acme))
    out.mkdir(parents=True, exist_ok=True)
    for fmt in ("csv", "parquet"):
        response = tour.call("GET", "billing", f"/v1/exports/vision?format={fmt}", acme)
        path = out / f"acme-vision.{fmt}"
        path.write_bytes(response.content)
        show(
            f"{fmt} export",
            f"{path} ({len(response.content)} bytes, rows {response.headers.get('X-Export-Rows')},"
            f" debit {response.headers.get('X-Export-Debit-Micro')} micro)",
        )
    show("reconciliation", tour.ok("GET", "billing", "/v1/admin/reconciliation", tour.admin))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-port", type=int, default=int(os.environ.get("GPUCLOUD_BASE_PORT", 8001)))
    parser.add_argument("--run-dir", type=Path, default=Path(os.environ.get("GPUCLOUD_RUN_DIR", ".run")))
    args = parser.parse_args()
    key_file = args.run_dir / "admin-key"
    admin_key = os.environ.get("ADMIN_API_KEY") or (key_file.read_text().strip() if key_file.exists() else "")
    if not admin_key:
        return print("no admin key: start the suite with `make run` first (it writes .run/admin-key)") or 2
    tour = Tour(base_port=args.base_port, admin_key=admin_key)
    for service, url in tour.urls.items():
        try:
            tour.http.get(f"{url}/readyz").raise_for_status()
        except httpx.HTTPError:
            return print(f"{service} is not ready at {url}: start the suite with `make run` first") or 2
    keys = tenants(tour)
    fleet(tour, keys["acme"])
    instance_id = instance(tour, keys["acme"])
    jobs(tour, keys)
    queue(tour, keys["acme"], instance_id)
    gpu = running(tour, keys["acme"], instance_id)
    pager(tour, keys["acme"], gpu)
    recovery(tour, keys["acme"], instance_id, gpu)
    bills(tour, keys["acme"], args.run_dir / "exports")
    print("\nThe tour is over; the suite keeps running (Ctrl-C in the `make run` terminal stops it).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
