"""Index of free slots: per slot type and label signature, node bins bucketed by free count.

Best fit for k slots on one node is "the bin with the smallest free count >= k", found by walking at most
max-count buckets instead of scanning GPUs. Taking and returning slots moves a bin between buckets in O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from services.scheduler.domain.cluster import ClusterState, Grant, SlotType, slots_of
from services.scheduler.domain.errors import StateConflict

__all__ = ["BinKey", "FreeIndex", "Signature", "SlotKey"]

Signature = tuple[tuple[str, str], ...]
BinKey = tuple[str, SlotType, Signature]
SlotKey = tuple[str, str]


class _Buckets:
    """Bins of one slot type and signature, grouped by how many free slots each has."""

    __slots__ = ("by_count", "total")

    def __init__(self) -> None:
        self.by_count: list[dict[BinKey, None]] = [{}]
        self.total = 0

    def move(self, key: BinKey, old: int, new: int) -> None:
        if old:
            del self.by_count[old][key]
        if new:
            while len(self.by_count) <= new:
                self.by_count.append({})
            self.by_count[new][key] = None
        self.total += new - old

    def copy(self) -> _Buckets:
        new = _Buckets()
        new.by_count = [dict(bucket) for bucket in self.by_count]
        new.total = self.total
        return new

    def smallest_at_least(self, k: int) -> tuple[int, BinKey] | None:
        for count in range(k, len(self.by_count)):
            bucket = self.by_count[count]
            if bucket:
                return count, next(iter(bucket))
        return None


class FreeIndex:
    """Free slots of healthy GPUs; every slot is either free here or held by exactly one workload."""

    def __init__(self) -> None:
        self._info: dict[SlotKey, tuple[BinKey, Grant]] = {}
        self._bins: dict[BinKey, list[Grant]] = {}
        self._types: dict[SlotType, dict[Signature, _Buckets]] = {}
        self._free: set[SlotKey] = set()
        self._sig_cache: dict[Signature, tuple[Signature, ...]] = {}

    @classmethod
    def from_cluster(cls, state: ClusterState, *, base: FreeIndex | None = None) -> FreeIndex:
        """Index every healthy slot, minus those already held; a slot held twice is a StateConflict.

        ``base``, when given, is the index of exactly ``state.gpus`` with nothing held (``from_cluster``
        of them and no allocations): it is copied instead of registering every slot again.
        """
        if base is not None:
            index = base.copy()
        else:
            index = cls()
            for gpu in state.gpus:
                if gpu.healthy:
                    signature: Signature = tuple(sorted(gpu.labels.items()))
                    for stype, grant in slots_of(gpu):
                        index._register(stype, grant, signature)
        held: set[SlotKey] = set()
        for alloc in state.allocations:
            for grant in alloc.grants:
                if grant.key in held:
                    raise StateConflict(f"slot {grant.key} is held twice (seen again in {alloc.workload_id})")
                held.add(grant.key)
        index.remove(held)
        return index

    def copy(self) -> FreeIndex:
        """An independent copy (the slot descriptions, never changed after registration, are shared)."""
        new = FreeIndex.__new__(FreeIndex)
        new._info = self._info
        new._bins = {key: list(free) for key, free in self._bins.items()}
        new._types = {t: {sig: b.copy() for sig, b in per.items()} for t, per in self._types.items()}
        new._free = set(self._free)
        new._sig_cache = dict(self._sig_cache)
        return new

    def _register(self, stype: SlotType, grant: Grant, signature: Signature) -> None:
        key: BinKey = (grant.node, stype, signature)
        self._info[grant.key] = (key, grant)
        self._bins.setdefault(key, [])
        self._types.setdefault(stype, {}).setdefault(signature, _Buckets())
        self._add_one(grant.key)

    def _add_one(self, slot: SlotKey) -> None:
        key, grant = self._info[slot]
        free = self._bins[key]
        # Returned slots go to the front: take() pops from the back, so slots free all along are used
        # before slots that are only free "if" (a release being simulated, a preemption being weighed).
        free.insert(0, grant)
        self._free.add(slot)
        self._types[key[1]][key[2]].move(key, len(free) - 1, len(free))

    def add(self, slots: Iterable[SlotKey]) -> list[SlotKey]:
        """Return slots to the free pool; unknown (unhealthy) or already free slots are skipped."""
        added = [s for s in slots if s in self._info and s not in self._free]
        for slot in added:
            self._add_one(slot)
        return added

    def remove(self, slots: Iterable[SlotKey]) -> None:
        """Mark specific slots as no longer free."""
        for slot in slots:
            if slot in self._free:
                key, grant = self._info[slot]
                free = self._bins[key]
                free.remove(grant)
                self._free.discard(slot)
                self._types[key[1]][key[2]].move(key, len(free) + 1, len(free))

    def take(self, key: BinKey, count: int) -> list[Grant]:
        """Take `count` free slots out of one bin (the most recently freed first, to keep GPUs packed)."""
        free = self._bins[key]
        taken = [free.pop() for _ in range(count)]
        for grant in taken:
            self._free.discard(grant.key)
        self._types[key[1]][key[2]].move(key, len(free) + count, len(free))
        return taken

    def type_of(self, slot: SlotKey) -> SlotType | None:
        """The slot type of a known healthy slot."""
        info = self._info.get(slot)
        return info[0][1] if info else None

    def is_free(self, slot: SlotKey) -> bool:
        """Whether a slot is free now."""
        return slot in self._free

    def grant_of(self, slot: SlotKey) -> Grant | None:
        """The grant describing a known healthy slot."""
        info = self._info.get(slot)
        return info[1] if info else None

    def slot_types(self) -> Iterable[SlotType]:
        """Every slot type a healthy GPU offers."""
        return self._types.keys()

    def signatures(self, constraints: Mapping[str, str]) -> tuple[Signature, ...]:
        """Label signatures satisfying the constraints (cached per constraint set)."""
        ckey: Signature = tuple(sorted(constraints.items()))
        found = self._sig_cache.get(ckey)
        if found is None:
            every = {sig for per_sig in self._types.values() for sig in per_sig}
            found = tuple(s for s in every if all(dict(s).get(k) == v for k, v in ckey))
            self._sig_cache[ckey] = found
        return found

    def offering(self, stype: SlotType, sigs: tuple[Signature, ...]) -> tuple[Signature, ...]:
        """The signatures among ``sigs`` that have slots of this type at all, free or held."""
        per_sig = self._types.get(stype, {})
        return tuple(s for s in sigs if s in per_sig)

    def best_bin(self, stype: SlotType, sigs: tuple[Signature, ...], count: int) -> BinKey | None:
        """The bin with the fewest free slots that still holds `count` (best fit)."""
        per_sig = self._types.get(stype)
        if per_sig is None:
            return None
        best: tuple[int, BinKey] | None = None
        for sig in sigs:
            buckets = per_sig.get(sig)
            found = buckets.smallest_at_least(count) if buckets else None
            if found and (best is None or found[0] < best[0]):
                best = found
        return best[1] if best else None

    def total_free(self, stype: SlotType, sigs: tuple[Signature, ...]) -> int:
        """Free slots of a type across matching signatures."""
        per_sig = self._types.get(stype, {})
        return sum(per_sig[s].total for s in sigs if s in per_sig)

    def bins_fullest_first(
        self, stype: SlotType, sigs: tuple[Signature, ...]
    ) -> Iterator[tuple[BinKey, int]]:
        """Bins with free slots, most free first (to span as few nodes as possible)."""
        per_sig = self._types.get(stype, {})
        rows = [
            (c, k) for s in sigs if s in per_sig for c, b in enumerate(per_sig[s].by_count) for k in b if c
        ]
        for count, key in sorted(rows, key=lambda r: -r[0]):
            yield key, count
