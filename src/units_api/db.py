"""Database plumbing: metadata, portable column types, engines and transactions.

Dialect differences live here (types, pragmas, transaction start) so the repositories stay
portable between SQLite and PostgreSQL. Reads that may be a little behind go to PostgreSQL
read replicas through `Database.run_on_replica` (which replica is in use: `replicas.py`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import DateTime, Dialect, Float, MetaData, Numeric, event
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.types import TypeDecorator, TypeEngine

from units_api import dburls, metrics, tracing
from units_api.errors import DatabaseUnavailable, StorageFull, StorageUnavailable
from units_api.filters.geo import sqlite_distance, sqlite_inside
from units_api.inline_reads import InlineReads
from units_api.outage import Outage
from units_api.replicas import CHECK_TIMEOUT, Replica, ReplicaSet, refuse_unusable, unreachable
from units_api.search.words import sqlite_relevance, sqlite_search_key
from units_api.writer import Writer

T = TypeVar("T")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


# The database out of reach, as SQLAlchemy reports it, or asyncpg on the fast pool: the
# errors the app answers with a 503 when `unreachable` (or SQLite's busy OperationalError).
UNAVAILABLE = (
    DBAPIError,
    PoolTimeout,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
    ConnectionError,
    TimeoutError,
)
# Errors that are the database's to answer for whatever they say: SQLite busy or locked, no
# connection of the pool free in time.
BUSY = (OperationalError, InterfaceError, PoolTimeout)

# SQLite's words for a database file that cannot grow or be written (sqlite3 reports both as
# OperationalError): storage problems, not an unreachable database.
_SQLITE_STORAGE = {"database or disk is full": StorageFull, "disk I/O error": StorageUnavailable}


def disk_fault(exc: BaseException) -> StorageUnavailable | None:
    """SQLite's database file full or failing, as `exc` (the driver's error, or SQLAlchemy's
    around it) says: its 507 problem; None for any other error."""
    message = str(getattr(exc, "orig", None) or exc)
    for words, problem in _SQLITE_STORAGE.items():
        if words in message:
            return problem(
                f"The database could not be written: {words}. What was being written was not "
                "kept; try again once the disk has room or works again."
            )
    return None


# Set by `unbounded`: the statements of this task may run as long as they need.
_UNBOUNDED: ContextVar[bool] = ContextVar("units_api_unbounded", default=False)


def unbounded() -> None:
    """Let the statements of the current task (and of the tasks it starts) run as long as
    they need: background work, whose long statements (a prune, a vacuum) keep no client
    waiting. Everything else (a request) keeps its database's bound (`create_engine`)."""
    _UNBOUNDED.set(True)


def _bind_statements(driver: asyncpg.Connection, seconds: float | None) -> None:
    """How long each statement on `driver` may take (asyncpg reads its `command_timeout` at
    every statement)."""
    config = driver._config
    if config.command_timeout != seconds:
        driver._config = config._replace(command_timeout=seconds)


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


