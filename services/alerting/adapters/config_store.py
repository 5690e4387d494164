"""Configuration in Postgres: rules, the routing tree, silences and receivers, with a change version."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.alerting.domain.inhibition import DEFAULT_INHIBIT_RULES, InhibitRule
from services.alerting.domain.routing import Route, RoutingTree
from services.alerting.domain.rules import DEFAULT_RULES, Rule
from services.alerting.domain.silences import Silence

__all__ = ["ConfigStore", "Receiver", "Snapshot", "default_tree"]

BUMP_VERSION = "UPDATE config_meta SET version = version + 1 WHERE id = 1"
GET_VERSION = "SELECT version FROM config_meta WHERE id = 1"
CLAIM_SEEDING = (
    "UPDATE config_meta SET defaults_seeded = true, version = version + 1 "
    "WHERE id = 1 AND NOT defaults_seeded RETURNING 1"
)
# A rule is (owner_tenant, name): names are unique per tenant, NULL being the global rules' owner
# (migration 0002, a unique index with NULLS NOT DISTINCT).
LIST_RULES = (
    "SELECT spec FROM rules WHERE ($1::text IS NULL OR owner_tenant = $1) "
    "ORDER BY name, owner_tenant NULLS FIRST"
)
LIST_VISIBLE_RULES = "SELECT spec FROM rules WHERE owner_tenant IS NULL OR owner_tenant = $1 ORDER BY name"
GET_RULE = "SELECT spec FROM rules WHERE name = $1 AND owner_tenant IS NOT DISTINCT FROM $2"
LIST_RULES_NAMED = "SELECT spec FROM rules WHERE name = $1 ORDER BY owner_tenant NULLS FIRST"
INSERT_RULE = (
    "INSERT INTO rules (name, owner_tenant, spec) VALUES ($1, $2, $3) "
    "ON CONFLICT (name, owner_tenant) DO NOTHING RETURNING 1"
)
UPSERT_RULE = (
    "INSERT INTO rules (name, owner_tenant, spec) VALUES ($1, $2, $3) "
    "ON CONFLICT (name, owner_tenant) DO UPDATE SET spec = EXCLUDED.spec, updated_at = now()"
)
DELETE_RULE = "DELETE FROM rules WHERE name = $1 AND owner_tenant IS NOT DISTINCT FROM $2"
# Held to the end of the transaction: who checks that a name is free writes it before the next looks.
LOCK_RULE_NAME = "SELECT pg_advisory_xact_lock(hashtext('gpucloud.alerting.rule.' || $1))"
GET_TREE = "SELECT routing_tree FROM config_meta WHERE id = 1"
SET_TREE = "UPDATE config_meta SET routing_tree = $1 WHERE id = 1"
LIST_SILENCES = (
    "SELECT * FROM silences WHERE ($1::text IS NULL OR owner_tenant = $1) "
    "AND ($2::timestamptz IS NULL OR ends_at > $2) ORDER BY starts_at DESC"
)
GET_SILENCE = "SELECT * FROM silences WHERE id = $1"
INSERT_SILENCE = (
    "INSERT INTO silences (id, matchers, starts_at, ends_at, created_by, comment, owner_tenant) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7)"
)
EXPIRE_SILENCE = (
    "UPDATE silences SET ends_at = LEAST(ends_at, $2), "
    "starts_at = LEAST(starts_at, $2 - interval '1 millisecond') WHERE id = $1"
)
GET_INHIBIT_RULES = "SELECT rules FROM inhibit_rules WHERE owner_tenant IS NOT DISTINCT FROM $1"
LIST_INHIBIT_RULES = "SELECT owner_tenant, rules FROM inhibit_rules ORDER BY owner_tenant NULLS FIRST"
PUT_INHIBIT_RULES = (
    "INSERT INTO inhibit_rules (owner_tenant, rules) VALUES ($1, $2) "
    "ON CONFLICT (owner_tenant) DO UPDATE SET rules = EXCLUDED.rules, updated_at = now()"
)
LIST_RECEIVERS = "SELECT * FROM receivers ORDER BY name"
GET_RECEIVER = "SELECT * FROM receivers WHERE name = $1"
INSERT_RECEIVER = (
    "INSERT INTO receivers (name, kind, url, secret, routing_key) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT (name) DO NOTHING RETURNING 1"
)
UPDATE_RECEIVER = (
    "UPDATE receivers SET kind = $2, url = $3, secret = COALESCE($4, secret), "
    "routing_key = COALESCE($5, routing_key), updated_at = now() WHERE name = $1 RETURNING 1"
)
DELETE_RECEIVER = "DELETE FROM receivers WHERE name = $1 RETURNING 1"


@dataclass(frozen=True, slots=True)
class Receiver:
    """A notification target; `secret` and `routing_key` never leave the service."""

    name: str
    kind: str
    url: str
    secret: str
    routing_key: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The configuration the evaluator runs with, at one version."""

    version: int
    rules: tuple[Rule, ...]
    tree: RoutingTree
    silences: tuple[Silence, ...]
    inhibit_rules: tuple[InhibitRule, ...] = DEFAULT_INHIBIT_RULES


