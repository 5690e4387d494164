"""Answers the services give, trimmed from a running suite: the input of the golden tables."""

from __future__ import annotations

from typing import Any


def figures(total: str, allocated: str, gpus: int, in_use: int, down: int = 0) -> dict[str, Any]:
    """One capacity bar's figures."""
    return {
        "total_units": total,
        "allocated_units": allocated,
        "free_units": "0",
        "unavailable_units": "0",
        "fragmented_units": "0",
        "total_gpus": gpus,
        "in_use_gpus": in_use,
        "free_gpus": gpus - in_use - down,
        "unavailable_gpus": down,
        "total_memory_mib": 0,
        "allocated_memory_mib": 0,
        "free_memory_mib": 0,
    }


CAPACITY: dict[str, Any] = {
    "total": figures("1316.56", "16.00", 128, 2, 1),
    "by_pool": {"training": figures("1255.44", "16.00", 96, 2, 1), "inference": figures("61.12", "0", 32, 0)},
    "by_model": {"A100-80GB": figures("378.96", "16.00", 48, 2, 1), "L4": figures("61.12", "0", 32, 0)},
    "by_zone": {"eu-west-1a": figures("378.96", "16.00", 48, 2, 1)},
}

GPUS: list[dict[str, Any]] = [
    {
        "uuid": "GPU-a8e86a47-fd8a-5c95-8677-fe4a9cf7973b",
        "node": "gpu-a100-01",
        "index": 0,
        "model": "A100-80GB",
        "memory_mib": 81920,
        "pci_bus_id": "00000000:18:00.0",
        "nvlink_peers": [],
        "mig_enabled": False,
        "health": "healthy",
        "units": "8.00",
        "capacity_units": "8.00",
        "time_slice": None,
        "pool": "training",
        "zone": "eu-west-1a",
        "region": "eu-west-1",
    },
    {
        "uuid": "GPU-b4d51528-561a-5048-8e82-7f154a6d4a59",
        "node": "gpu-a100-01",
        "index": 4,
        "model": "A100-80GB",
        "memory_mib": 81920,
        "pci_bus_id": "00000000:1c:00.0",
        "nvlink_peers": [],
        "mig_enabled": True,
        "health": "draining",
        "units": "8.00",
        "capacity_units": "7.95",
        "time_slice": None,
        "pool": "training",
        "zone": "eu-west-1a",
        "region": "eu-west-1",
    },
]

LATEST: list[dict[str, Any]] = [
    {
        "gpu": "GPU-a8e86a47-fd8a-5c95-8677-fe4a9cf7973b",
        "index": 0,
        "model": "A100-80GB",
        "sm_util_pct": 90.0,
        "mem_util_pct": 54.0,
        "fb_used_bytes": 67_538_000_000,
        "fb_total_bytes": 85_899_345_920,
        "pcie_tx_bytes_per_s": 250_000_000.0,
        "pcie_rx_bytes_per_s": 1_000_000_000.0,
        "gpu_temp_c": 68.9,
        "power_w": 348.2,
        "power_limit_w": 400.0,
        "workload_id": "wl-0a9c8c79daaa41ac",
        "tenant_id": "acme",
        "lost_reason": None,
        "node": "gpu-a100-02",
        "at": "2026-12-02T03:36:40.156144Z",
        "fb_used_pct": 78.6,
    },
    {
        "gpu": "GPU-668e753a-49b0-5d18-89b3-0cd7c2c54d5d",
        "index": 3,
        "model": "A100-80GB",
        "sm_util_pct": None,
        "mem_util_pct": None,
        "fb_used_bytes": None,
        "fb_total_bytes": None,
        "pcie_tx_bytes_per_s": None,
        "pcie_rx_bytes_per_s": None,
        "gpu_temp_c": None,
        "power_w": None,
        "power_limit_w": None,
        "workload_id": "wl-0a9c8c79daaa41ac",
        "tenant_id": "acme",
        "lost_reason": "GPU is lost",
        "node": "gpu-a100-02",
        "at": "2026-12-02T03:36:39.156144Z",
        "fb_used_pct": None,
    },
]