def async_url(url: str) -> URL:
    parsed = dburls.parse(url)
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
    ("units_search_key", 1, sqlite_search_key),
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

    JIT compilation is off: PostgreSQL compiles a statement whose estimated cost passes
    `jit_above_cost` at its start, even for a plain EXPLAIN (an estimated count), and the
    compiling cost 25-35 ms where the statement took under 1 ms (a search within a city at
    1,000,000 units); a scan of every unit (an aggregate) ran no faster with it.
    """
    return {
        "application_name": "units-api",
        "max_parallel_workers_per_gather": str(parallel_workers),
        "jit": "off",
    }


def create_engine(
    url: str,
    pool_size: int = 10,
    parallel_workers: int = 0,
    connect_timeout: float = 60.0,
    bound: float | None = None,
) -> AsyncEngine:
    """An engine for `url`. With `bound` (PostgreSQL), waiting for a connection of the pool,
    making one and every statement (outside `unbounded` work) each take at most `bound`
    seconds, and a connection the database closed is never handed out."""
    parsed = async_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # A connection may run a call on a thread other than its driver's: the writer's
        # statements run on the loop's (`writer.py`), one call at a time.
        engine = create_async_engine(
            parsed,
            pool_size=pool_size,
            max_overflow=pool_size,
            connect_args={"check_same_thread": False},
        )
        _tune_sqlite(engine)
    else:
        # A fixed pool: overflow connections would be opened and closed under load.
        connecting = min(connect_timeout, bound) if bound else connect_timeout
        engine = _create_postgres_engine(parsed, pool_size, parallel_workers, connecting, bound)
        _check_out_alive(engine, bound)
    if tracing.on:
        tracing.instrument_engine(engine)
    return engine


def _create_postgres_engine(
    parsed: URL, pool_size: int, parallel_workers: int, connect_timeout: float, bound: float | None
) -> AsyncEngine:
    return create_async_engine(
        parsed,
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=bound or 30,
        connect_args={
            "server_settings": server_settings(parallel_workers),
            "timeout": connect_timeout,
            "command_timeout": bound,
        },
    )


def _check_out_alive(engine: AsyncEngine, bound: float | None) -> None:
    """A pooled connection the database closed (a restart, `pg_terminate_backend`, a failover)
    is replaced before it is handed out: asyncpg learns of the close when it happens, so
    this costs no round trip, unlike a ping at every checkout. Each checkout bounds its
    statements by `bound`, or not at all in `unbounded` work; a connection goes back to the
    pool bounded, so the reset on its return and the next checkout's are. An invalidated
    connection is ended without waiting on the database."""

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(_dbapi_conn: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        driver = record.driver_connection
        if driver is None or driver.is_closed():
            raise DisconnectionError("the database closed this connection")
        if bound is not None:
            _bind_statements(driver, None if _UNBOUNDED.get() else bound)

    @event.listens_for(engine.sync_engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: ConnectionPoolEntry) -> None:
        driver = record.driver_connection
        if bound is not None and driver is not None:
            _bind_statements(driver, bound)

    @event.listens_for(engine.sync_engine, "invalidate")
    def _on_invalidate(_dbapi_conn: Any, record: ConnectionPoolEntry, _error: Any) -> None:
        # Ended at once: the pool's own close of an invalidated connection first tries a
        # polite one, waiting up to 2 s on a database that may not be answering.
        driver = record.driver_connection
        if driver is not None and not driver.is_closed():
            driver.terminate()


# An execution option set by `Database.transaction(lone=True)`.
LONE = "units_api_lone"
# Set in a connection's `info` by a transaction that wrote events: once it commits, the
# process's listeners (the event worker) are told.
EVENTS_WRITTEN = "units_api_events_written"


class PlainConnection:
    """A connection of PostgreSQL's fast pool, for one operation whose statements all run on
    the driver (`driver_connection`): one unit's read, create, replace, patch or delete. It
    has what those need of an `AsyncConnection`: its dialect, an `info` dict, and a
    transaction, begun by `driver_connection` at the first statement that needs one and
    ended by `Database.operation` (a read, `Database.fast_read`, needs none). SQLAlchemy's
    connection layer (checkout, options, begin, commit, return) costs such an operation more
    than its statements (see bench/README.md)."""

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


@dataclass(slots=True)
class _Reach:
    """Whether work on the database got its connection: a wait that ran out after that was a
    statement's, not one to reach the database (`outage.py`)."""

    reached: bool = False


