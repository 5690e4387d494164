"""Samples per series in time order, indexed by metric name: what a PromQL selector reads.

Times are kept as integer milliseconds, as Prometheus keeps them, so window edges compare exactly.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ["STALE_NAN", "STALE_NAN_BITS", "Series", "SeriesStore", "is_stale", "to_ms"]

#: Prometheus's staleness marker: a NaN with its own bit pattern (value.StaleNaN).
STALE_NAN_BITS = 0x7FF0000000000002
STALE_NAN: float = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]
_STALE_BYTES = struct.pack("<d", STALE_NAN)

LabelKey = tuple[tuple[str, str], ...]


def is_stale(value: float) -> bool:
    """Whether `value` is the staleness marker (an ordinary NaN is not)."""
    return value != value and struct.pack("<d", value) == _STALE_BYTES


def to_ms(t: float) -> int:
    """Unix seconds to the integer milliseconds Prometheus computes with."""
    return round(t * 1000)


@dataclass(slots=True)
class Series:
    """One series: its labels (with __name__) and parallel, time-ordered lists of ms times and values."""

    labels: dict[str, str]
    times: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, t_ms: int, value: float) -> None:
        """Append in order; a late sample is inserted in place, one at an existing time replaces it."""
        if not self.times or t_ms > self.times[-1]:
            self.times.append(t_ms)
            self.values.append(value)
            return
        i = bisect_left(self.times, t_ms)
        if self.times[i] == t_ms:
            self.values[i] = value
            return
        self.times.insert(i, t_ms)
        self.values.insert(i, value)

    def latest(self, ref_ms: int, lookback_ms: int) -> tuple[int, float] | None:
        """The last sample in [ref - lookback, ref], or None when there is none or it is a stale marker."""
        i = bisect_right(self.times, ref_ms) - 1
        if i < 0 or self.times[i] < ref_ms - lookback_ms:
            return None
        value = self.values[i]
        return None if is_stale(value) else (self.times[i], value)

    def window(self, start_ms: int, end_ms: int) -> tuple[list[int], list[float]]:
        """The samples in [start, end] (closed both ends, as in Prometheus 2.x), stale markers left out."""
        lo, hi = bisect_left(self.times, start_ms), bisect_right(self.times, end_ms)
        times, values = self.times[lo:hi], self.values[lo:hi]
        if any(v != v for v in values):
            kept = [(t, v) for t, v in zip(times, values, strict=True) if not is_stale(v)]
            times, values = [t for t, _ in kept], [v for _, v in kept]
        return times, values


class SeriesStore:
    """Samples per series (labels include __name__), kept in time order; t in float unix seconds."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[LabelKey, Series]] = {}
        # Per name, the series in label order, as Prometheus's storage yields them: float sums over
        # series (avg, stddev) then add up in the same order. Rebuilt when a series comes or goes.
        self._ordered: dict[str, list[Series]] = {}

    def add(self, labels: Mapping[str, str], t: float, value: float) -> None:
        """Record one sample; a stale marker is recorded by passing STALE_NAN as the value."""
        self.series(labels).add(to_ms(t), value)

    def series(self, labels: Mapping[str, str]) -> Series:
        """The series of these labels, made when new: a feeder that keeps it adds samples with
        `Series.add(to_ms(t), value)` without the lookup. Valid until `trim` reports it dropped."""
        kept = {k: v for k, v in sorted(labels.items()) if v}  # an empty label is no label, as in Prometheus
        key = tuple(kept.items())
        named = self._by_name.setdefault(kept.get("__name__", ""), {})
        series = named.get(key)
        if series is None:
            series = named[key] = Series(labels=kept)
            self._ordered.pop(kept.get("__name__", ""), None)
        return series

    def trim(self, before: float) -> int:
        """Drop samples older than `before`, and the series this leaves empty; how many series went."""
        cut, dropped = to_ms(before), 0
        for name, named in list(self._by_name.items()):
            for key, series in list(named.items()):
                i = bisect_left(series.times, cut)
                if i:
                    del series.times[:i]
                    del series.values[:i]
                if not series.times:
                    del named[key]
                    self._ordered.pop(name, None)
                    dropped += 1
            if not named:
                del self._by_name[name]
        return dropped

    def named(self, name: str) -> Iterator[Series]:
        """Every series whose __name__ is `name`, in label order."""
        ordered = self._ordered.get(name)
        if ordered is None:
            named = self._by_name.get(name, {})
            ordered = self._ordered[name] = [named[key] for key in sorted(named)]
        return iter(ordered)

    def __len__(self) -> int:
        return sum(len(named) for named in self._by_name.values())
