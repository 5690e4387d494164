"""Alert rules: a metric compared with a threshold for a duration, scoped by label matchers."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.alerting.domain.matchers import LABEL_NAME_RE, Matcher, MatchOp

__all__ = [
    "COUNTER_METRICS",
    "DEFAULT_RULES",
    "GPU_LOST_METRIC",
    "METRICS",
    "SCOPE_LABELS",
    "THROTTLE_SW_POWER_CAP_BIT",
    "Comparator",
    "Rule",
    "RuleBook",
    "RuleKey",
    "RuleKind",
    "Severity",
]

# Per-GPU, per-second sample fields published by telemetry.
METRICS = frozenset(
    {
        "sm_util_pct", "mem_util_pct", "fb_used_bytes", "fb_total_bytes", "fb_used_pct",
        "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "gpu_temp_c", "mem_temp_c", "power_w",
        "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "ecc_sbe_count", "ecc_dbe_count",
        "xid_count", "throttle_reasons",
    }
)  # fmt: skip
# A lost GPU reports no fields; the handler turns the "GPU lost" fault signal into this 0/1 gauge.
GPU_LOST_METRIC = "gpu_lost"
COUNTER_METRICS = frozenset({"ecc_sbe_count", "ecc_dbe_count", "xid_count"})
SCOPE_LABELS = frozenset({"node", "model", "pool", "tenant", "workload", "gpu"})
# NVML's clocksThrottleReasonSwPowerCap is 0x4.
THROTTLE_SW_POWER_CAP_BIT = 2
#: (owner tenant or None, name): what identifies a rule; the name alone is unique only per owner.
RuleKey = tuple[str | None, str]

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt,
    "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}  # fmt: skip


class Comparator(StrEnum):
    """Comparison of the observed value against the threshold, spelled as in PromQL."""

    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="
    EQ = "=="
    NE = "!="

    def holds(self, value: float, threshold: float) -> bool:
        """Whether `value <op> threshold`."""
        return _COMPARE[self.value](value, threshold)


class Severity(StrEnum):
    """How loudly an alert should page."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


class RuleKind(StrEnum):
    """What the condition looks at."""

    THRESHOLD = "threshold"  # the last value of a gauge
    INCREASE = "increase"  # how much a counter grew within `window` (XIDs, ECC errors)
    ABSENT = "absent"  # no sample at all from a node for `for_duration`


class Rule(BaseModel):
    """One alert rule; a rule with an owner tenant only ever sees that tenant's series."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Alert name (becomes the alertname label).")
    kind: RuleKind = RuleKind.THRESHOLD
    metric: str = Field(description="Sample field the condition reads.")
    comparator: Comparator = Comparator.GT
    threshold: float = Field(default=0.0, allow_inf_nan=False, description="A finite number.")
    for_duration: timedelta = Field(default=timedelta(0), description="Prometheus `for`.")
    keep_firing_for: timedelta | None = None
    window: timedelta | None = Field(default=None, description="Increase window (INCREASE only).")
    bit: int | None = Field(default=None, ge=0, le=63, description="Test this bit of a bitmask field.")
    matchers: tuple[Matcher, ...] = ()
    severity: Severity = Severity.WARNING
    summary: str = ""
    runbook_url: str | None = None
    owner_tenant: str | None = Field(default=None, description="None for a global (admin) rule.")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not LABEL_NAME_RE.fullmatch(name):
            raise ValueError(f"alert names are identifiers, got {name!r}")
        return name

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, metric: str) -> str:
        if metric not in METRICS | {GPU_LOST_METRIC}:
            raise ValueError(f"unknown metric {metric!r}")
        return metric

    @field_validator("matchers")
    @classmethod
    def _scope_labels_only(cls, matchers: tuple[Matcher, ...]) -> tuple[Matcher, ...]:
        unknown = {m.name for m in matchers} - SCOPE_LABELS
        if unknown:
            raise ValueError(f"rules are scoped only by {sorted(SCOPE_LABELS)}, not {sorted(unknown)}")
        return matchers

    @model_validator(mode="after")
    def _consistent_kind(self) -> Self:
        if (self.kind is RuleKind.INCREASE) != (self.window is not None):
            raise ValueError("an increase rule needs a window, and only an increase rule has one")
        if self.kind is RuleKind.ABSENT and self.for_duration <= timedelta(0):
            raise ValueError("an absence rule needs a positive for_duration")
        if self.for_duration < timedelta(0) or (self.keep_firing_for or timedelta(0)) < timedelta(0):
            raise ValueError("durations are never negative")
        return self

    @property
    def key(self) -> RuleKey:
        """The rule's identity: names are unique per owner (None for the global rules)."""
        return (self.owner_tenant, self.name)

    def owns(self, labels: Mapping[str, str]) -> bool:
        """Whether an alert of this name on a series with these labels can be this rule's."""
        return self.owner_tenant is None or labels.get("tenant") == self.owner_tenant

    def scope(self) -> tuple[Matcher, ...]:
        """Matchers applied to series: a tenant's rule is always confined to its own tenant."""
        if self.owner_tenant is None:
            return self.matchers
        return (*self.matchers, Matcher(name="tenant", op=MatchOp.EQ, value=self.owner_tenant))

    def observe(self, value: float) -> float:
        """The value the comparator sees: the selected bit (0 or 1) for bitmask rules."""
        return float((int(value) >> self.bit) & 1) if self.bit is not None else value

    def condition(self, value: float) -> bool:
        """Whether the observed value breaches the rule."""
        return self.comparator.holds(self.observe(value), self.threshold)

    def compiled_condition(self) -> Callable[[float], bool]:
        """`condition` as a plain closure (no enum or model lookups): for the per-sample hot path."""
        compare, threshold, bit = _COMPARE[self.comparator.value], self.threshold, self.bit
        if bit is None:
            return lambda value: compare(float(value), threshold)
        return lambda value: compare(float((int(float(value)) >> bit) & 1), threshold)


