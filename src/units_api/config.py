"""Configuration: one Settings object read from `UNITS_API_*` environment variables, and
`load_settings`, which refuses a bad or unknown one in a line that names it."""

from __future__ import annotations

import difflib
import os
import re
import socket
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError
from redis.connection import parse_url as parse_redis_url

from units_api.codes import CURRENCIES
from units_api.errors import SettingError
from units_api.http.rates import Rate, parse_rate
from units_api.search.plan import FEW_MATCHES

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

DEFAULT_DATABASE_URL = "sqlite:///./data/units.db"
DATABASE_DRIVERS = (
    "sqlite",
    "sqlite+pysqlite",
    "sqlite+aiosqlite",
    "postgresql",
    "postgres",
    "postgresql+asyncpg",
    "postgresql+psycopg2",
)
INDEXNOW_ENDPOINT = "https://api.indexnow.org/indexnow"
INDEXNOW_KEY_PATTERN = r"^[a-zA-Z0-9-]{8,128}$"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# What UNITS_API_PUBLISH_REQUIRES may name: the unit's fields as the API writes them
# (`units.schemas.UnitFields`, held equal by tests/test_startup.py; importing it here would
# load the domain with the settings), and `image`, which `unitImageUrl` or a `gallery` item meets.
PUBLISH_FIELDS = (
    "name",
    "type",
    "location",
    "price",
    "surface",
    "guaranty",
    "city",
    "subProjectId",
    "priceBase",
    "unitImageUrl",
    "unitNameAr",
    "unitLocation",
    "expense",
    "startingPrice",
    "maxPrice",
    "unitDesc",
    "unitDescAr",
    "unitShortDesc",
    "unitShortDescAr",
    "gallery",
    "specs",
    "options",
    "paymentPlans",
    "floorsPlan",
    "readings",
    "currency",
    "country",
    "offeringType",
    "bedrooms",
    "bathrooms",
    "completionStatus",
    "handoverDate",
    "image",
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="UNITS_API_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str | None = None
    auto_migrate: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    workers: int = Field(default=1, ge=1)
    log_level: str = "INFO"
    # A request's headers, and then its body, must arrive within this long (else 408); a
    # connection that sends nothing is closed after it too.
    client_timeout_seconds: float = Field(default=30.0, gt=0)
    # SIGTERM: requests in flight are given this long to finish.
    shutdown_grace_seconds: int = Field(default=30, ge=0)
    # SIGTERM: before that, this long with /readyz a 503, for a proxy to take the server out.
    shutdown_drain_seconds: float = Field(default=0.0, ge=0, le=300)
    access_log: bool = True
    # Requests counted and timed in /metrics (the gauges read from the database stay).
    request_metrics: bool = True
    # When set, GET /metrics needs `Authorization: Bearer <this value>`.
    metrics_key: SecretStr | None = None
    rate_limit: str = "6000/minute"
    auth_cache_seconds: float = Field(default=2.0, ge=0)
    db_pool_size: int = Field(default=20, ge=1)
    db_fast_pool_size: int = Field(default=20, ge=0)
    db_parallel_workers: int = Field(default=0, ge=0, le=64)
    # How long a request waits on the database (a connection, a statement) before its 503.
    db_unavailable_seconds: float = Field(default=5.0, gt=0, le=300)
    # A comma list of PostgreSQL streaming replicas for lists, searches, queries and exports.
    database_replica_urls: str = ""
    replica_max_lag_seconds: float = Field(default=5.0, gt=0)
    count_cache_size: int = Field(default=4096, ge=0)
    count_budget_ms: int = Field(default=2000, ge=0)
    result_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    dashboards_copy: bool = True
    dashboards_threads: int = Field(default=0, ge=0, le=64)
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
    # Recorded with each file kept in files_dir, so another machine can say which holds it.
    machine_name: str = Field(default_factory=socket.gethostname, min_length=1, max_length=200)
    export_ttl_hours: float = Field(default=168.0, gt=0)
    max_import_bytes: int = Field(default=512 * 1024 * 1024, ge=1024)
    max_import_expanded_bytes: int = Field(default=2 * 1024 * 1024 * 1024, ge=1024)
    publish_requires: str = "name,type,city,price,image"
    # What a unit's null currency means wherever a price is shown with its currency.
    default_currency: str = "EGP"
    # Channels (section 17): the public pages' own address (absolute URLs in canonical links,
    # sitemaps, feeds); empty, each request's own scheme and host.
    public_base_url: str = ""
    # What one address may ask of the public pages, sitemaps and feeds.
    public_rate_limit: str = "600/minute"
    # IndexNow (section 17): the site's key (8-128 of a-z, A-Z, 0-9 and -), served as
    # /{key}.txt; set, every page that appears, changes or goes away is sent to the endpoint.
    indexnow_key: str | None = None
    indexnow_endpoint: str = INDEXNOW_ENDPOINT
    # Comma lists; an empty value leaves the vocabulary free.
    vocab_type: str = ""
    vocab_price_base: str = ""
    vocab_uom: str = ""
    vocab_feature_type: str = ""
    vocab_view: str = ""
    vocab_service: str = ""
    # The console (/console/): how long a sign-in lasts, how often one address may try to
    # sign in, and a map tile server (`https://tiles.example/{z}/{x}/{y}.png`), none by default.
    console_session_hours: float = Field(default=12.0, gt=0, le=24 * 30)
    console_signin_rate: str = "10/minute"
    console_tile_url: str | None = None

    @field_validator("database_url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        database_url(value)
        return value

    @field_validator("database_replica_urls")
    @classmethod
    def _replica_urls(cls, value: str, info: ValidationInfo) -> str:
        urls = split_urls(value)
        primary = str(info.data.get("database_url", ""))
        if urls and not primary.startswith("postgres"):
            raise ValueError("read replicas need a PostgreSQL UNITS_API_DATABASE_URL")
        for number, url in enumerate(urls, 1):
            if database_url(url).get_backend_name() != "postgresql":
                raise ValueError(f"replica {number} must be a postgresql:// URL")
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value:
            parse_redis_url(value)  # type: ignore[no-untyped-call]
        return value

    @field_validator("storage_url")
    @classmethod
    def _storage_url(cls, value: str | None) -> str | None:
        if value and not re.match(r"^s3a?://[^/]+", value):
            raise ValueError("must be an s3://bucket or s3://bucket/prefix URL")
        return value

    @field_validator("publish_requires")
    @classmethod
    def _publish_fields(cls, value: str) -> str:
        for name in (name.strip() for name in value.split(",")):
            if name and name not in PUBLISH_FIELDS:
                close = closest(name, PUBLISH_FIELDS)
                hint = f"did you mean {close}?" if close else "the README lists the names"
                raise ValueError(f"{name!r} is not image or a writable field of a unit; {hint}")
        return value

    @field_validator("public_base_url")
    @classmethod
    def _public_base(cls, value: str) -> str:
        if not value:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http(s) URL, e.g. https://homes.example.com")
        if parts.query or parts.fragment:
            raise ValueError("must have no query or fragment")
        return value.rstrip("/")

    @field_validator("indexnow_key")
    @classmethod
    def _indexnow_key(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value:
            return None
        if not re.match(INDEXNOW_KEY_PATTERN, value):
            raise ValueError("must be 8-128 of a-z, A-Z, 0-9 and -")
        if not info.data.get("public_base_url"):
            raise ValueError(
                "needs UNITS_API_PUBLIC_BASE_URL: the host whose pages are sent to IndexNow"
            )
        return value

    @field_validator("indexnow_endpoint")
    @classmethod
    def _indexnow_endpoint(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http(s) URL, e.g. " + INDEXNOW_ENDPOINT)
        return value

    @field_validator("default_currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        if value not in CURRENCIES:
            raise ValueError("must be an ISO 4217 currency code, three capitals (EGP, AED, SAR)")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @field_validator("rate_limit", "console_signin_rate", "public_rate_limit")
    @classmethod
    def _valid_rate(cls, value: str) -> str:
        parse_rate(value)
        return value

    @field_validator("console_tile_url")
    @classmethod
    def _tile_url(cls, value: str | None) -> str | None:
        if value and not re.match(r"^https?://[^/]+/.*\{z\}.*\{x\}.*\{y\}", value):
            raise ValueError("must be an http(s) URL with {z}, {x} and {y}")
        return value or None

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
    def replica_urls(self) -> tuple[str, ...]:
        return split_urls(self.database_replica_urls)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


# The defaults alone, without the environment: what the documentation states.
DEFAULTS = Settings.model_construct()

PREFIX = "UNITS_API_"
# Names test suites give their own runs (CONTRACT 14); a server never reads them.
FOREIGN_PREFIXES = ("UNITS_API_TEST_",)


def database_url(value: str) -> URL:
    """`UNITS_API_DATABASE_URL` parsed (several PostgreSQL hosts read as `dburls` says);
    ValueError when it is not a SQLite or PostgreSQL URL or its hosts are malformed."""
    # Imported here: a script may read the settings without loading the database layer.
    from units_api.dburls import parse

    parsed = parse(value)
    if parsed.drivername not in DATABASE_DRIVERS:
        raise ValueError("must be a sqlite:/// or postgresql:// URL")
    return parsed


def split_urls(value: str) -> tuple[str, ...]:
    """A comma list of URLs, each of which may name several hosts (commas of its own)."""
    from units_api.dburls import split

    return split(value)


def setting_names() -> dict[str, str]:
    """Every environment name a setting is read from, with its field."""
    names: dict[str, str] = {}
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, str):
            names[alias.upper()] = field
        elif isinstance(alias, AliasChoices):
            names |= {c.upper(): field for c in alias.choices if isinstance(c, str)}
        else:
            names[f"{PREFIX}{field}".upper()] = field
    return names


def check_names(environ: Mapping[str, str]) -> None:
    """Refuse a `UNITS_API_*` name that no setting reads, suggesting the closest one."""
    known = setting_names()
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(PREFIX) or upper.startswith(FOREIGN_PREFIXES) or upper in known:
            continue
        suffixes = {known_name.removeprefix(PREFIX): known_name for known_name in known}
        close = closest(upper.removeprefix(PREFIX), suffixes)
        hint = f"did you mean {suffixes[close]}?" if close else "the README lists them"
        raise SettingError(name, f"{name} is not a setting; {hint}")


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name `word` is most likely a slip for, if any is close."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return close[0] if close else None


def load_settings() -> Settings:
    """The settings of the environment, every one checked; a bad one raises SettingError."""
    check_names(os.environ)
    try:
        return Settings()
    except ValidationError as exc:
        raise _validation_error(exc) from exc
    except SourceError as exc:
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"{PREFIX}{field.group(1)}".upper() if field else "UNITS_API_*"
        cause = f": {exc.__cause__}" if exc.__cause__ else ""
        raise SettingError(name, f"{name}: cannot be read{cause}") from exc


def _validation_error(exc: ValidationError) -> SettingError:
    first = exc.errors(include_url=False)[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    name = f"{PREFIX}{field}".upper()
    if "input" in first and not isinstance(first["input"], dict):
        message += f" (got {shown(field, str(first['input']))})"
    return SettingError(name, f"{name}: {message}")


_CREDENTIALS = re.compile(r"(?<=://)[^@,\s]*@")


def shown(field: str, value: str) -> str:
    """A setting's value as a message may show it: a URL without its credentials, a key or
    secret not at all."""
    if any(word in field for word in ("key", "secret", "password", "token")):
        return "(hidden)"
    text = _CREDENTIALS.sub("***@", value) if "url" in field else value
    return repr(text if len(text) <= 200 else text[:200] + "...")