def default_tree(receiver: str) -> RoutingTree:
    """The tree used until an admin sets one: everything to one receiver."""
    return RoutingTree(default=Route(receiver=receiver))


def _receiver(row: Any) -> Receiver:
    return Receiver(**{k: row[k] for k in Receiver.__slots__})


def _inhibit_rules(stored: Any) -> tuple[InhibitRule, ...]:
    return tuple(InhibitRule.model_validate(r) for r in stored)


def _silence(row: Any) -> Silence:
    return Silence.model_validate({k: row[k] for k in Silence.model_fields})


class ConfigStore:
    """SQL for configuration on one connection; never commits."""

    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self._conn = conn

    async def bump(self) -> None:
        """Tell the evaluator (every replica) that configuration changed."""
        await self._conn.execute(BUMP_VERSION)

    async def version(self) -> int:
        """The configuration version."""
        return int(await self._conn.fetchval(GET_VERSION))

    async def seed_defaults(self) -> bool:
        """Insert the shipped rules once per schema (so an admin's deletions stick)."""
        if await self._conn.fetchval(CLAIM_SEEDING) is None:
            return False
        for rule in DEFAULT_RULES:
            await self._conn.execute(INSERT_RULE, rule.name, None, rule.model_dump(mode="json"))
        return True

    async def snapshot(self, *, default_receiver: str, now: datetime) -> Snapshot:
        """Everything the evaluator needs, read in one go."""
        version = await self.version()
        return Snapshot(
            version=version,
            rules=await self.rules(tenant=None),
            tree=await self.tree(default_receiver=default_receiver),
            silences=await self.silences(tenant=None, active_at=now),
            inhibit_rules=await self.all_inhibit_rules(),
        )

    async def rules(self, *, tenant: str | None) -> tuple[Rule, ...]:
        """Rules owned by `tenant` (all rules when None)."""
        return tuple(Rule.model_validate(r["spec"]) for r in await self._conn.fetch(LIST_RULES, tenant))

    async def visible_rules(self, *, tenant: str) -> tuple[Rule, ...]:
        """Global rules and the tenant's own."""
        return tuple(
            Rule.model_validate(r["spec"]) for r in await self._conn.fetch(LIST_VISIBLE_RULES, tenant)
        )

    async def rule(self, name: str, *, owner: str | None) -> Rule | None:
        """One rule by owner (None: the global rule) and name."""
        spec = await self._conn.fetchval(GET_RULE, name, owner)
        return None if spec is None else Rule.model_validate(spec)

    async def rules_named(self, name: str, *, lock: bool = False) -> tuple[Rule, ...]:
        """Every owner's rule of this name, the global one first; `lock` holds the name until commit."""
        if lock:
            await self._conn.execute(LOCK_RULE_NAME, name)
        return tuple(Rule.model_validate(r["spec"]) for r in await self._conn.fetch(LIST_RULES_NAMED, name))

    async def add_rule(self, rule: Rule) -> bool:
        """Insert; False when the name is taken."""
        added = await self._conn.fetchval(
            INSERT_RULE, rule.name, rule.owner_tenant, rule.model_dump(mode="json")
        )
        return added is not None

    async def put_rule(self, rule: Rule) -> None:
        """Insert or replace the rule of the same owner and name."""
        await self._conn.execute(UPSERT_RULE, rule.name, rule.owner_tenant, rule.model_dump(mode="json"))

    async def delete_rule(self, name: str, *, owner: str | None) -> None:
        """Delete a rule (its alerts resolve at the evaluator's next reload)."""
        await self._conn.execute(DELETE_RULE, name, owner)

    async def tree(self, *, default_receiver: str) -> RoutingTree:
        """The routing tree."""
        stored = await self._conn.fetchval(GET_TREE)
        return default_tree(default_receiver) if stored is None else RoutingTree.model_validate(stored)

    async def set_tree(self, tree: RoutingTree) -> None:
        """Replace the routing tree."""
        await self._conn.execute(SET_TREE, tree.model_dump(mode="json"))

    async def silences(self, *, tenant: str | None, active_at: datetime | None) -> tuple[Silence, ...]:
        """Silences (of a tenant when given; not yet ended at `active_at` when given)."""
        return tuple(_silence(r) for r in await self._conn.fetch(LIST_SILENCES, tenant, active_at))

    async def silence(self, silence_id: str) -> tuple[Silence, str | None] | None:
        """A silence and its owner tenant."""
        row = await self._conn.fetchrow(GET_SILENCE, silence_id)
        return None if row is None else (_silence(row), row["owner_tenant"])

    async def add_silence(self, silence: Silence, *, owner: str | None) -> None:
        """Insert a silence."""
        matchers = [m.model_dump(mode="json") for m in silence.matchers]
        await self._conn.execute(
            INSERT_SILENCE,
            silence.id,
            matchers,
            silence.starts_at,
            silence.ends_at,
            silence.created_by,
            silence.comment,
            owner,
        )

    async def expire_silence(self, silence_id: str, *, now: datetime) -> None:
        """End a silence now (kept for the record)."""
        await self._conn.execute(EXPIRE_SILENCE, silence_id, now)

    async def inhibit_rules(self, *, owner: str | None) -> tuple[InhibitRule, ...] | None:
        """One owner's stored inhibit rules (None: the global set); None when it never stored any."""
        stored = await self._conn.fetchval(GET_INHIBIT_RULES, owner)
        return None if stored is None else _inhibit_rules(stored)

    async def put_inhibit_rules(self, rules: tuple[InhibitRule, ...], *, owner: str | None) -> None:
        """Replace one owner's inhibit rules (tenant rules must already be confined to the tenant)."""
        await self._conn.execute(PUT_INHIBIT_RULES, owner, [r.model_dump(mode="json") for r in rules])

    async def all_inhibit_rules(self) -> tuple[InhibitRule, ...]:
        """What the evaluator mutes with: the global set (the defaults until stored), then each tenant's."""
        rows = await self._conn.fetch(LIST_INHIBIT_RULES)
        stored = {row["owner_tenant"]: _inhibit_rules(row["rules"]) for row in rows}
        tenants = (rule for owner, rules in stored.items() if owner is not None for rule in rules)
        return (*stored.get(None, DEFAULT_INHIBIT_RULES), *tenants)

    async def receivers(self) -> list[Receiver]:
        """Every receiver."""
        return [_receiver(r) for r in await self._conn.fetch(LIST_RECEIVERS)]

    async def receiver(self, name: str) -> Receiver | None:
        """One receiver."""
        row = await self._conn.fetchrow(GET_RECEIVER, name)
        return None if row is None else _receiver(row)

    async def add_receiver(
        self, *, name: str, kind: str, url: str, secret: str, routing_key: str | None
    ) -> bool:
        """Insert; False when the name is taken."""
        return await self._conn.fetchval(INSERT_RECEIVER, name, kind, url, secret, routing_key) is not None

    async def update_receiver(
        self, *, name: str, kind: str, url: str, secret: str | None, routing_key: str | None
    ) -> bool:
        """Update (secrets kept unless given); False when absent."""
        return await self._conn.fetchval(UPDATE_RECEIVER, name, kind, url, secret, routing_key) is not None

    async def delete_receiver(self, name: str) -> bool:
        """Delete; False when absent."""
        return await self._conn.fetchval(DELETE_RECEIVER, name) is not None
