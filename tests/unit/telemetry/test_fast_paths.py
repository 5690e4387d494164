"""The sample hot path's shortcuts give exactly what the plain paths give.

The agent reads the simulator as value rows and writes samples from a template; the aggregator keeps
each sample's JSON text, stores it with labels appended, rolls up into flat arrays and re-adds node
membership only now and then. Each is checked here against the straightforward computation.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any, TypedDict

import pytest

import libs.common.http  # noqa: F401  # before ingest: runtime and http import each other, http must come first
from libs.common.events.sample_wire import SampleEncoder, decode_sample_batch, encode_sample_batch
from libs.common.redis import Keyspace
from services.telemetry.adapters import live_store as live_module
from services.telemetry.adapters.live_store import LiveState
from services.telemetry.adapters.sim import FaultKind, FleetSpec, GpuGroup, NodeSpec, ProfileKind, SimFleet
from services.telemetry.adapters.sim.gpu import (
    DRIVER_RESERVED_BYTES,
    MEM_TEMP_TAU_S,
    TEMP_TAU_S,
    UTIL_TAU_S,
    SimGpu,
    step,
)
from services.telemetry.adapters.sim.physics import Load, lag, power_draw_w, steady_temp_c
from services.telemetry.domain.allocations import AllocationRow, AllocationView
from services.telemetry.domain.gpu_models import GPU_MODELS
from services.telemetry.domain.rollup import ROLLED_UP, RollupAccumulator, percentile
from services.telemetry.service.agent.reports import encoded_samples, sample_dicts
from services.telemetry.service.ingest import _entries
from services.telemetry.service.state import TelemetryState
from services.telemetry.settings import TelemetrySettings
from tests.unit.telemetry.conftest import T0, at


class _JsonLayout(TypedDict, total=False):
    """The json.dumps keywords these tests vary."""

    separators: tuple[str, str]


COMPACT: _JsonLayout = {"separators": (",", ":")}


def _fleet() -> SimFleet:
    spec = FleetSpec(
        nodes=(
            NodeSpec(hostname="node-a", gpus=(GpuGroup(model="H100", count=4),)),
            NodeSpec(
                hostname="node-b",
                # P100: no tensor cores, so its values row ends in None (the template leaves it out)
                gpus=(
                    GpuGroup(model="L4", count=2),
                    GpuGroup(model="T4", count=1),
                    GpuGroup(model="P100", count=1),
                ),
            ),
        ),
        seed=11,
        fault_rate_per_gpu_hour=200.0,  # random faults too, so the rng is drawn as the plain path draws it
    )
    fleet = SimFleet(spec=spec, start=T0)
    gpus = [g.uuid for h in fleet.hostnames for g in fleet.discovery(hostname=h).gpus]
    fleet.assign_workload(gpu_uuid=gpus[0], workload_id="w0", kind=ProfileKind.TRAINING, started_at=T0)
    fleet.assign_workload(gpu_uuid=gpus[4], workload_id="w4", kind=ProfileKind.INTERACTIVE, started_at=T0)
    fleet.inject_fault(gpu_uuid=gpus[1], fault=FaultKind.POWER_CAP, now=T0)
    fleet.inject_fault(gpu_uuid=gpus[2], fault=FaultKind.MEMORY_LEAK, now=T0)
    fleet.inject_fault(gpu_uuid=gpus[5], fault=FaultKind.THERMAL_RUNAWAY, now=T0)
    fleet.inject_fault(gpu_uuid=gpus[6], fault=FaultKind.FALL_OFF_BUS, now=T0)
    return fleet


def test_value_rows_and_the_template_encode_what_the_readings_and_json_encode() -> None:
    plain, fast = _fleet(), _fleet()
    gpus = [g.uuid for h in plain.hostnames for g in plain.discovery(hostname=h).gpus]
    models = dict.fromkeys(gpus[:4], "H100") | {gpus[4]: 'L4 "PCIe"', gpus[5]: "L4"}  # one to escape
    allocations = {gpus[0]: ("w0", "acme"), gpus[4]: ("w4", "tenant-é")}
    xid_totals = {gpus[6]: 2, gpus[1]: 3}
    xid_codes = {gpus[6]: {79: 2}, gpus[1]: {79: 1, 13: 2}}  # a lost GPU and one read as a values row
    encoder = SampleEncoder(source="/t")
    kinds: set[str] = set()
    for second in range(1, 181):
        for fleet in (plain, fast):
            fleet.advance(now=at(second))
        for host in plain.hostnames:
            readings = plain.sample_node(hostname=host, now=at(second))
            rows = fast.sample_node_values(hostname=host, now=at(second))
            kinds |= {type(r).__name__ for r in rows}
            kinds |= {"row without tensor activity" for r in rows if isinstance(r, tuple) and r[-1] is None}
            context: dict[str, Any] = {"models": models, "allocations": allocations, "xid_totals": xid_totals}
            context["xid_codes"] = xid_codes
            expected = [json.dumps(d, **COMPACT) for d in sample_dicts(readings=readings, **context)]
            assert encoded_samples(encoder=encoder, readings=rows, **context) == expected
    assert kinds == {"tuple", "GpuLost", "row without tensor activity"}  # every kind was exercised


def _state(rows: list[tuple[str, str, str]]) -> TelemetryState:
    state = TelemetryState(settings=TelemetrySettings())
    state.view = AllocationView.of(
        [AllocationRow(gpu_uuid=gpu, workload_id=w, tenant_id=t, node="n") for gpu, w, t in rows]
    )
    return state


def test_stored_json_is_the_sample_with_the_allocations_labels_node_and_time() -> None:
    samples: list[dict[str, Any]] = [
        {"gpu": "G-free", "index": 0, "sm_util_pct": 1.0},
        {"gpu": "G-view", "index": 1, "sm_util_pct": 2.0},  # allocated, the agent did not know yet
        {"gpu": "G-same", "index": 2, "workload_id": "w", "tenant_id": "t"},
        {"gpu": "G-stale", "index": 3, "workload_id": "old", "tenant_id": "t"},  # the view wins
        {"gpu": "G-agent", "index": 4, "workload_id": "w9", "tenant_id": "t9"},  # only the agent knows
        {"gpu": "G-null", "index": 5, "power_w": None},
        {"gpu": "MIG-1", "parent_gpu": "G-view", "sm_util_pct": 3.0},  # labelled by its parent
    ]
    rows = [("G-view", "w", "t"), ("G-same", "w", "t"), ("G-stale", "new", "t")]
    raw = encode_sample_batch(node="n", at=T0, samples=[dict(s) for s in samples], source="/t")
    layouts: tuple[_JsonLayout, ...] = ({**COMPACT}, {})  # with and without kept texts
    for layout in layouts:
        state = _state(rows)
        batch = decode_sample_batch(json.dumps(json.loads(raw), **layout).encode())
        assert batch is not None
        assert (batch.texts is not None) == (layout == COMPACT)
        into: dict[str, bytes] = {}
        recent: list[tuple[str, bytes]] = []
        gpus = _entries(state, node="n", at=T0.isoformat(), batch=batch, into=into, recent=recent)
        assert gpus == [s["gpu"] for s in samples]
        expected: dict[str, dict[str, Any]] = {}
        for sample in samples:
            want = {k: v for k, v in sample.items() if v is not None}
            workload, tenant = state.view.labels(sample.get("parent_gpu") or sample["gpu"])
            if workload is not None:
                want |= {"workload_id": workload, "tenant_id": tenant}
            expected[sample["gpu"]] = want | {"node": "n", "at": T0.isoformat()}
        assert {gpu: json.loads(value) for gpu, value in into.items()} == expected
        assert [gpu for gpu, _ in recent] == ["G-view", "G-same", "G-stale", "G-agent"]
        assert all(into[gpu] == value for gpu, value in recent)
        # Rollups and fault evidence read the labels from the decoded samples: the view's win there too.
        assert [s.get("workload_id") for s in batch.samples] == [None, "w", "w", "new", "w9", None, "w"]


def test_rollup_stats_cover_only_the_samples_that_carried_each_metric() -> None:
    acc = RollupAccumulator(window_s=60)
    start = 1_700_000_040.0
    full = {"gpu": "G", "model": "H100", "fb_total_bytes": 200}
    samples: list[dict[str, Any]] = [
        {**full, "sm_util_pct": 10.0, "fb_used_bytes": 50, "power_w": 100, "pcie_rx_bytes_per_s": 7},
        {"gpu": "G", "lost_reason": "gone"},
        {**full, "sm_util_pct": 30.0, "fb_used_bytes": None, "gpu_temp_c": 60.5, "pcie_rx_bytes_per_s": "9"},
        {**full, "sm_util_pct": 20, "fb_used_bytes": 150, "workload_id": "w", "tenant_id": "t"},
    ]
    for i, sample in enumerate(samples):
        acc.add(node="n", at=start + i, sample=sample)
    [window] = acc.close(now=start + 70, grace_s=5)
    assert (window.samples, window.workload_id, window.tenant_id, window.model) == (4, "w", "t", "H100")

    def stats(values: list[float]) -> dict[str, float]:
        return {"avg": round(sum(values) / len(values), 3), "max": max(values), "p95": percentile(values, 95)}

    assert window.stats == {
        "sm_util_pct": stats([10.0, 30.0, 20.0]),
        "fb_used_pct": stats([25.0, 75.0]),
        "gpu_temp_c": stats([60.5]),
        "power_w": stats([100.0]),
        "pcie_rx_bytes_per_s": stats([7.0, 9.0]),
    }
    assert set(window.stats) <= set(ROLLED_UP)
    assert not any(math.isnan(v) for s in window.stats.values() for v in s.values())


class _Pipe:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def hset(self, key: str, *, mapping: dict[str, bytes]) -> None:
        self.calls.append(("hset", key, dict(mapping)))

    def sadd(self, key: str, *members: str) -> None:
        self.calls.append(("sadd", key, set(members)))

    def lpush(self, key: str, value: bytes) -> None:
        self.calls.append(("lpush", key, value))

    def ltrim(self, key: str, start: int, stop: int) -> None:
        self.calls.append(("ltrim", key, start, stop))


def test_one_poll_is_one_hset_and_node_sets_are_re_added_on_new_gpus_or_after_the_refresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(f"{live_module.__name__}.time.monotonic", lambda: clock[0])
    live = LiveState(redis=None, keys=Keyspace("p:"), recent=3)  # type: ignore[arg-type]

    def poll(members: dict[str, list[str]]) -> list[tuple[Any, ...]]:
        pipe = _Pipe()
        entries = {gpu: gpu.encode() for gpus in members.values() for gpu in gpus}
        live.write_poll(pipe, entries=entries, members=members, recent=[("a1", b"x"), ("a1", b"y")])  # type: ignore[arg-type]
        return pipe.calls

    first = poll({"a": ["a1", "a2"], "b": ["b1"]})
    assert first[0] == ("hset", "p:latest", {"a1": b"a1", "a2": b"a2", "b1": b"b1"})
    assert first[1:4] == [
        ("sadd", "p:node:a", {"a1", "a2"}),
        ("sadd", "p:node:b", {"b1"}),
        ("sadd", "p:nodes", {"a", "b"}),
    ]
    trim = ("ltrim", "p:recent:a1", 0, 2)
    assert first[4:] == [("lpush", "p:recent:a1", b"x"), trim, ("lpush", "p:recent:a1", b"y"), trim]
    assert [c[0] for c in poll({"a": ["a1", "a2"], "b": ["b1"]})] == [
        "hset",
        "lpush",
        "ltrim",
        "lpush",
        "ltrim",
    ]
    assert ("sadd", "p:node:b", {"b1", "b2"}) in poll({"a": ["a1"], "b": ["b2"]})  # a new GPU
    clock[0] += live_module.MEMBERSHIP_REFRESH_S
    again = poll({"a": ["a1", "a2"], "b": ["b1"]})
    assert ("sadd", "p:node:a", {"a1", "a2"}) in again
    assert ("sadd", "p:nodes", {"a", "b"}) in again


@pytest.mark.parametrize(("sm", "cooling", "cap"), [(0.0, 1.0, None), (55.0, 1.0, 300.0), (97.0, 0.35, None)])
def test_the_written_out_step_follows_the_physics(sm: float, cooling: float, cap: float | None) -> None:
    spec = GPU_MODELS["H100"]
    gpu = SimGpu(uuid="G", node="n", index=0, spec=spec, t=0.0, rng=random.Random(1), cooling=cooling)
    gpu.power_cap_w, gpu.temp, gpu.mem_temp, gpu.fb_used = cap, 50.0, 52.0, 1e9
    load = Load(sm, 40.0, 0.1, 0.5, memory_tau_s=20.0)
    step(gpu, t=1.5, load=load)
    assert gpu.sm == lag(current=0.0, target=sm, dt_s=1.5, tau_s=UTIL_TAU_S)
    assert gpu.mem_util == lag(current=0.0, target=40.0, dt_s=1.5, tau_s=UTIL_TAU_S)
    target_fb = DRIVER_RESERVED_BYTES + 0.5 * spec.memory_bytes
    assert gpu.fb_used == lag(current=1e9, target=target_fb, dt_s=1.5, tau_s=20.0)
    limit = spec.power_limit_w if cap is None else min(cap, spec.power_limit_w)
    wanted = power_draw_w(
        sm_pct=gpu.sm, mem_util_pct=gpu.mem_util, idle_w=spec.idle_power_w, limit_w=spec.power_limit_w
    )
    assert gpu.power == min(wanted, limit)
    steady = steady_temp_c(power_w=gpu.power, limit_w=spec.power_limit_w, cooling=cooling)
    assert gpu.temp == lag(current=50.0, target=steady, dt_s=1.5, tau_s=TEMP_TAU_S)
    assert gpu.mem_temp == lag(current=52.0, target=steady + 6.0, dt_s=1.5, tau_s=MEM_TEMP_TAU_S)
    before = (gpu.sm, gpu.temp, gpu.fb_used)
    step(gpu, t=1.5, load=load)  # no time passed: nothing moves
    assert (gpu.sm, gpu.temp, gpu.fb_used) == before
