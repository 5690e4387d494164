from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from libs.common.settings import DEV_ADMIN_KEY, BaseServiceSettings
from services.scheduler.settings import SchedulerSettings


def test_default_admin_key_is_refused_outside_development() -> None:
    with pytest.raises(ValidationError, match="ADMIN_API_KEY"):
        BaseServiceSettings(environment="production")
    with pytest.raises(ValidationError, match="ADMIN_API_KEY"):
        BaseServiceSettings(environment="production", admin_api_key=SecretStr(DEV_ADMIN_KEY))


def test_development_falls_back_to_the_documented_default_key() -> None:
    assert BaseServiceSettings(environment="development").admin_key == DEV_ADMIN_KEY


def test_a_real_admin_key_is_accepted_in_production_and_short_ones_are_not() -> None:
    assert (
        BaseServiceSettings(environment="production", admin_api_key=SecretStr("x" * 32)).admin_key == "x" * 32
    )
    with pytest.raises(ValidationError, match="16 characters"):
        BaseServiceSettings(environment="production", admin_api_key=SecretStr("short"))


def test_shared_settings_keep_their_names_and_service_settings_take_the_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka:9092")
    monkeypatch.setenv("DATABASE_URL", "postgresql://db/x")
    monkeypatch.setenv("SCHEDULER_HTTP_PORT", "9999")
    monkeypatch.setenv("HTTP_PORT", "1")  # not the service's port variable
    settings = SchedulerSettings()
    assert settings.kafka_bootstrap_servers == "kafka:9092"
    assert settings.database_url == "postgresql://db/x"
    assert settings.http_port == 9999
    assert settings.pg_schema == "scheduler"


def test_topic_and_group_names_carry_the_prefix() -> None:
    settings = BaseServiceSettings(service_name="billing", kafka_topic_prefix="t1.")
    assert settings.topic("scheduler.workloads") == "t1.scheduler.workloads"
    assert settings.group_id("main") == "t1.billing.main"


def test_schema_must_be_a_plain_identifier() -> None:
    with pytest.raises(ValidationError, match="DB_SCHEMA"):
        BaseServiceSettings(db_schema='x"; drop table y; --')


def test_a_transaction_pooler_needs_a_direct_url_for_sessions() -> None:
    with pytest.raises(ValidationError, match="DATABASE_DIRECT_URL must name Postgres itself"):
        BaseServiceSettings(database_pooler="transaction", database_url="postgresql://pgbouncer:6432/x")
    settings = BaseServiceSettings(
        service_name="billing",
        database_pooler="transaction",
        database_url="postgresql://u@pgbouncer:6432/gpucloud_{schema}",
        database_direct_url="postgresql://u@db:5432/gpucloud",
    )
    assert settings.pooled
    assert settings.service_database_url == "postgresql://u@pgbouncer:6432/gpucloud_billing"
    assert settings.session_database_url == "postgresql://u@db:5432/gpucloud"


def test_without_a_pooler_sessions_use_database_url_with_its_schema_filled_in() -> None:
    settings = BaseServiceSettings(
        service_name="inventory", db_schema="inv2", database_url="postgresql://db/{schema}"
    )
    assert not settings.pooled
    assert settings.service_database_url == settings.session_database_url == "postgresql://db/inv2"
    with pytest.raises(ValidationError, match="database_pooler"):
        BaseServiceSettings(database_pooler="session")  # type: ignore[arg-type]
