"""Alert rules: a metric compared with a threshold for a duration, scoped by label matchers."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.alerting.domain.matchers import LABEL_NAME_RE, Matcher, MatchOp
from services.alerting.domain.templates import TemplateError, compile_template

__all__ = [
    "COUNTER_METRICS",
    "DEFAULT_GROUP",
    "DEFAULT_RULES",
    "GPU_LOST_METRIC",
    "METRICS",
    "SCOPE_LABELS",
    "THROTTLE_SW_POWER_CAP_BIT",
    "XID_CODES",
    "XID_LABEL",
    "XID_METRIC",
    "Comparator",
    "EvaluationMode",
    "Rule",
    "RuleBook",
    "RuleKey",
    "RuleKind",
    "Severity",
    "check_templates",
]

# Per-GPU, per-second sample fields published by telemetry.
METRICS = frozenset(
    {
        "sm_util_pct", "mem_util_pct", "fb_used_bytes", "fb_total_bytes", "fb_used_pct",
        "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "gpu_temp_c", "mem_temp_c", "power_w",
        "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "ecc_sbe_count", "ecc_dbe_count",
        "xid_count", "throttle_reasons", "tensor_active_pct",
    }
)  # fmt: skip
# A lost GPU reports no fields; the handler turns the "GPU lost" fault signal into this 0/1 gauge.
GPU_LOST_METRIC = "gpu_lost"
COUNTER_METRICS = frozenset({"ecc_sbe_count", "ecc_dbe_count", "xid_count"})
SCOPE_LABELS = frozenset({"node", "model", "pool", "tenant", "workload", "gpu"})
#: A rule on this metric with a matcher on this label reads one series per GPU and XID code (the
#: catalog's codes from 0, and any other code the GPU raised) instead of the GPU's total.
XID_METRIC, XID_LABEL = "xid_count", "xid"
#: The codes of telemetry's XID catalog (services/telemetry/domain/xid.py; a test holds the two equal):
#: each has a per-code series from 0, so increase() sees its first XID.
XID_CODES: tuple[int, ...] = (13, 31, 43, 48, 63, 64, 74, 79, 94, 95, 119)
# NVML's clocksThrottleReasonSwPowerCap is 0x4.
THROTTLE_SW_POWER_CAP_BIT = 2
DEFAULT_GROUP = "gpucloud"
#: Labels the service sets itself: a rule's own labels may not override them.
_RESERVED_LABELS = frozenset({"alertname", "severity", "owner_tenant", "__name__"})
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
    """The usual severities (a rule's `severity` label may be any other word too)."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


class RuleKind(StrEnum):
    """What the condition looks at."""

    THRESHOLD = "threshold"  # the last value of a gauge
    INCREASE = "increase"  # how much a counter grew within `window` (XIDs, ECC errors)
    ABSENT = "absent"  # no sample at all from a node for `for_duration`
    PROMQL = "promql"  # any PromQL expression (`expr`), evaluated in prometheus mode only


class EvaluationMode(StrEnum):
    """How a rule is evaluated: per sample (`stream`, the engine) or on its group's interval grid as
    Prometheus does (`prometheus`, prometheus_mode.py)."""

    STREAM = "stream"
    PROMETHEUS = "prometheus"


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
    severity: str = Field(
        default=Severity.WARNING.value, min_length=1, description="The severity label (any word)."
    )
    summary: str = ""
    runbook_url: str | None = None
    labels: dict[str, str] = Field(default_factory=dict, description="Other labels the alert carries.")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Other annotations (templates, expanded when notifying)."
    )
    group: str = Field(default=DEFAULT_GROUP, min_length=1, description="The rule file group it came in.")
    interval: timedelta | None = Field(default=None, description="The group's evaluation interval.")
    owner_tenant: str | None = Field(default=None, description="None for a global (admin) rule.")
    mode: EvaluationMode = Field(default=EvaluationMode.STREAM, description="stream or prometheus.")
    expr: str | None = Field(
        default=None,
        max_length=4096,
        description="The PromQL expression of a promql rule (`metric` then names a series it reads).",
    )

    def __hash__(self) -> int:
        return hash(self.key)

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

    @field_validator("severity", mode="before")
    @classmethod
    def _severity_text(cls, severity: object) -> object:
        return severity.value if isinstance(severity, Severity) else severity

    @field_validator("labels")
    @classmethod
    def _own_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for name, value in labels.items():
            if not LABEL_NAME_RE.fullmatch(name) or name in _RESERVED_LABELS:
                raise ValueError(f"label {name!r} cannot be set by a rule")
            if "{{" in value:
                raise ValueError(f"label {name!r}: templates in labels are not supported (use an annotation)")
        return labels

    @field_validator("annotations")
    @classmethod
    def _annotation_names(cls, annotations: dict[str, str]) -> dict[str, str]:
        bad = [n for n in annotations if not LABEL_NAME_RE.fullmatch(n) or n in ("summary", "runbook_url")]
        if bad:
            raise ValueError(f"annotation {bad[0]!r} cannot be set here")
        return annotations

    @model_validator(mode="after")
    def _consistent_kind(self) -> Self:
        if (self.kind is RuleKind.INCREASE) != (self.window is not None):
            raise ValueError("an increase rule needs a window, and only an increase rule has one")
        if self.kind is RuleKind.ABSENT and self.for_duration <= timedelta(0):
            raise ValueError("an absence rule needs a positive for_duration")
        if self.for_duration < timedelta(0) or (self.keep_firing_for or timedelta(0)) < timedelta(0):
            raise ValueError("durations are never negative")
        if self.interval is not None and self.interval <= timedelta(0):
            raise ValueError("a group interval is positive")
        if (self.kind is RuleKind.PROMQL) != bool(self.expr):
            raise ValueError("a promql rule needs an expr, and only a promql rule has one")
        if self.kind is RuleKind.PROMQL and self.mode is not EvaluationMode.PROMETHEUS:
            raise ValueError("a promql rule evaluates in prometheus mode (mode: prometheus)")
        check_templates(self.all_annotations())
        return self

    @property
    def key(self) -> RuleKey:
        """The rule's identity: names are unique per owner (None for the global rules)."""
        return (self.owner_tenant, self.name)

    def all_labels(self) -> dict[str, str]:
        """The labels the rule adds to its alerts: its own, then severity."""
        return {**self.labels, "severity": self.severity}

    def all_annotations(self) -> dict[str, str]:
        """Every annotation, as in a rule file (summary and runbook_url included)."""
        shipped = {"summary": self.summary}
        if self.runbook_url:
            shipped["runbook_url"] = self.runbook_url
        return {**shipped, **self.annotations}

    def owns(self, labels: Mapping[str, str]) -> bool:
        """Whether an alert of this name on a series with these labels can be this rule's."""
        return self.owner_tenant is None or labels.get("tenant") == self.owner_tenant

    def scope(self) -> tuple[Matcher, ...]:
        """Matchers applied to series: a tenant's rule is always confined to its own tenant."""
        if self.owner_tenant is None:
            return self.matchers
        return (*self.matchers, Matcher(name="tenant", op=MatchOp.EQ, value=self.owner_tenant))

    @property
    def per_xid(self) -> bool:
        """Whether the rule reads the per-code XID series (a stream rule on xid_count matching on xid)."""
        return (
            self.mode is EvaluationMode.STREAM
            and self.metric == XID_METRIC
            and any(m.name == XID_LABEL for m in self.matchers)
        )

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


def check_templates(annotations: Mapping[str, str]) -> None:
    """Refuse (ValueError naming the annotation) a template Prometheus would refuse, or we cannot expand."""
    for name, text in annotations.items():
        try:
            compile_template(text)
        except TemplateError as error:
            raise ValueError(f"annotation {name!r}: template does not parse: {error}") from None


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
