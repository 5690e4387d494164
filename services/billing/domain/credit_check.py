"""Credits reconciled against the incidents behind them, and the ledger's balance with credits in it.

Each credit decision that gave something must have its ledger entry for exactly that amount, off the
tenant project's receivable, and name an incident billing learned whose detection is where the lost
window starts; every credit entry must have its decision. Over the whole ledger, credits included, the
debits equal the credits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from services.billing.domain.sla import CreditDecision, Incident

__all__ = ["CreditEntry", "CreditReconciliation", "check_credits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreditEntry:
    """A credit entry as the ledger holds it: its id, incident, workload and change of the receivable."""

    entry_id: str
    incident_id: str | None
    workload_id: str
    tenant_id: str
    project: str
    amount_micro: int  # negative: a credit lowers what is owed


@dataclass(frozen=True, slots=True, kw_only=True)
class CreditReconciliation:
    """The credits checked: how many, their total, and what does not agree (empty when all do)."""

    decisions: int
    credited_micro: int
    problems: tuple[str, ...]

    @property
    def equal(self) -> bool:
        """True when every credit agrees with its decision and incident."""
        return not self.problems


def check_credits(
    *,
    decisions: Iterable[CreditDecision],
    entries: Iterable[CreditEntry],
    incidents: Mapping[str, Incident],
) -> CreditReconciliation:
    """Match credit decisions, credit entries and incidents one to one."""
    by_id = {e.entry_id: e for e in entries}
    problems: list[str] = []
    seen: set[str] = set()
    count = total = 0
    for d in decisions:
        count += 1
        total += d.amount_micro
        problems.extend(_decision_problems(d, by_id, incidents))
        if d.entry_id is not None:
            seen.add(d.entry_id)
    problems.extend(
        f"{entry_id}: credit entry without a decision" for entry_id in sorted(by_id.keys() - seen)
    )
    return CreditReconciliation(decisions=count, credited_micro=total, problems=tuple(problems))


def _decision_problems(
    d: CreditDecision, entries: Mapping[str, CreditEntry], incidents: Mapping[str, Incident]
) -> list[str]:
    name = f"{d.incident_id}/{d.workload_id}"
    problems: list[str] = []
    incident = incidents.get(d.incident_id)
    if incident is None:
        problems.append(f"{name}: credit for an incident billing does not know")
    elif incident.detected_at != d.detected_at or incident.fault_type != d.fault_type:
        problems.append(f"{name}: the credit's detection or fault differs from its incident's")
    if d.amount_micro > 0 and not d.eligible:
        problems.append(f"{name}: an ineligible fault was credited")
    if d.entry_id is None:
        if d.amount_micro > 0:
            problems.append(f"{name}: credited {d.amount_micro} without a ledger entry")
        return problems
    entry = entries.get(d.entry_id)
    if entry is None:
        problems.append(f"{name}: ledger entry {d.entry_id} missing")
    elif (entry.amount_micro, entry.tenant_id, entry.project, entry.incident_id) != (
        -d.amount_micro,
        d.tenant_id,
        d.project,
        d.incident_id,
    ):
        problems.append(f"{name}: ledger entry {d.entry_id} differs from the decision")
    return problems
