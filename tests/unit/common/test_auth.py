from __future__ import annotations

import pytest

from libs.common.auth import Principal, hash_key, issue_key, tenant_filter
from libs.common.auth.keys import constant_time_equal, valid_tenant_id
from libs.common.auth.principal import KeyCache
from libs.common.http import Forbidden


def test_issued_key_is_stored_only_as_its_hash() -> None:
    issued = issue_key()
    assert issued.secret.startswith(f"gck_{issued.key_id}_")
    assert issued.key_hash == hash_key(issued.secret)
    assert issued.secret not in issued.key_hash
    assert issue_key().secret != issued.secret


def test_constant_time_comparison_matches_equality() -> None:
    assert constant_time_equal("abc", "abc")
    assert not constant_time_equal("abc", "abd")


@pytest.mark.parametrize(
    ("tenant_id", "ok"),
    [
        ("acme", True),
        ("team-7", True),
        ("A", False),
        ("x", False),
        ("Acme", False),
        ("-lead", False),
        ("a" * 64, False),
    ],
)
def test_tenant_ids_are_lower_case_slugs(tenant_id: str, ok: bool) -> None:
    assert valid_tenant_id(tenant_id) is ok


def test_tenant_queries_are_pinned_to_the_callers_tenant() -> None:
    acme = Principal(key_id="k1", role="tenant", tenant_id="acme")
    assert tenant_filter(acme) == "acme"
    assert tenant_filter(acme, "acme") == "acme"
    with pytest.raises(Forbidden):
        tenant_filter(acme, "globex")


def test_admins_may_query_one_tenant_or_all() -> None:
    admin = Principal(key_id="admin", role="admin", tenant_id=None)
    assert tenant_filter(admin) is None
    assert tenant_filter(admin, "globex") == "globex"


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_key_cache_keeps_a_verified_key_for_its_ttl_only() -> None:
    clock = _Clock()
    cache = KeyCache(ttl_s=5.0, clock=clock)
    acme = Principal(key_id="k1", role="tenant", tenant_id="acme")
    assert cache.get("h1") is None
    cache.put("h1", acme)
    clock.now += 4.9
    assert cache.get("h1") == acme
    clock.now += 0.2
    assert cache.get("h1") is None  # expired: the next request reads api_keys again


def test_key_cache_evicts_a_revoked_key_and_can_be_disabled() -> None:
    cache = KeyCache(ttl_s=5.0, clock=_Clock())
    cache.put("h1", Principal(key_id="k1", role="tenant", tenant_id="acme"))
    cache.put("h2", Principal(key_id="k2", role="tenant", tenant_id="acme"))
    cache.evict_key("k1")
    assert cache.get("h1") is None
    assert cache.get("h2") is not None
    disabled = KeyCache(ttl_s=0)
    disabled.put("h1", Principal(key_id="k1", role="tenant", tenant_id="acme"))
    assert disabled.get("h1") is None


def test_key_cache_stays_bounded() -> None:
    cache = KeyCache(ttl_s=5.0, clock=_Clock(), max_entries=3)
    for i in range(4):
        cache.put(f"h{i}", Principal(key_id=f"k{i}", role="tenant", tenant_id="acme"))
    assert cache.get("h3") is not None
    assert sum(cache.get(f"h{i}") is not None for i in range(4)) <= 3