RUN: dict[str, Any] = {
    "image": "docker.io/pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
    "command": ["python", "train.py"],
    "args": ["--data", "/data/my set"],
    "env": {"WANDB_MODE": "offline"},
    "working_dir": "/workspace",
    "cpu_millis": 4000,
    "memory_bytes": 17179869184,
    "time_limit_s": 3600.0,
    "grace_s": 30.0,
}


def workload(
    workload_id: str,
    *,
    state: str = "queued",
    position: int | None = None,
    host: dict[str, Any] | None = None,
    exited: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A workload as the scheduler answers it (``host``, ``exited``: the host's facts, once it said)."""
    return {
        "workload_id": workload_id,
        "tenant_id": "acme",
        "kind": "job",
        "state": state,
        "spec": {
            "kind": "job",
            "image": {"name": "pytorch", "version": "2.3"},
            "resources": {"kind": "gpu", "model": "A100-80GB", "count": 2, "min_memory_gb": None},
            "network": {"vpc_id": "vpc-main1", "subnet_id": "subnet-a001", "security_group_id": "sg-default"},
            "time_limit_s": 3600,
        },
        "urgency": 0.8,
        "preemptible": False,
        "tags": {"project": "vision", "team": "ml"},
        "priority": 0.88,
        "position": position,
        "wait_reason": "capacity" if position else None,
        "estimated_start": None,
        "placement_id": None if position else "pl-4a2d4a22f16e4fc1",
        "submitted_at": "2026-12-02T03:29:54.537022Z",
        "ended_at": None,
        "outcome": None,
        "reason": "",
        "run": RUN,
        "host": host,
        "exit": exited,
    }


PRIORITY: dict[str, Any] = {
    "workload_id": "wl-0a9c8c79daaa41ac",
    "formula": "priority = min(0.6 * urgency + 0.4 * (1 - fair_share), 1.0)",
    "urgency": 0.8,
    "urgency_term": 0.48,
    "decayed_usage_unit_hours": 12.5,
    "entitlement_unit_hours": 50.0,
    "shares": 1.0,
    "total_shares": 2.0,
    "fair_share": 0.25,
    "fair_share_term": 0.3,
    "raw": 0.78,
    "priority": 0.78,
    "pinned": False,
    "explanation": "...",
}

COSTS: dict[str, Any] = {
    "group_by": "tag:team",
    "total_micro": 1_500_000,
    "groups": [
        {"key": "ml", "amount_micro": 1_125_000, "compute_unit_hours": "2.25"},
        {"key": "search", "amount_micro": 375_000, "compute_unit_hours": "0.75"},
    ],
}

SILENCES: list[dict[str, Any]] = [
    {
        "id": "49b305bd-db14-435d-b175-890d6925c926",
        "matchers": [
            {"name": "alertname", "op": "=", "value": "GpuMemoryHigh"},
            {"name": "node", "op": "=~", "value": "gpu-a.*"},
            {"name": "tenant", "op": "=", "value": "acme"},
        ],
        "starts_at": "2026-12-02T03:37:38.498297Z",
        "ends_at": "2026-12-02T05:37:38.498297Z",
        "created_by": "kfeed01",
        "comment": "maintenance",
        "owner_tenant": "acme",
        "active": True,
    }
]


def incident(state: str, *, progress: int | None = None, closed: bool = False) -> dict[str, Any]:
    """An incident's detail at one point of its recovery."""
    moves = [] if progress is None else [{"workload_id": "wl-1", "phase": "transfer", "percent": progress}]
    return {
        "incident_id": "inc-b8441e16bfdc4ad4",
        "state": state,
        "fault_type": "xid_79",
        "severity": "fatal",
        "owner": "hardware",
        "action": "reboot_node",
        "recoverable": True,
        "gpu": "GPU-a8e86a47",
        "node": "gpu-a100-01",
        "count": 3,
        "fault_at": "2026-12-02T03:30:13.436120Z",
        "detected_at": "2026-12-02T03:30:14.200744Z",
        "recovered_at": None,
        "closed_at": "2026-12-02T03:30:49.000000Z" if closed else None,
        "escalation_reason": "no healthy GPU to move to" if state == "escalated" else None,
        "repeat_of": None,
        "diagnosis": {"probable_cause": "unknown", "confidence": 0.0, "findings": []},
        "history": [{"state": "detected", "at": "2026-12-02T03:30:14.200744Z", "reason": ""}],
        "migrations": moves,
        "progress_percent": progress,
    }
