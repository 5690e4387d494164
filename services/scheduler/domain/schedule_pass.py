"""One scheduling pass over an ordered queue; holds the mutable working state so the API stays pure.

Work on one GPU model never waits for work blocked on another: the reserved-pool rule is judged per pool
and model (pools.py), a reservation holds only the slots it reserves, and without backfill a blocked
workload holds back only work that could use the slot types it waits for.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from services.scheduler.domain.backfill import Reservation, release_order, reserve_head
from services.scheduler.domain.cluster import (
    DEFAULT_POOL,
    Allocation,
    ClusterState,
    Grant,
    SlotKind,
    SlotType,
    slots_of,
)
from services.scheduler.domain.decisions import (
    Decisions,
    Placement,
    QueueEntry,
    QueuePosition,
    SchedulerConfig,
    WaitReason,
)
from services.scheduler.domain.fit import Ask, Option, Plan, find_plan, options_for, plan_units, take_plan
from services.scheduler.domain.index import FreeIndex, Signature, SlotKey
from services.scheduler.domain.model import WorkloadKind
from services.scheduler.domain.pools import PoolBook, PoolClass
from services.scheduler.domain.preemption import PreemptionProposal, propose_preemption
from services.scheduler.domain.quota import QuotaLimits, QuotaUsage, check, demand_of, reserve
from services.scheduler.domain.reserved import admits, is_high

__all__ = ["SchedulePass", "tenant_usage"]


def tenant_usage(allocations: Iterable[Allocation]) -> dict[str, QuotaUsage]:
    """Quota usage per tenant implied by live allocations (what a Redis rebuild recomputes)."""
    usage: dict[str, QuotaUsage] = defaultdict(QuotaUsage)
    for a in allocations:
        whole = sum(1 for g in a.grants if g.kind is SlotKind.WHOLE)
        add = demand_of(gpus=whole, units=a.units)
        usage[a.tenant] = reserve(tenant=a.tenant, limits=QuotaLimits(), usage=usage[a.tenant], demand=add)
    return usage


def _class_of(sig: Signature, stype: SlotType) -> PoolClass:
    return (dict(sig).get("pool", DEFAULT_POOL), stype.model)


def _demand(option: Option) -> QuotaUsage:
    whole = option.count if option.stype.kind is SlotKind.WHOLE else 0
    return demand_of(gpus=whole, units=plan_units(option))


class SchedulePass:
    """Working state of one pass: free index, pool book, quota usage, reservations and results."""

    def __init__(
        self,
        *,
        state: ClusterState,
        now: datetime,
        config: SchedulerConfig,
        quotas: Mapping[str, QuotaLimits],
        base_index: FreeIndex | None = None,
    ) -> None:
        self._state, self._now, self._config, self._quotas = state, now, config, quotas
        self._index = FreeIndex.from_cluster(state, base=base_index)
        self._pools = PoolBook(state=state, config=config.reserved)
        self._usage = tenant_usage(state.allocations)
        self._types = tuple(self._index.slot_types())
        self._options: dict[object, tuple[Option, ...]] = {}
        self._class_demand: dict[object, dict[PoolClass, float]] = {}
        self._counted: dict[str, dict[PoolClass, float]] = {}  # waiting demand counted per workload
        self._reservation: Reservation | None = None
        self._aside: list[tuple[datetime, set[SlotKey]]] = []
        self._claimed: set[str] = set()
        self._preempt_left = config.preemption_attempts
        self._head_left = config.head_attempts
        self._stopped: set[SlotType] = set()  # without backfill: types closed behind a blocked workload
        self._placements: list[Placement] = []
        self._waiting: list[QueuePosition] = []
        self._preemptions: list[PreemptionProposal] = []

    def run(self, ordered: Sequence[QueueEntry]) -> Decisions:
        """Decide every entry in order and return the decisions."""
        asks = [self._ask(e) for e in ordered]
        for ask in asks:
            self._counted[ask.workload_id] = self._demand_by_class(ask)
            self._pools.wait(demand=self._counted[ask.workload_id], priority=ask.priority)
        for entry, ask in zip(ordered, asks, strict=True):
            self._decide(entry, ask)
        return Decisions(
            tuple(self._placements), tuple(self._waiting), tuple(self._preemptions), self._reservation
        )

    def _demand_by_class(self, ask: Ask) -> dict[PoolClass, float]:
        """Units the workload would take in each (pool, model) it could run on: its best option there.

        Only classes that offer one of its slot types under its constraints count, so work waiting for
        H100s never makes the pool's A100s look contended.
        """
        key = (ask.options, ask.sigs)
        found = self._class_demand.get(key)
        if found is None:
            found = {}
            for option in ask.options:
                for sig in self._index.offering(option.stype, ask.sigs):
                    found.setdefault(_class_of(sig, option.stype), plan_units(option))
            self._class_demand[key] = found
        return found

    def _ask(self, entry: QueueEntry) -> Ask:
        w = entry.workload
        training = w.kind is WorkloadKind.JOB
        options = self._options.get((w.resources, training))
        if options is None:
            options = options_for(w.resources, self._types, training=training)
            self._options[(w.resources, training)] = options
        avoid = self._slots_on(entry.avoid_gpus) if entry.avoid_gpus else frozenset()
        return Ask(w.id, entry.priority, options, self._index.signatures(w.constraints), w.gang, avoid)

    def _slots_on(self, gpus: frozenset[str]) -> frozenset[SlotKey]:
        """Every slot of these GPUs, free or not."""
        return frozenset(g.key for gpu in self._state.gpus if gpu.uuid in gpus for _t, g in slots_of(gpu))

    def _decide(self, entry: QueueEntry, ask: Ask) -> None:
        """Decide one entry; the GPUs a migration moves away from are closed to it alone, for its turn."""
        if not ask.avoid:
            return self._place_or_wait(entry, ask)
        hidden = [k for k in ask.avoid if self._index.is_free(k)]
        self._index.remove(hidden)
        self._place_or_wait(entry, ask)
        self._index.add(hidden)
        return None

    def _place_or_wait(self, entry: QueueEntry, ask: Ask) -> None:
        if not ask.options:
            return self._wait(entry, WaitReason.NO_MATCHING_GPU)
        if self._stopped:  # only the slot types a blocked workload waits for are closed to those behind it
            ask = replace(ask, options=tuple(o for o in ask.options if o.stype not in self._stopped))
            if not ask.options:
                return self._wait(entry, WaitReason.CAPACITY)
        lent = self._lend_aside(entry, ask.avoid)
        found = find_plan(self._index, options=ask.options, sigs=ask.sigs, gang=ask.gang)
        reason = self._policy_block(entry, *found) if found else None
        grants = take_plan(self._index, found[1]) if found and reason is None else None
        self._index.remove(lent)  # borrowed slots not taken go back aside
        if found is None:
            return self._blocked(entry, ask)
        if grants is None:
            return self._wait(entry, reason or WaitReason.CAPACITY)
        self._commit(entry, found[0], grants)
        return None

    def _lend_aside(self, entry: QueueEntry, avoid: frozenset[SlotKey]) -> list[SlotKey]:
        """Reserved slots this workload may borrow because its time limit ends before they are needed."""
        limit = entry.workload.time_limit
        if not self._aside or limit is None:
            return []
        end = self._now + limit
        return [
            k
            for start, keys in self._aside
            if end <= start
            for k in self._index.add(keys - avoid if avoid else keys)
        ]

    def _policy_block(self, entry: QueueEntry, option: Option, plan: Plan) -> WaitReason | None:
        by_class: dict[PoolClass, float] = defaultdict(float)
        for (_node, stype, sig), count in plan:
            by_class[_class_of(sig, stype)] += count * stype.units
        for cls, units in by_class.items():
            load = self._pools.load(cls)
            if not admits(priority=entry.priority, units=units, load=load, config=self._config.reserved):
                return WaitReason.RESERVED_POOL
        limits = self._quotas.get(entry.workload.tenant)
        usage = self._usage.get(entry.workload.tenant, QuotaUsage())
        if limits is not None and check(limits=limits, usage=usage, demand=_demand(option)):
            return WaitReason.QUOTA
        return None

    def _commit(self, entry: QueueEntry, option: Option, grants: tuple[Grant, ...]) -> None:
        w = entry.workload
        taken = {g.key for g in grants}
        for _start, keys in self._aside:
            keys.difference_update(taken)  # a borrower holds them now; never lend them twice
        backfilled = self._reservation is not None
        self._placements.append(Placement(w.id, w.tenant, grants, entry.priority, backfilled))
        self._pools.hold(grants=grants, priority=entry.priority)
        self._pools.wait(demand=self._counted.pop(w.id, {}), priority=entry.priority, sign=-1)
        usage = self._usage.get(w.tenant, QuotaUsage())
        self._usage[w.tenant] = reserve(
            tenant=w.tenant, limits=QuotaLimits(), usage=usage, demand=_demand(option)
        )

    def _blocked(self, entry: QueueEntry, ask: Ask) -> None:
        if self._try_preempt(entry, ask):
            return
        estimate = None
        if not self._config.backfill:
            self._stopped.update(o.stype for o in ask.options)
        elif self._reservation is None and self._head_left > 0:
            self._head_left -= 1
            releases = release_order(self._state.allocations)
            self._reservation = reserve_head(self._index, head=ask, releases=releases, now=self._now)
            if self._reservation is not None:
                self._aside.append((self._reservation.start, set(self._reservation.set_aside)))
                estimate = self._reservation.start
        self._wait(entry, WaitReason.CAPACITY, estimate)

    def _try_preempt(self, entry: QueueEntry, ask: Ask) -> bool:
        if self._preempt_left <= 0 or not is_high(priority=ask.priority, config=self._config.reserved):
            return False
        self._preempt_left -= 1
        found = propose_preemption(
            self._index,
            preemptor=ask,
            allocations=self._state.allocations,
            claimed=self._claimed,
            high_threshold=self._config.reserved.high_threshold,
            now=self._now,
            grace=self._config.preemption_grace,
        )
        if found is None:
            return False
        proposals, grants = found
        self._preemptions.extend(proposals)
        self._claimed.update(p.victim_id for p in proposals)
        victim_keys = {g.key for p in proposals for g in p.grants}
        deadline = proposals[0].deadline
        self._aside.append((deadline, {g.key for g in grants} - victim_keys))
        self._wait(entry, WaitReason.PREEMPTING, deadline)
        return True

    def _wait(self, entry: QueueEntry, reason: WaitReason, estimate: datetime | None = None) -> None:
        position = len(self._waiting) + 1
        self._waiting.append(QueuePosition(entry.workload.id, position, entry.priority, reason, estimate))
