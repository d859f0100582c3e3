"""Database plumbing: metadata, portable column types, engines and transactions.

Dialect differences live here (types, pragmas, transaction start) so the repositories stay
portable between SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import DateTime, Dialect, Float, MetaData, Numeric, event
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.types import TypeDecorator, TypeEngine

from units_api.filters.geo import sqlite_distance, sqlite_inside
from units_api.search.words import sqlite_relevance

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on both dialects (SQLite keeps naive UTC text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Number(TypeDecorator[Decimal]):
    """Exact NUMERIC on PostgreSQL, REAL on SQLite (the record keeps the exact text)."""

    impl = Numeric
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(Float(asdecimal=False))
        return dialect.type_descriptor(Numeric(asdecimal=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        return float(value) if dialect.name == "sqlite" else Decimal(value)


def utcnow() -> datetime:
    """Now, truncated to the millisecond the API shows."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def format_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    # "YYYY-MM-DDTHH:MM:SS.mmm" of "...+00:00"
    return value.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time (`Z` or an offset) as a UTC datetime; ValueError if it is not one."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError("must be an RFC 3339 date-time") from None
    if parsed.tzinfo is None:
        raise ValueError("must carry a time zone (e.g. Z)")
    return parsed.astimezone(UTC)


def parse_future_time(value: str) -> datetime:
    """An RFC 3339 time that is still to come; ValueError saying what is wrong otherwise."""
    parsed = parse_time(value)
    assert parsed is not None
    if parsed <= datetime.now(UTC):
        raise ValueError("must be in the future")
    return parsed


_last_uuid7 = 0
_RANDOM_BLOCK = 4096  # bytes read from the system at a time: 256 UUIDs' random bits
_random = b""
_random_at = 0


def _forget_random() -> None:
    """A forked process reads its own random bits (never its parent's)."""
    global _random, _random_at
    _random, _random_at = b"", 0


os.register_at_fork(after_in_child=_forget_random)


def _random_int() -> int:
    """128 random bits, from a block read from the system's CSPRNG (one call per 256 UUIDs:
    a call each cost a write path 7 % of its time, measured in an import)."""
    global _random, _random_at
    if _random_at >= len(_random):
        _random, _random_at = os.urandom(_RANDOM_BLOCK), 0
    start = _random_at
    _random_at += 16
    return int.from_bytes(_random[start : start + 16], "big")


def uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits; increasing within a
    process (within one millisecond the previous value plus one, RFC 9562 section 6.2)."""
    global _last_uuid7
    millis = time.time_ns() // 1_000_000
    rand = _random_int()
    value = (millis & (2**48 - 1)) << 80
    value |= 0x7 << 76
    value |= (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & (2**62 - 1)
    if value <= _last_uuid7 and _last_uuid7 >> 80 == value >> 80:
        value = _next_in_millisecond(_last_uuid7)
    _last_uuid7 = value
    return uuid.UUID(int=value)


def _next_in_millisecond(previous: int) -> int:
    """The next UUIDv7 after `previous`: its 74 random bits (12 + 62) counted up by one."""
    rand_a = previous >> 64 & 0xFFF
    rand_b = previous & (2**62 - 1)
    counter = (rand_a << 62 | rand_b) + 1
    rand_a, rand_b = counter >> 62 & 0xFFF, counter & (2**62 - 1)
    return (previous >> 80) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b


def async_url(url: str) -> URL:
    parsed = make_url(url)
    if parsed.drivername in ("sqlite", "sqlite+pysqlite"):
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    elif parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed


# Functions SQLite statements call, defined in Python beside their PostgreSQL SQL.
SQLITE_FUNCTIONS: tuple[tuple[str, int, Callable[..., Any]], ...] = (
    ("units_relevance", 2, sqlite_relevance),
    ("units_distance", 5, sqlite_distance),
    ("units_inside", 3, sqlite_inside),
)


def _tune_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy's "begin" event own BEGIN, so writers take the lock up front.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "foreign_keys=ON",
            "busy_timeout=10000",
            "cache_size=-65536",
            "temp_store=MEMORY",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()
        for name, arguments, function in SQLITE_FUNCTIONS:
            dbapi_conn.create_function(name, arguments, function, deterministic=True)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def server_settings(parallel_workers: int) -> dict[str, str]:
    """Session settings of the service's PostgreSQL connections.

    Parallel query is off by default: starting workers costs a short query (a page, a count
    through an index) tens of milliseconds, which an API serving many small requests on a few
    cores never wins back (see bench/README.md).
    """
    return {
        "application_name": "units-api",
        "max_parallel_workers_per_gather": str(parallel_workers),
    }


def create_engine(url: str, pool_size: int = 10, parallel_workers: int = 0) -> AsyncEngine:
    parsed = async_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(parsed, pool_size=pool_size, max_overflow=pool_size)
        _tune_sqlite(engine)
        return engine
    # A fixed pool: overflow connections would be opened and closed under load.
    return create_async_engine(
        parsed,
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=30,
        connect_args={"server_settings": server_settings(parallel_workers)},
    )


# An execution option set by `Database.transaction(lone=True)`.
LONE = "units_api_lone"
# Set in a connection's `info` by a transaction that wrote events: once it commits, the
# process's listeners (the event worker) are told.
EVENTS_WRITTEN = "units_api_events_written"


class PlainConnection:
    """A connection of PostgreSQL's fast pool, for one operation whose statements all run on
    the driver (`driver_connection`): one unit's create, replace, patch or delete. It has
    what those need of an `AsyncConnection`: its dialect, an `info` dict, and a transaction,
    begun by `driver_connection` at the first statement that needs one and ended by
    `Database.operation`. SQLAlchemy's connection layer (checkout, options, begin, commit,
    return) costs such an operation more than its statements (see bench/README.md)."""

    dialect: Dialect = postgresql.asyncpg.dialect()  # type: ignore[no-untyped-call]

    def __init__(self, driver: asyncpg.Connection) -> None:
        self.driver = driver
        self.info: dict[str, Any] = {}
        self.transaction: Any = None


# An operation's connection: SQLAlchemy's, or PostgreSQL's plain one (see PlainConnection).
Connection = AsyncConnection | PlainConnection


async def driver_connection(conn: Connection, alone: bool = False) -> asyncpg.Connection:
    """PostgreSQL: the asyncpg connection under `conn`, inside `conn`'s transaction.

    The hottest statements run as prepared statements on it: the SQLAlchemy layer costs more
    than those statements themselves. SQLAlchemy opens its transaction at the first
    statement it runs, so it is opened here when none has run yet (the adapter's own
    method, so SQLAlchemy commits or rolls it back as usual).

    `alone`: the statement is correct on its own, outside any transaction: a read, or the
    operation's last write, which checks itself what it relies on (a version). In a
    transaction opened as `lone` (its opener runs nothing after the operation), or on a
    PlainConnection, such a statement, finding no transaction begun, runs by itself, atomic,
    without BEGIN and COMMIT.
    """
    if isinstance(conn, PlainConnection):
        if conn.transaction is None and not alone:
            conn.transaction = conn.driver.transaction()
            await conn.transaction.start()
        return conn.driver
    raw = await conn.get_raw_connection()
    adapted: Any = raw.dbapi_connection
    options = conn.sync_connection.get_execution_options() if conn.sync_connection else {}
    if adapted._transaction is None and not (alone and options.get(LONE)):
        await adapted._start_transaction()
    return raw.driver_connection


async def _reset_session(connection: asyncpg.Connection) -> None:
    """The fast pool runs prepared statements and transactions, never a session setting: a
    connection only needs its transaction ended, if one is left (asyncpg's own reset would
    cost a round trip every time)."""
    if connection.is_in_transaction():
        await connection.execute("ROLLBACK")


class Database:
    """The engine plus the ways the service talks to it.

    On PostgreSQL a small asyncpg pool serves the hottest operations, one unit's read and
    writes: measured, the SQLAlchemy async layer costs more than their statements there
    (see bench/README.md).
    """

    def __init__(self, engine: AsyncEngine, parallel_workers: int = 0) -> None:
        self.engine = engine
        self.parallel_workers = parallel_workers
        self.dialect = engine.dialect.name
        self.fast_pool: asyncpg.Pool | None = None
        self.on_events: list[Callable[[], None]] = []

    def _asyncpg_dsn(self) -> str:
        return self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)

    async def raw_connection(self) -> asyncpg.Connection:
        """A plain asyncpg connection, for bulk work such as COPY (PostgreSQL only)."""
        return await asyncpg.connect(self._asyncpg_dsn())

    async def open_fast_pool(self, size: int) -> None:
        if self.dialect != "postgresql" or size < 1:
            return
        self.fast_pool = await asyncpg.create_pool(
            self._asyncpg_dsn(),
            min_size=1,
            max_size=size,
            server_settings=server_settings(self.parallel_workers),
            reset=_reset_session,
        )

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads; on PostgreSQL it runs without BEGIN/COMMIT round trips."""
        async with self.engine.connect() as conn:
            if self.dialect == "postgresql":
                await conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[AsyncConnection]:
        """A read-only transaction in which every statement sees the same committed data:
        REPEATABLE READ on PostgreSQL; on SQLite (WAL) one read transaction, whose snapshot is
        taken by its first read."""
        async with self.engine.connect() as conn:
            if self.dialect == "postgresql":
                await conn.execution_options(
                    isolation_level="REPEATABLE READ", postgresql_readonly=True
                )
            async with conn.begin():
                yield conn

    @asynccontextmanager
    async def transaction(self, lone: bool = False) -> AsyncIterator[AsyncConnection]:
        """One write transaction, committed on a clean exit and rolled back on any error.

        `lone`: the opener runs one operation and nothing after it, so an operation made of a
        single statement may run it alone (see `driver_connection`).
        """
        async with self.engine.connect() as conn:
            if self.dialect == "sqlite":
                await conn.execution_options(sqlite_begin="IMMEDIATE")
            elif lone:
                await conn.execution_options(**{LONE: True})
            try:
                async with conn.begin():
                    yield conn
            except BaseException:
                conn.info.pop(EVENTS_WRITTEN, None)
                raise
            if conn.info.pop(EVENTS_WRITTEN, False):
                for listener in self.on_events:
                    listener()

    @asynccontextmanager
    async def operation(self) -> AsyncIterator[Connection]:
        """The transaction of one lone operation whose statements all run on the driver
        (`driver_connection`): on PostgreSQL a PlainConnection of the fast pool, elsewhere
        (or without the pool) `transaction(lone=True)`. Committed on a clean exit, rolled
        back on any error."""
        if self.fast_pool is None:
            async with self.transaction(lone=True) as conn:
                yield conn
            return
        async with self.fast_pool.acquire() as driver:
            plain = PlainConnection(driver)
            try:
                yield plain
            except BaseException:
                if plain.transaction is not None:
                    # A connection too broken to roll back is closed by the pool instead.
                    with suppress(Exception):
                        await plain.transaction.rollback()
                raise
            if plain.transaction is not None:
                await plain.transaction.commit()
        if plain.info.pop(EVENTS_WRITTEN, False):
            for listener in self.on_events:
                listener()

    async def dispose(self) -> None:
        if self.fast_pool is not None:
            await self.fast_pool.close()
        await self.engine.dispose()
