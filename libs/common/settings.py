"""Settings shared by every service, read from the environment by pydantic-settings.

Shared infrastructure settings keep their well-known names (``KAFKA_BOOTSTRAP_SERVERS``,
``DATABASE_URL``, ``REDIS_URL``...) whatever the service; a service's own settings take its prefix
(``SCHEDULER_HTTP_PORT``). Nothing is read at import time: call ``Settings()`` in a composition root.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEV_ADMIN_KEY", "BaseServiceSettings", "Environment", "session_url"]

Environment = Literal["development", "test", "production"]

#: The admin key a development stack uses when none is configured; refused in any other environment.
DEV_ADMIN_KEY = "dev-admin-key-change-me"

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def session_url(*, database_url: str, direct_url: str, schema: str) -> str:
    """Where a schema's connections that keep session state (and its migrations) go: DATABASE_DIRECT_URL,
    Postgres itself, else DATABASE_URL; a '{schema}' in it replaced by the schema."""
    return (direct_url or database_url).replace("{schema}", schema)


class BaseServiceSettings(BaseSettings):
    """Settings every service has; subclasses add their own fields and set ``env_prefix``."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    service_name: str = Field(default="service", description="Name used for logs, traces, groups.")
    environment: Environment = Field(default="development", alias="ENVIRONMENT")
    kafka_bootstrap_servers: str = Field(default="127.0.0.1:9092", alias="KAFKA_BOOTSTRAP_SERVERS")
    kafka_topic_prefix: str = Field(
        default="", alias="KAFKA_TOPIC_PREFIX", description="Prepended to every topic and group id."
    )
    kafka_partitions: int = Field(default=3, ge=1, le=256, alias="KAFKA_PARTITIONS")
    kafka_fetch_max_wait_ms: int = Field(
        default=25,
        ge=1,
        le=10000,
        alias="KAFKA_FETCH_MAX_WAIT_MS",
        description="Fetch long-poll; keep short on the embedded broker, which always waits it out.",
    )
    kafka_generation_s: int = Field(
        default=300,
        ge=0,
        le=86400,
        alias="KAFKA_GENERATION_S",
        description="Each generation's length, in seconds, of the topics that need no history "
        "(telemetry.samples): written as '<topic>.<epoch second>' and deleted once read, because the "
        "embedded broker honours no retention. 0 writes the topic itself, for a broker whose "
        "retention keeps it short (Apache Kafka). Every process of a stack must use the same value.",
    )
    database_url: str = Field(
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        alias="DATABASE_URL",
        description="Where the service's pools connect. A '{schema}' in it is replaced by the service's "
        "schema, so one URL serves every service behind a pooler with a database entry per service "
        "(postgresql://user@pgbouncer:6432/gpucloud_{schema}).",
    )
    database_pooler: Literal["none", "transaction"] = Field(
        default="none",
        alias="DATABASE_POOLER",
        description="What DATABASE_URL reaches: Postgres itself (none) or a pooler in transaction mode "
        "such as PgBouncer (transaction), where no statement is cached and session state never lasts; "
        "then DATABASE_DIRECT_URL is required.",
    )
    database_direct_url: str = Field(
        default="",
        alias="DATABASE_DIRECT_URL",
        description="Postgres itself, for what needs a session of its own: migrations, the outbox relay's "
        "and the leaders' advisory locks and LISTEN. Empty: DATABASE_URL.",
    )
    db_schema: str = Field(default="", alias="DB_SCHEMA", description="Defaults to the service name.")
    db_pool_max: int = Field(default=10, ge=1, le=200, alias="DB_POOL_MAX")
    startup_connect_timeout_s: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        alias="STARTUP_CONNECT_TIMEOUT_S",
        description="How long start-up keeps retrying Postgres and Kafka while they refuse connections.",
    )
    object_store_url: str = Field(
        default="",
        alias="OBJECT_STORE_URL",
        description="Where workloads' logs, outputs and checkpoints go: file:///dir, s3://bucket[/prefix] "
        "(endpoint: GPUCLOUD_OBJECT_STORE_ENDPOINT, credentials: AWS_*) or memory:// (one process only). "
        "Empty: file://<temporary directory>/gpucloud-objects, which only processes of one host share.",
    )
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", alias="REDIS_URL")
    redis_prefix: str = Field(default="gpucloud:", alias="REDIS_PREFIX")
    admin_api_key: SecretStr | None = Field(default=None, alias="ADMIN_API_KEY")
    auth_cache_ttl_s: float = Field(
        default=5.0,
        ge=0,
        alias="AUTH_CACHE_TTL_S",
        description="How long a verified API key is trusted without reading api_keys again (0: never).",
    )
    http_host: str = Field(default="127.0.0.1", alias="HTTP_HOST")
    http_port: int = Field(default=8000, ge=0, le=65535)
    max_request_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Largest request body accepted (413 above it); <SERVICE>_MAX_REQUEST_BYTES.",
    )
    rate_limit_write_per_s: float = Field(
        default=20.0,
        ge=0,
        le=100_000,
        alias="RATE_LIMIT_WRITE_PER_S",
        description="Writes (POST, PUT, PATCH, DELETE) one tenant may send a service a second (0: no limit).",
    )
    rate_limit_write_burst: int = Field(
        default=100,
        ge=1,
        le=1_000_000,
        alias="RATE_LIMIT_WRITE_BURST",
        description="Writes a burst may hold.",
    )
    rate_limit_read_per_s: float = Field(
        default=100.0,
        ge=0,
        le=100_000,
        alias="RATE_LIMIT_READ_PER_S",
        description="Reads (every other method) one tenant may send a service a second (0: no limit).",
    )
    rate_limit_read_burst: int = Field(
        default=500, ge=1, le=1_000_000, alias="RATE_LIMIT_READ_BURST", description="Reads a burst may hold."
    )
    log_level: str = Field(default="INFO", alias="LOG_LEVEL")
    log_json: bool = Field(default=True, alias="LOG_JSON")
    outbox_poll_interval_s: float = Field(default=0.5, gt=0, alias="OUTBOX_POLL_INTERVAL_S")
    outbox_batch_size: int = Field(default=500, ge=1, alias="OUTBOX_BATCH_SIZE")
    consumer_max_attempts: int = Field(default=5, ge=1, alias="CONSUMER_MAX_ATTEMPTS")
    consumer_backoff_s: float = Field(default=0.05, ge=0, alias="CONSUMER_BACKOFF_S")
    consumer_backoff_max_s: float = Field(default=2.0, ge=0, alias="CONSUMER_BACKOFF_MAX_S")
    consumer_stall_s: float = Field(
        default=30.0,
        gt=0,
        alias="CONSUMER_STALL_S",
        description="How long a consumer may fail to apply or commit before /readyz answers 503 naming it.",
    )

    @field_validator("db_schema")
    @classmethod
    def _schema_is_identifier(cls, value: str) -> str:
        if value and not _IDENTIFIER.match(value):
            raise ValueError("DB_SCHEMA must be a lower-case SQL identifier")
        return value

    @field_validator("rate_limit_write_per_s", "rate_limit_read_per_s")
    @classmethod
    def _rate_is_off_or_measurable(cls, value: float) -> float:
        if 0 < value < 0.01:  # a token would take over 100 s to come back: surely a typo for 0 (off)
            raise ValueError("a rate limit is 0 (off) or at least 0.01 requests a second")
        return value

    @field_validator("kafka_generation_s")
    @classmethod
    def _generation_outlasts_a_rebalance(cls, value: int) -> int:
        if 0 < value < 10:  # each generation costs its readers a rebalance (about 5 s on the embedded broker)
            raise ValueError("KAFKA_GENERATION_S is 0 (no generations) or at least 10 seconds")
        return value

    @model_validator(mode="after")
    def _direct_url_behind_a_pooler(self) -> BaseServiceSettings:
        if self.database_pooler == "transaction" and not self.database_direct_url:
            raise ValueError(
                "DATABASE_DIRECT_URL must name Postgres itself when DATABASE_POOLER=transaction: "
                "advisory locks and LISTEN need a session a transaction pooler does not keep"
            )
        return self

    @model_validator(mode="after")
    def _refuse_default_admin_key_outside_development(self) -> BaseServiceSettings:
        key = self.admin_api_key.get_secret_value() if self.admin_api_key else None
        if self.environment != "development" and key in (None, "", DEV_ADMIN_KEY):
            raise ValueError(
                f"ADMIN_API_KEY must be set to a non-default secret when ENVIRONMENT={self.environment}"
            )
        if key is not None and len(key) < 16:
            raise ValueError("ADMIN_API_KEY must be at least 16 characters")
        return self

    @property
    def pg_schema(self) -> str:
        """The Postgres schema this service owns."""
        return self.db_schema or self.service_name

    @property
    def pooled(self) -> bool:
        """Whether DATABASE_URL is a transaction pooler (see ``libs.common.db.pool.create_pool``)."""
        return self.database_pooler == "transaction"

    @property
    def service_database_url(self) -> str:
        """DATABASE_URL for this service: its '{schema}', if any, replaced by the schema."""
        return self.database_url.replace("{schema}", self.pg_schema)

    @property
    def session_database_url(self) -> str:
        """Where connections that keep session state go: Postgres itself."""
        return session_url(
            database_url=self.database_url, direct_url=self.database_direct_url, schema=self.pg_schema
        )

    @property
    def admin_key(self) -> str:
        """The configured admin key, or the development default (only reachable in development)."""
        return self.admin_api_key.get_secret_value() if self.admin_api_key else DEV_ADMIN_KEY

    def topic(self, logical: str) -> str:
        """The physical topic name for a logical topic (adds the configured prefix)."""
        return f"{self.kafka_topic_prefix}{logical}"

    def group_id(self, consumer: str) -> str:
        """The consumer-group id for one of this service's consumers."""
        return f"{self.kafka_topic_prefix}{self.service_name}.{consumer}"
