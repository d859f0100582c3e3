"""The dashboards' copy: the units' grouped and measured columns held in an embedded columnar
engine (DuckDB, the `dashboards` extra) in each serving process, so that an aggregates
question never asked before is answered in milliseconds rather than by a scan of the units.

Measured at 1,000,000 units (bench/README.md, "Dashboards"): a GROUP BY over the copy took
tens of milliseconds where the database's took hundreds.

- Loading: in the background when the process starts, in pages by id; until it is loaded,
  and whenever it cannot answer a question exactly (`dashboard_sql.plan`), the database
  answers as before.
- Freshness (read your writes): before each answer the copy reads, in one statement
  (`repository.feed_changes`), the change version, the feed's head and every event naming a
  unit past the head it last read or not numbered yet; then those units' rows as they are
  now, and replaces its rows of them (a deleted unit's row goes).
  So an answer holds every change committed before its request began. Requests that wait
  while another catches up use its catch-up when it began after they did.
- Many changes at once (more than `CATCH_UP_MAX` events to read, or events pruned past the
  copy's head), or units changed with no event to tell of it (the change version moved, no
  unit event did: a statement made outside the service): the copy is loaded again in the
  background and the database answers meanwhile. A statement outside the service made
  while the service writes too is not seen until the next load: the feed is the copy's
  source, as it is every follower's.
- Rows replaced pile up as deleted rows in the engine: past a quarter of the copy, it is
  loaded again (the old copy answering until the new one is ready).
"""

# ruff: noqa: S608 (the statements name the copy's own tables; values are parameters)

from __future__ import annotations

import asyncio
import importlib.util
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import Database, unbounded
from units_api.filters.tree import Node
from units_api.http.json import dumps
from units_api.units import dashboard_sql, repository
from units_api.units.schemas import QueryRequest

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger(__name__)
T = TypeVar("T")

LOAD_PAGE = 10_000  # units read per statement while loading
CATCH_UP_MAX = 20_000  # events read before an answer; past it the copy is loaded again
_SCHEMA = """CREATE TABLE {table} (
    id UUID, city VARCHAR, type VARCHAR, sub_project_id VARCHAR, publishing_status VARCHAR,
    availability_status VARCHAR, bedrooms BIGINT, price DECIMAL(18, 2),
    surface DECIMAL(18, 2), odd_price BOOLEAN, odd_surface BOOLEAN)"""
_ODD = "SELECT count(*) FILTER (WHERE odd_price), count(*) FILTER (WHERE odd_surface) FROM {table}"


def available() -> bool:
    """Whether the `dashboards` extra is installed. Looked for, not imported: the engine's
    objects made before the app's start freezes the collector's view (`process.py`) would
    outlive it, and its bindings report each as a leak when the process ends."""
    return importlib.util.find_spec("duckdb") is not None


@dataclass(slots=True)
class _Copy:
    """One loaded table and how far it has been brought."""

    table: str
    head: int  # the feed's head as last read
    version: int  # the change version read before the last catch-up
    caught_up_at: float  # when the last catch-up began (monotonic)
    rows: int
    replaced: int  # rows deleted since the load
    odd: dict[str, int]  # amounts held inexactly, by field
    # The events not numbered yet at the last catch-up, by seq: once numbered they are read
    # again, but tell of no new change.
    pending: set[int] = field(default_factory=set)


