"""Configuration: one Settings object read from `UNITS_API_*` environment variables."""

from __future__ import annotations

from functools import cached_property

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from units_api.http.ratelimit import Rate, parse_rate
from units_api.search.plan import FEW_MATCHES

DEFAULT_DATABASE_URL = "sqlite:///./data/units.db"
VOCABULARY_FIELDS = ("type", "priceBase", "uom", "featureType", "view", "service")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="UNITS_API_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str | None = None
    auto_migrate: bool = True
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    log_level: str = "INFO"
    access_log: bool = True
    rate_limit: str = "6000/minute"
    auth_cache_seconds: float = Field(default=2.0, ge=0)
    db_pool_size: int = Field(default=20, ge=1)
    db_fast_pool_size: int = Field(default=20, ge=0)
    db_parallel_workers: int = Field(default=0, ge=0, le=64)
    count_cache_size: int = Field(default=4096, ge=0)
    count_budget_ms: int = Field(default=2000, ge=0)
    result_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    search_few_matches: int = Field(default=FEW_MATCHES, ge=0)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    max_bulk_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=60)
    bootstrap_admin_key: bool = True
    run_jobs: bool = True
    jobs_interval_seconds: float = Field(default=1.0, gt=0)
    events_retention_days: int = Field(default=90, ge=1)
    webhook_allow_private: bool = False
    webhook_timeout_seconds: float = Field(default=15.0, gt=0, le=60)
    webhook_poll_seconds: float = Field(default=0.5, gt=0)
    # Tests only: shortens every retry wait after the first, and the 24-hour failing window.
    webhook_time_scale: float = Field(default=1.0, gt=0, le=1)
    # Jobs (exports, imports): each runs in a child process of a process that runs jobs.
    job_processes: int = Field(default=1, ge=1, le=32)
    job_lease_seconds: float = Field(default=60.0, ge=1)
    job_poll_seconds: float = Field(default=1.0, gt=0)
    files_dir: str = "./data/files"
    storage_url: str | None = None
    export_ttl_hours: float = Field(default=168.0, gt=0)
    max_import_bytes: int = Field(default=512 * 1024 * 1024, ge=1024)
    max_import_expanded_bytes: int = Field(default=2 * 1024 * 1024 * 1024, ge=1024)
    publish_requires: str = "name,type,city,price,image"
    # Comma lists; an empty value leaves the vocabulary free.
    vocab_type: str = ""
    vocab_price_base: str = ""
    vocab_uom: str = ""
    vocab_feature_type: str = ""
    vocab_view: str = ""
    vocab_service: str = ""

    @field_validator("database_url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("sqlite", "postgresql", "postgres")):
            raise ValueError("UNITS_API_DATABASE_URL must be a sqlite:// or postgresql:// URL")
        return value

    @field_validator("rate_limit")
    @classmethod
    def _valid_rate(cls, value: str) -> str:
        parse_rate(value)
        return value

    @cached_property
    def default_rate(self) -> Rate:
        return parse_rate(self.rate_limit)

    @cached_property
    def vocabularies(self) -> dict[str, tuple[str, ...]]:
        raw = {
            "type": self.vocab_type,
            "priceBase": self.vocab_price_base,
            "uom": self.vocab_uom,
            "featureType": self.vocab_feature_type,
            "view": self.vocab_view,
            "service": self.vocab_service,
        }
        return {
            name: tuple(v.strip() for v in value.split(",") if v.strip())
            for name, value in raw.items()
            if value.strip()
        }

    @cached_property
    def readiness(self) -> tuple[str, ...]:
        """What a unit needs before it may be published or scheduled."""
        return tuple(name.strip() for name in self.publish_requires.split(",") if name.strip())

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


# The defaults alone, without the environment: what the documentation states.
DEFAULTS = Settings.model_construct()
