"""GET /v1/whoami names the principal behind a key: a tenant's, the admin's, none for a bad or revoked key."""

from __future__ import annotations

import pytest

from services.scheduler.app import create_app
from tests.integration.scheduler.helpers import create_tenant, settings
from tests.integration.support import ADMIN_HEADERS, Isolation, running

pytestmark = pytest.mark.integration


async def test_whoami_names_the_key_its_tenant_and_role_and_refuses_unknown_and_revoked_keys(
    isolation: Isolation,
) -> None:
    async with running(create_app(settings(isolation, auth_cache_ttl_s=0))) as client:
        headers = await create_tenant(client, "acme")
        tenant = await client.get("/v1/whoami", headers=headers)
        assert tenant.status_code == 200, tenant.text
        body = tenant.json()
        assert body["tenant_id"] == "acme"
        assert body["role"] == "tenant"
        assert body["key_id"]

        admin = await client.get("/v1/whoami", headers=ADMIN_HEADERS)
        assert admin.json() == {"key_id": "admin", "tenant_id": None, "role": "admin"}

        unknown = await client.get("/v1/whoami", headers={"X-API-Key": "not-a-key-of-anyone"})
        assert unknown.status_code == 401
        assert unknown.json()["error"]["code"] == "unauthorized"
        assert (await client.get("/v1/whoami")).status_code == 401

        revoked = await client.delete(f"/v1/admin/keys/{body['key_id']}", headers=ADMIN_HEADERS)
        assert revoked.status_code == 204, revoked.text
        assert (await client.get("/v1/whoami", headers=headers)).status_code == 401