class Dashboards:
    """A process's copy; `answer` gives None whenever the database should answer instead."""

    def __init__(self, db: Database, threads: int) -> None:
        self._db = db
        self._threads = threads
        self._engine: duckdb.DuckDBPyConnection | None = None
        # The engine's statements run in these threads (closed before the engine is).
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dashboards")
        self._copy: _Copy | None = None
        self._binary_text = True
        self._lock = asyncio.Lock()
        self._loading: asyncio.Task[None] | None = None
        self._loads = 0
        self._tables: list[str] = []  # the tables loaded (all but the last to be dropped)
        self.answered = 0  # questions the copy answered (tests read it)
        self.load_seconds: float | None = None

    @property
    def ready(self) -> bool:
        return self._copy is not None

    def start(self) -> None:
        """Loads the copy in the background (once at a time)."""
        if self._loading is None or self._loading.done():
            self._loading = asyncio.create_task(self._load(), name="dashboards-load")

    async def wait_ready(self) -> None:
        """Waits for a load under way (tests and benchmarks)."""
        if self._loading is not None:
            await asyncio.shield(self._loading)

    async def close(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._loading  # a failed load was logged by the load itself
        self._copy = None
        await asyncio.to_thread(self._pool.shutdown, True)
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    async def answer(
        self, conn: AsyncConnection, request: QueryRequest, policy: Node | None
    ) -> tuple[int, bytes] | None:
        """The question's answer and the change version it holds at least, or None."""
        if self._copy is None or self._plan(request, policy, frozenset()) is None:
            return None  # a question the copy cannot say, whatever it holds
        version = await self._catch_up(conn, time.monotonic())
        copy = self._copy
        if version is None or copy is None:
            return None
        found = self._plan(request, policy, _odd_fields(copy))
        if found is None:
            return None  # an amount it holds inexactly
        try:
            rows = await self._run(self._query, found)
        except Exception:  # the engine's fault (a table dropped under it): the database's turn
            log.exception("the dashboards' copy failed to answer: the database answers")
            return None
        # A catch-up may have brought an amount the copy holds inexactly; its count is kept
        # before the rows are committed, so a question that read them sees it here.
        copy = self._copy
        if copy is None or found.amounts & _odd_fields(copy):
            return None
        self.answered += 1
        return version, dumps([_row(found, row) for row in rows])

    def _plan(
        self, request: QueryRequest, policy: Node | None, odd: frozenset[str]
    ) -> dashboard_sql.Plan | None:
        copy = self._copy
        if copy is None:
            return None
        return dashboard_sql.plan(
            request, policy, self._db.dialect, odd, self._binary_text, copy.table
        )

    async def _run(self, work: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, work, *args)

    # Loading.

    async def _load(self) -> None:
        unbounded()  # background work: its pages keep no client waiting
        started = time.perf_counter()
        try:
            engine = self._open()
            self._loads += 1
            table = f"units_{self._loads}"
            self._tables.append(table)
            await self._run(_execute, engine, _SCHEMA.format(table=table))
            async with self._db.read() as conn:
                self._binary_text = await repository.orders_text_by_code_point(conn)
                feed = await repository.feed_changes(conn, 0, 0)
            version, head = feed.version, feed.head
            rows = await self._fill(engine, table)
            odd = await self._run(_odd, engine, table)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the dashboards' copy failed to load: the database answers")
            return
        async with self._lock:
            # Caught up on the next question: from `head`, read before the first page.
            self._copy = _Copy(table, head, version, -math.inf, rows, 0, odd)
        for old in [name for name in self._tables if name != table]:
            await self._run(_execute, engine, f"DROP TABLE IF EXISTS {old}")
        self._tables = [table]
        self.load_seconds = time.perf_counter() - started
        log.info("dashboards' copy loaded", extra={"units": rows, "seconds": self.load_seconds})

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self._engine is None:
            import duckdb

            config: dict[str, str | bool | int | float | list[str]] = {}
            if self._threads:
                config["threads"] = self._threads
            self._engine = duckdb.connect(":memory:", config=config)
        return self._engine

    async def _fill(self, engine: duckdb.DuckDBPyConnection, table: str) -> int:
        after: uuid.UUID | None = None
        count = 0
        while True:
            async with self._db.read() as conn:
                page = await repository.copied_after(conn, after, LOAD_PAGE)
            if not page:
                return count
            await self._run(_insert, engine, table, page, self._db.dialect)
            after, count = page[-1][0], count + len(page)

    # Catching up.

    async def _catch_up(self, conn: AsyncConnection, asked: float) -> int | None:
        """Brings the copy past every change committed before `asked`; its change version,
        or None when it cannot (a load has been started)."""
        async with self._lock:
            copy = self._copy
            if copy is None:
                return None
            if copy.caught_up_at >= asked:
                return copy.version
            began = time.monotonic()
            feed = await repository.feed_changes(conn, copy.head, CATCH_UP_MAX)
            head, version, changed = feed.head, feed.version, feed.events
            told = any(seq not in copy.pending for seq, *_ in changed)
            lost = len(changed) > CATCH_UP_MAX or feed.pruned > copy.head
            if lost or (version != copy.version and not told):
                # Too much to read, events pruned, or a write no event tells of (a statement
                # on the units made outside the service): loaded again; the database answers.
                self._copy = None
                self.start()
                return None
            copy.pending = {seq for seq, _, numbered in changed if not numbered}
            changed_units = {unit_id for _, unit_id, _ in changed}
            if changed_units:
                ids = sorted(changed_units)
                rows = await repository.copied_of(conn, ids)
                args = (self._open(), copy, ids, rows, self._db.dialect)
                try:
                    await self._run(_replace, *args)
                except Exception:
                    log.exception("the dashboards' copy failed to catch up: loaded again")
                    self._copy = None
                    self.start()
                    return None
            copy.head, copy.version, copy.caught_up_at = head, version, began
            if copy.replaced > max(copy.rows, LOAD_PAGE) // 4:
                self.start()  # a fresh table, without the deleted rows
            return version

    def _query(self, found: dashboard_sql.Plan) -> list[tuple[Any, ...]]:
        cursor = self._open().cursor()
        try:
            return cursor.execute(found.sql, found.parameters).fetchall()
        finally:
            cursor.close()


def _odd_fields(copy: _Copy) -> frozenset[str]:
    return frozenset(field for field, count in copy.odd.items() if count)


# In a thread: the engine's statements.


def _execute(engine: duckdb.DuckDBPyConnection, sql: str) -> None:
    cursor = engine.cursor()
    try:
        cursor.execute(sql)
    finally:
        cursor.close()


def _odd(engine: duckdb.DuckDBPyConnection, table: str) -> dict[str, int]:
    cursor = engine.cursor()
    try:
        found = cursor.execute(_ODD.format(table=table)).fetchone()
    finally:
        cursor.close()
    assert found is not None
    return {"price": int(found[0]), "surface": int(found[1])}


def _columns(rows: Sequence[tuple[Any, ...]], dialect: str) -> dict[str, list[Any]]:
    """The rows' values by column; amounts as they are stored (SQLite's doubles as their
    shortest decimals), held in two places by `_INSERT`."""
    exact = _shortest if dialect == "sqlite" else _same
    names = ("city", "type", "sub_project_id", "publishing_status", "availability_status")
    return {
        "id": [str(row[0]) for row in rows],
        **{name: [row[i] for row in rows] for i, name in enumerate(names, start=1)},
        "bedrooms": [row[6] for row in rows],
        "price": [exact(row[7]) for row in rows],
        "surface": [exact(row[8]) for row in rows],
    }


def _shortest(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(repr(value))


def _same(value: Decimal | None) -> Decimal | None:
    return value


def _batch(rows: Sequence[tuple[Any, ...]], dialect: str) -> Any:
    """The rows as an Arrow table; amounts in DECIMAL(38, 20), which holds any the API takes
    (at most 10^15, 20 places)."""
    import pyarrow as pa

    wide = pa.decimal128(38, 20)
    types = {"price": wide, "surface": wide}
    columns = _columns(rows, dialect)
    return pa.table(
        {name: pa.array(values, type=types.get(name)) for name, values in columns.items()}
    )


# The batch's rows into a table: amounts to two places, each marked odd when that changed it.
_INSERT = """INSERT INTO {table} SELECT id::UUID, city, type, sub_project_id,
    publishing_status, availability_status, bedrooms,
    price::DECIMAL(18, 2), surface::DECIMAL(18, 2),
    coalesce(price::DECIMAL(18, 2) <> price, false),
    coalesce(surface::DECIMAL(18, 2) <> surface, false)
    FROM batch"""
_RETURNING = " RETURNING odd_price, odd_surface"


def _insert(
    engine: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[tuple[Any, ...]],
    dialect: str,
) -> None:
    cursor = engine.cursor()
    try:
        cursor.register("batch", _batch(rows, dialect))
        cursor.execute(_INSERT.format(table=table))
        cursor.unregister("batch")
    finally:
        cursor.close()


def _replace(
    engine: duckdb.DuckDBPyConnection,
    copy: _Copy,
    ids: Sequence[uuid.UUID],
    rows: Sequence[tuple[Any, ...]],
    dialect: str,
) -> None:
    """Replaces the copy's rows of these units with their rows now, in one transaction (a
    question never sees a unit twice or not at all). The odd counts are kept before the
    commit: a question that sees the new rows sees their counts."""
    import pyarrow as pa

    batch = _batch(rows, dialect)
    cursor = engine.cursor()
    try:
        cursor.execute("BEGIN")
        cursor.register("changed", pa.table({"id": [str(unit_id) for unit_id in ids]}))
        gone = cursor.execute(
            f"DELETE FROM {copy.table} WHERE id IN (SELECT id::UUID FROM changed) "
            "RETURNING odd_price, odd_surface"
        ).fetchall()
        cursor.unregister("changed")
        cursor.register("batch", batch)
        added = cursor.execute(_INSERT.format(table=copy.table) + _RETURNING).fetchall()
        cursor.unregister("batch")
        copy.rows += len(rows) - len(gone)
        copy.replaced += len(gone)
        for field, index in (("price", 0), ("surface", 1)):
            counted = sum(1 for row in added if row[index])
            copy.odd[field] += counted - sum(1 for row in gone if row[index])
        cursor.execute("COMMIT")
    except BaseException:
        cursor.execute("ROLLBACK")
        raise
    finally:
        cursor.close()


def _row(found: dashboard_sql.Plan, row: tuple[Any, ...]) -> dict[str, Any]:
    """One answer row: averages from their exact sums and counts, decimals as the database
    writes them but without trailing zeros."""
    values = iter(row)
    out: dict[str, Any] = {}
    for name, averaged in zip(found.names, found.averaged, strict=True):
        value = next(values)
        if averaged:
            count = next(values)
            out[name] = None if not count else float(Decimal(value) / count)
        else:
            out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else value.normalize()
    return value