class RuleBook:
    """Rules by the name their alerts carry on a series: the series' tenant's own rule, else a global one.

    Two tenants may each have a rule of the same name; a tenant's names never repeat a global rule's.
    """

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self._by_key = {r.key: r for r in rules}

    def get(self, name: str, labels: Mapping[str, str]) -> Rule | None:
        """The rule whose alert `name` is on a series with these labels, if any."""
        tenant = labels.get("tenant")
        own = self._by_key.get((tenant, name)) if tenant else None
        return own or self._by_key.get((None, name))


def _runbook(name: str) -> str:
    return f"https://runbooks.gpucloud.dev/alerting/{name}"


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        name="GpuMemoryHigh",
        metric="fb_used_pct",
        comparator=Comparator.GT,
        threshold=90,
        for_duration=timedelta(minutes=5),
        severity=Severity.CRITICAL,
        summary="GPU memory above 90% for 5 minutes: out-of-memory risk",
        runbook_url=_runbook("GpuMemoryHigh"),
    ),
    Rule(
        name="GpuTemperatureHigh",
        metric="gpu_temp_c",
        comparator=Comparator.GT,
        threshold=85,
        for_duration=timedelta(minutes=2),
        severity=Severity.WARNING,
        summary="GPU above 85 °C for 2 minutes",
        runbook_url=_runbook("GpuTemperatureHigh"),
    ),
    Rule(
        name="GpuFatalXid",
        kind=RuleKind.INCREASE,
        metric="xid_count",
        comparator=Comparator.GT,
        threshold=0,
        window=timedelta(minutes=5),
        severity=Severity.CRITICAL,
        summary="GPU reported an XID error",
        runbook_url=_runbook("GpuFatalXid"),
    ),
    Rule(
        name="GpuEccDoubleBit",
        kind=RuleKind.INCREASE,
        metric="ecc_dbe_count",
        comparator=Comparator.GT,
        threshold=0,
        window=timedelta(minutes=5),
        severity=Severity.CRITICAL,
        summary="Uncorrectable (double-bit) ECC error",
        runbook_url=_runbook("GpuEccDoubleBit"),
    ),
    Rule(
        name="GpuPowerCapped",
        metric="throttle_reasons",
        bit=THROTTLE_SW_POWER_CAP_BIT,
        comparator=Comparator.EQ,
        threshold=1,
        for_duration=timedelta(minutes=10),
        severity=Severity.WARNING,
        summary="GPU clocks held down by the power cap for 10 minutes",
        runbook_url=_runbook("GpuPowerCapped"),
    ),
    Rule(
        name="GpuLost",
        metric=GPU_LOST_METRIC,
        comparator=Comparator.EQ,
        threshold=1,
        severity=Severity.CRITICAL,
        summary="GPU fell off the bus",
        runbook_url=_runbook("GpuLost"),
    ),
    Rule(
        name="NodeAgentSilent",
        kind=RuleKind.ABSENT,
        metric="gpu_temp_c",
        for_duration=timedelta(seconds=30),
        severity=Severity.CRITICAL,
        summary="No sample from the node agent for 30 seconds",
        runbook_url=_runbook("NodeAgentSilent"),
    ),
)
