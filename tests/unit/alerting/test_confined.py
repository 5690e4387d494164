"""The API's one tenant confinement of matchers (rules, silences): api/errors.confined."""

from __future__ import annotations

import pytest

from libs.common.auth.principal import Principal
from libs.common.http import Forbidden, Unprocessable
from services.alerting.api.errors import confined
from services.alerting.domain.matchers import Matcher, MatchOp

NODE = Matcher(name="node", value="gpu-a")


def test_a_tenant_is_narrowed_to_its_own_tenant_and_an_admin_is_left_as_written() -> None:
    acme = Principal(key_id="k1", role="tenant", tenant_id="acme")
    assert confined(acme, [NODE]) == (NODE, Matcher(name="tenant", value="acme"))
    admin = Principal(key_id="k0", role="admin", tenant_id=None)
    assert confined(admin, [NODE]) == (NODE,)


def test_a_matcher_beyond_the_tenant_is_a_422_naming_it() -> None:
    acme = Principal(key_id="k1", role="tenant", tenant_id="acme")
    with pytest.raises(Unprocessable) as refused:
        confined(acme, [NODE, Matcher(name="tenant", op=MatchOp.RE, value=".*")])
    assert refused.value.field == "matchers.1"


def test_a_tenant_key_without_a_tenant_is_refused_rather_than_left_unconfined() -> None:
    with pytest.raises(Forbidden):
        confined(Principal(key_id="k2", role="tenant", tenant_id=None), [NODE])
