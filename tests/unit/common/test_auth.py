from __future__ import annotations

import pytest

from libs.common.auth import Principal, hash_key, issue_key, tenant_filter
from libs.common.auth.keys import constant_time_equal, valid_tenant_id
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
