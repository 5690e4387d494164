"""`make demo`: a guided tour of a running suite. Start it first with `make run` in another terminal.

Every step says what it does and why, calls the public APIs only (with the keys a user would have),
and waits for outcomes with a deadline. Exports land in .run/exports/.

The tour keeps to what is its own, so it runs on a suite in use, any number of times: its tenants
(`tour`, `tour-rival`), its receiver (`tour-pager`), one route for its own rule's alerts (the default
route and everyone else's routes stay as they are) and its rule. A second run reuses them, with a new
key for each tenant, and first cancels what the previous run left running.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import hmac
import json
import os
import secrets
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
#: The tour's tenants: (id, shares, GPU quota). Not the README's acme: the tour never touches a tenant it
#: did not create.
TENANTS = (("tour", 2, 8), ("tour-rival", 1, 4))
TENANT, RIVAL = TENANTS[0][0], TENANTS[1][0]
RECEIVER = "tour-pager"
RULE = "TourGpuMemoryHigh"
#: The tour's route: only its own rule's alerts, ahead of the others; the default route is left alone.
ROUTE = {"receiver": RECEIVER, "matchers": [{"name": "alertname", "op": "=", "value": RULE}]}
LIVE = ("queued", "placed", "running", "migrating")
#: A path on each service that needs a valid key: 401 until the tenant's key has reached it.
KEY_PROBES = {
    "inventory": "/v1/capacity",
    "scheduler": "/v1/workloads",
    "telemetry": "/v1/gpus/latest",
    "alerting": "/v1/alerts",
    "billing": "/v1/balances",
    "recovery": "/v1/incidents",
}
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
    for tenant, shares, gpus in TENANTS:
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
        for service, path in KEY_PROBES.items():
            wait(
                functools.partial(_key_works, tour, service, path, key),
                timeout=30,
                what=f"{tenant}'s key to reach {service}",
                every=0.3,
            )
    return keys


def _key_works(tour: Tour, service: str, path: str, key: dict[str, str]) -> bool:
    return tour.call("GET", service, path, key).status_code != 401


def retire_previous_run(tour: Tour, keys: dict[str, dict[str, str]]) -> list[str]:
    """Cancel what an earlier tour left queued or running, so quotas and the queue start afresh."""
    cancelled = []
    for tenant, key in keys.items():
        for state in LIVE:
            for workload in tour.ok("GET", "scheduler", f"/v1/workloads?state={state}&limit=1000", key):
                done = tour.call("POST", "scheduler", f"/v1/workloads/{workload['workload_id']}/cancel", key)
                if done.status_code < 400:
                    cancelled.append(f"{tenant}/{workload['workload_id']}")
    if cancelled:
        say("What an earlier tour left, cancelled", "a rerun starts with its quotas and its queue empty")
        show("cancelled", ", ".join(cancelled))
    return cancelled


def prepare(tour: Tour) -> dict[str, dict[str, str]]:
    """The tour's tenants with fresh keys, and nothing left over from an earlier run."""
    keys = tenants(tour)
    retire_previous_run(tour, keys)
    return keys