class Database:
    """The engine plus the ways the service talks to it.

    On PostgreSQL a small asyncpg pool serves the hottest operations, one unit's read and
    writes: measured, the SQLAlchemy async layer costs more than their statements there
    (see bench/README.md).
    """

    def __init__(
        self, engine: AsyncEngine, parallel_workers: int = 0, bound: float | None = None
    ) -> None:
        self.engine = engine
        self.parallel_workers = parallel_workers
        # How long a request waits on the database (see `create_engine`); None: unbounded.
        self.bound = bound
        self.dialect = engine.dialect.name
        postgres = self.dialect == "postgresql"
        self.outage = Outage(self._asyncpg_dsn, bound) if postgres and bound else None
        self.fast_pool: asyncpg.Pool | None = None
        self.replicas: ReplicaSet | None = None
        self.on_events: list[Callable[[], None]] = []
        # SQLite in a server process: the one writer its write transactions go through, and
        # the reads by key its gathered updates make on the loop's thread.
        self.writer: Writer | None = None
        self.inline_reads: InlineReads | None = None

    def open_writer(self, max_batch: int | None = None) -> None:
        """SQLite: from now on, this process's write transactions take turns in shared
        transactions of one writer (`writer.py`), committed together. A server process opens
        it; other processes (jobs, the CLI) write on connections of their own."""
        if self.dialect != "sqlite" or self.writer is not None:
            return
        self.writer = Writer(self.engine, max_batch)
        self.writer.start()
        path = self.engine.url.database
        if path and path != ":memory:" and not self.engine.url.query.get("uri"):
            # Where the engine's connections open it, whatever the working directory becomes.
            self.inline_reads = InlineReads(os.path.abspath(path))

    def _asyncpg_dsn(self) -> str:
        return dburls.driver_dsn(self.engine.url)

    async def raw_connection(self) -> asyncpg.Connection:
        """A plain asyncpg connection, for bulk work such as COPY or a LISTEN (PostgreSQL
        only); made within the database's bound, its statements unbounded."""
        return await asyncpg.connect(self._asyncpg_dsn(), timeout=self.bound or 60.0)

    async def open_fast_pool(self, size: int) -> None:
        if self.dialect != "postgresql" or size < 1:
            return
        self.fast_pool = await asyncpg.create_pool(
            self._asyncpg_dsn(),
            min_size=1,
            max_size=size,
            timeout=self.bound or 60.0,
            command_timeout=self.bound,
            server_settings=server_settings(self.parallel_workers),
            reset=_reset_session,
            init=tracing.init_driver_connection if tracing.on else None,
        )

    @asynccontextmanager
    async def _guarded(self) -> AsyncIterator[_Reach]:
        """Work on the primary, known to be out of reach or not (`outage.py`): while it is,
        a request fails at once (DatabaseUnavailable) rather than wait out the bound; a wait
        that runs out in the work is told to the outage, with whether the work had its
        connection (`_Reach.reached`, set by the work once it has)."""
        reach = _Reach()
        outage = self.outage
        if outage is None:
            yield reach
            return
        if outage.known and not _UNBOUNDED.get():
            raise DatabaseUnavailable()
        try:
            yield reach
        except BaseException as error:
            outage.found(error, reach.reached)
            raise

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads; on PostgreSQL it runs without BEGIN/COMMIT round trips."""
        async with self._guarded() as reach, _read_connection(self.engine) as conn:
            reach.reached = True
            yield conn

    @asynccontextmanager
    async def _plain(self) -> AsyncIterator[PlainConnection]:
        """A PlainConnection of the fast pool, waited for at most the database's bound; one
        the database closed, or that broke under its work, is closed rather than reused.
        Guarded as `_guarded` says, in the same layer (these are the hottest requests)."""
        assert self.fast_pool is not None
        outage = self.outage
        if outage is not None and outage.known and not _UNBOUNDED.get():
            raise DatabaseUnavailable()
        reached = False
        try:
            async with self.fast_pool.acquire(timeout=self.bound) as driver:
                reached = True
                try:
                    yield PlainConnection(driver)
                except BaseException as error:
                    if unreachable(error):
                        driver.terminate()
                    raise
        except BaseException as error:
            if outage is not None:
                outage.found(error, reached)
            raise

    @asynccontextmanager
    async def fast_read(self) -> AsyncIterator[Connection]:
        """A connection for one read whose statement runs on the driver (`driver_connection`
        with `alone`): on PostgreSQL a PlainConnection of the fast pool, outside any
        transaction; elsewhere (or without the pool) `read()`."""
        if self.fast_pool is None:
            async with self.read() as conn:
                yield conn
            return
        async with self._plain() as plain:
            yield plain

    async def open_replicas(
        self, urls: Sequence[str], max_lag: float, pool_size: int = 10, watch: bool = True
    ) -> None:
        """Let the reads that may be up to `max_lag` seconds behind (`run_on_replica`,
        `snapshot(replica=True)`) go to these PostgreSQL streaming replicas. They are checked
        now, then (`watch`) every second in the background. Raises SettingError for a URL
        that cannot serve as one (`replicas.refuse_unusable`)."""
        if not urls or self.replicas is not None:
            return
        if self.dialect != "postgresql":
            raise ValueError("read replicas need a PostgreSQL primary")
        await refuse_unusable(self._asyncpg_dsn(), urls)
        replicas = [
            Replica(
                f"replica-{number}",
                url,
                create_engine(url, pool_size, self.parallel_workers, CHECK_TIMEOUT, self.bound),
            )
            for number, url in enumerate(urls, 1)
        ]
        self.replicas = ReplicaSet(self._asyncpg_dsn(), replicas, max_lag)
        await self.replicas.check()
        if watch:
            self.replicas.watch()

    async def run_on_replica(
        self,
        work: Callable[[AsyncConnection], Awaitable[T]],
        primary: AsyncConnection | None = None,
    ) -> T:
        """Run a read that may see the data up to UNITS_API_REPLICA_MAX_LAG_SECONDS behind on
        a replica in use (in turn), else on the primary (`primary` when the caller holds a
        connection to it, else `read()`). A read that fails on a replica because it could not
        be reached runs again on the primary: a read is safe to run twice."""
        replicas = self.replicas
        replica = replicas.pick() if replicas is not None else None
        if replicas is not None and replica is not None:
            try:
                async with _read_connection(replica.engine) as conn:
                    result = await work(conn)
            except Exception as error:
                if not replicas.failed(replica, error):
                    raise
            else:
                metrics.count_read(replica.name)
                return result
        if primary is not None:
            result = await work(primary)
        else:
            async with self.read() as conn:
                result = await work(conn)
        metrics.count_read("primary")
        return result

    @asynccontextmanager
    async def snapshot(self, replica: bool = False) -> AsyncIterator[AsyncConnection]:
        """A read-only transaction in which every statement sees the same committed data:
        REPEATABLE READ on PostgreSQL; on SQLite (WAL) one read transaction, whose snapshot is
        taken by its first read. With `replica`, on a replica in use when there is one (the
        data up to UNITS_API_REPLICA_MAX_LAG_SECONDS behind), else on the primary; a replica
        found out of reach when the transaction opens is passed over for the primary."""
        replicas = self.replicas if replica else None
        chosen = replicas.pick() if replicas is not None else None
        async with AsyncExitStack() as stack:
            conn: AsyncConnection | None = None
            if replicas is not None and chosen is not None:
                try:
                    conn = await stack.enter_async_context(_snapshot(chosen.engine, True))
                except Exception as error:
                    if not replicas.failed(chosen, error):
                        raise
                else:
                    metrics.count_read(chosen.name)
            if conn is None:
                reach = await stack.enter_async_context(self._guarded())
                conn = await stack.enter_async_context(_snapshot(self.engine, False))
                reach.reached = True
                if replica:
                    metrics.count_read("primary")
            yield conn

    @asynccontextmanager
    async def transaction(
        self, lone: bool = False, long: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        """One write transaction, committed on a clean exit and rolled back on any error.

        `lone`: the opener runs one operation and nothing after it, so an operation made of a
        single statement may run it alone (see `driver_connection`).

        `long`: its statements may take long (many units): on SQLite they run on the driver's
        thread, holding up none of the loop's other requests (`writer.py`).

        On SQLite with the writer open (`open_writer`), a turn in its shared transaction: the
        same outcome for the caller, the commit shared with the transactions of other tasks.
        """
        if self.writer is not None:
            # Long work's statements, and background work's, run on the driver's thread: they
            # hold up no request (see `writer.py`).
            inline = not (long or _UNBOUNDED.get())
            async with self.writer.transaction(inline=inline) as conn:
                conn.info.pop(EVENTS_WRITTEN, None)
                try:
                    yield conn
                finally:
                    wrote = conn.info.pop(EVENTS_WRITTEN, False)
            if wrote:
                for listener in self.on_events:
                    listener()
            return
        async with self._guarded() as reach, self.engine.connect() as conn:
            reach.reached = True
            if self.dialect == "sqlite":
                await conn.execution_options(sqlite_begin="IMMEDIATE")
            elif lone:
                await conn.execution_options(**{LONE: True})
            try:
                async with conn.begin(), _dropped_when_broken(conn):
                    yield conn
            except BaseException:
                if not conn.invalidated:  # (an invalidated one's `info` would reconnect)
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
        async with self._plain() as plain:
            try:
                yield plain
            except BaseException as error:
                if plain.transaction is not None and not unreachable(error):
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
        if self.writer is not None:
            await self.writer.close()
            self.writer = None
        if self.inline_reads is not None:
            self.inline_reads.close()
            self.inline_reads = None
        if self.outage is not None:
            await self.outage.close()
        if self.replicas is not None:
            await self.replicas.close()
            self.replicas = None
        if self.fast_pool is not None:
            await self.fast_pool.close()
        await self.engine.dispose()


@asynccontextmanager
async def _read_connection(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """`Database.read`'s connection on `engine` (the primary's or a replica's)."""
    async with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            await conn.execution_options(isolation_level="AUTOCOMMIT")
        async with _dropped_when_broken(conn):
            yield conn


