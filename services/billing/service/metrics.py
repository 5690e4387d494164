"""Prometheus metrics of billing: what the ledger was posted, by tenant and project."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter

from libs.common.observability.metrics import TENANT_REGISTRY
from services.billing.domain.entry_records import EntryRecord

__all__ = ["POSTED", "count_posted", "posted_kind"]

POSTED = Counter(
    "billing_posted_micros_total",
    "Amounts posted to the ledger in micro-units of the currency, by tenant, project and kind: charge, "
    "reversal (of a charge) or credit; each counted as a positive amount, so the net cost is "
    "charge - reversal - credit.",
    ["tenant", "project", "kind"],
    registry=TENANT_REGISTRY,  # tenants' costs: served to admins only (/metrics/tenants)
)


def posted_kind(record: EntryRecord) -> str:
    """The kind a posted entry counts under: a credit, a charge's reversal, or a charge."""
    if record.kind == "credit":
        return "credit"
    return "reversal" if record.entry.reverses_entry_id is not None else "charge"


def count_posted(records: Iterable[EntryRecord]) -> None:
    """Count committed entries: call it only with the ledger's fresh entries, after their commit."""
    for record in records:
        entry = record.entry
        POSTED.labels(entry.tenant_id, entry.project, posted_kind(record)).inc(abs(record.amount_micro))