def fleet(tour: Tour, key: dict[str, str]) -> None:
    say(
        "The pool as users see it",
        "the node agent discovered the GPUs; inventory turns them into compute units",
    )
    summary = wait(
        lambda: (
            (c := tour.ok("GET", "inventory", "/v1/capacity?group_by=model", key))
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


def instance(tour: Tour, key: dict[str, str]) -> str:
    say("An instance in three steps", "image, then resources, then network — each step validated on its own")
    draft = tour.ok(
        "POST",
        "scheduler",
        "/v1/workloads/drafts",
        key,
        json={"options": {"kind": "instance", "urgency": 0.7, "tags": {"project": "vision", "team": "cv"}}},
    )
    did = draft["draft_id"]
    tour.ok(
        "PUT",
        "scheduler",
        f"/v1/workloads/drafts/{did}/image",
        key,
        json={"name": "pytorch", "version": "2.3"},
    )
    show("step 1", "image pytorch 2.3")
    tour.ok(
        "PUT",
        "scheduler",
        f"/v1/workloads/drafts/{did}/resources",
        key,
        json={"kind": "gpu", "model": "A100-80GB", "count": 1},
    )
    show("step 2", "1 x A100-80GB")
    tour.ok("PUT", "scheduler", f"/v1/workloads/drafts/{did}/network", key, json=NETWORK)
    show("step 3", NETWORK)
    workload = tour.ok("POST", "scheduler", f"/v1/workloads/drafts/{did}/submit", key)
    show("submitted", {k: workload[k] for k in ("workload_id", "state", "priority")})
    return str(workload["workload_id"])


def jobs(tour: Tour, keys: dict[str, dict[str, str]]) -> list[str]:
    say("Jobs with different urgencies", "priority = min(0.6 x urgency + 0.4 x (1 - fair_share), 1.0)")
    ids = []
    for tenant, urgency, model in ((TENANT, 0.9, "H100-80GB-SXM"), (TENANT, 0.2, "L4"), (RIVAL, 0.5, "L4")):
        body = {
            "kind": "job",
            "image": {"name": "jax", "version": "0.4.30"},
            "urgency": urgency,
            "resources": {"kind": "gpu", "model": model, "count": 1},
            "network": NETWORK,
            "tags": {"project": "nlp" if tenant == TENANT else "ads", "team": "research"},
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


def queue(tour: Tour, key: dict[str, str], workload_id: str) -> None:
    say("The queue, and why a workload has its priority", "like Slurm's sprio: every term is shown")
    show("queue", tour.ok("GET", "scheduler", "/v1/queue", key))
    show("priority", tour.ok("GET", "scheduler", f"/v1/workloads/{workload_id}/priority", key))


def running(tour: Tour, key: dict[str, str], workload_id: str) -> str:
    say("Placed, then running", "the scheduler places; only the node agent on the host reports it running")
    wait(
        lambda: tour.ok("GET", "scheduler", f"/v1/workloads/{workload_id}", key)["state"] == "running",
        timeout=90,
        what="the instance to run",
    )
    samples = wait(
        lambda: [
            s
            for s in tour.ok("GET", "telemetry", "/v1/gpus/latest", key)
            if s.get("workload_id") == workload_id
        ],
        timeout=30,
        what="live metrics of the instance's GPU",
    )
    sample = samples[0]
    show("running on", f"{sample.get('gpu')} ({sample.get('node')})")
    fb = sample.get("fb_used_pct")
    show(
        "live metrics",
        {k: sample.get(k) for k in ("sm_util_pct", "gpu_temp_c", "power_w")} | {"fb_used_pct": fb},
    )
    return str(sample["gpu"])


def pager_setup(tour: Tour, key: dict[str, str], *, gpu: str, url: str, secret: str) -> None:
    """The tour's receiver at ``url``, its route and its rule on ``gpu``: created, or updated on a rerun."""
    receiver = {"kind": "webhook", "url": url, "secret": secret}
    created = tour.call("POST", "alerting", "/v1/receivers", tour.admin, json={"name": RECEIVER, **receiver})
    if created.status_code == 409:  # an earlier tour's: point it at this run's listener, with this secret
        tour.ok("PUT", "alerting", f"/v1/receivers/{RECEIVER}", tour.admin, json=receiver)
    elif created.status_code >= 400:
        raise SystemExit(f"   POST alerting/v1/receivers -> {created.status_code}: {created.text[:300]}")
    tree = tour.ok("GET", "alerting", "/v1/routes", tour.admin)
    others = [r for r in tree.get("routes", []) if r.get("receiver") != RECEIVER]
    tour.ok(
        "PUT",
        "alerting",
        "/v1/routes",
        tour.admin,
        json={"default": tree["default"], "routes": [ROUTE, *others]},
    )
    rule = {
        "name": RULE,
        "metric": "fb_used_pct",
        "comparator": ">",
        "threshold": 90,
        "for": "10s",
        "matchers": [{"name": "gpu", "op": "=", "value": gpu}],
        "severity": "critical",
        "summary": "GPU memory above 90% for 10s",
    }
    # The tenant's own rule (confined to its workloads), created with its key as a user would.
    if tour.call("POST", "alerting", "/v1/rules", key, json=rule).status_code == 409:
        tour.ok("PUT", "alerting", f"/v1/rules/{RULE}", key, json=rule)


def pager(tour: Tour, key: dict[str, str], gpu: str) -> None:
    say("Memory pressure pages someone", "the article's rule: GPU memory above 90% for a while pages on-call")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    secret = secrets.token_urlsafe(24)
    pager_setup(tour, key, gpu=gpu, url=url, secret=secret)
    show("receiver", f"{RECEIVER} at {url}, routed only {RULE}'s alerts (the default route is untouched)")
    tour.ok(
        "POST",
        "telemetry",
        "/v1/admin/sim/faults",
        tour.admin,
        # A fast leak (the default creeps at 1.25%/min, as real ones do): a page within the tour's wait.
        json={"gpu_uuid": gpu, "fault": "memory_leak", "leak_pct_per_min": 30},
    )
    show("injected", f"a fast memory leak on {gpu}; the rule fires after 10 s above 90%")
    page = wait(
        lambda: next((r for r in Receiver.received if RULE.encode() in r["body"]), None),
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


def recovery(tour: Tour, key: dict[str, str], workload_id: str, gpu: str) -> None:
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
        lambda: next(iter(tour.ok("GET", "recovery", f"/v1/incidents?gpu={gpu}", key)), None),
        timeout=60,
        what="the incident",
    )
    iid, seen = incident["incident_id"], set()

    def closed() -> dict[str, Any] | None:
        detail = tour.ok("GET", "recovery", f"/v1/incidents/{iid}", key)
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
    after = tour.ok("GET", "scheduler", f"/v1/workloads/{workload_id}", key)
    show("workload now", {k: after[k] for k in ("state", "placement_id")})


def bills(tour: Tour, key: dict[str, str], out: Path) -> None:
    say(
        "The project's bill",
        "every allocation is charged from placement to end, in micro-units, double-entry",
    )
    tour.ok("POST", "billing", "/v1/admin/accrual", tour.admin)
    show("balances", tour.ok("GET", "billing", "/v1/balances", key))
    out.mkdir(parents=True, exist_ok=True)
    for fmt in ("csv", "parquet"):
        response = tour.call("GET", "billing", f"/v1/exports/vision?format={fmt}", key)
        path = out / f"{TENANT}-vision.{fmt}"
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
    keys = prepare(tour)
    fleet(tour, keys[TENANT])
    instance_id = instance(tour, keys[TENANT])
    jobs(tour, keys)
    queue(tour, keys[TENANT], instance_id)
    gpu = running(tour, keys[TENANT], instance_id)
    pager(tour, keys[TENANT], gpu)
    recovery(tour, keys[TENANT], instance_id, gpu)
    bills(tour, keys[TENANT], args.run_dir / "exports")
    print("\nThe tour is over; the suite keeps running (Ctrl-C in the `make run` terminal stops it).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