@asynccontextmanager
async def _snapshot(engine: AsyncEngine, probe: bool) -> AsyncIterator[AsyncConnection]:
    """`Database.snapshot`'s transaction on `engine` (the primary's or a replica's); with
    `probe`, a first statement runs before it is handed out, so a database out of reach is
    found while another can still be used."""
    async with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            await conn.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
        async with conn.begin(), _dropped_when_broken(conn):
            if probe:
                await conn.exec_driver_sql("SELECT 1")
            yield conn


@asynccontextmanager
async def _dropped_when_broken(conn: AsyncConnection) -> AsyncIterator[None]:
    """Close `conn`'s connection at once when the work in it found the database out of reach
    (closed, reset, not answering in time) or was cancelled mid-statement: rolling back or
    reusing it would only wait on the same fault, or on the statement's cancellation."""
    try:
        yield
    except BaseException as error:
        broken = unreachable(error) or isinstance(error, asyncio.CancelledError)
        if conn.dialect.name == "postgresql" and broken and not conn.invalidated:
            with suppress(Exception):
                # Ended here, not by the pool's invalidation, which first tries a polite close
                # that waits on the database.
                driver = (await conn.get_raw_connection()).driver_connection
                if driver is not None:
                    driver.terminate()
                await conn.invalidate()
        raise
