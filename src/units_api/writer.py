"""SQLite's one writer in a server process: concurrent write transactions committed together.

SQLite lets one connection write at a time. Each write request taking the lock on a pooled
connection of its own (BEGIN IMMEDIATE) meant the others waited in SQLite's busy handler,
which sleeps and backs off, and each commit was made alone: 32 clients creating units got
163-173 creates/s, with a p99 near 1.5 s and some requests past 2 s (bench/README.md,
`write_embedded.py`). Here every write transaction of the process goes through one
connection, in turns:

- a writer task opens BEGIN IMMEDIATE when transactions wait, and each transaction has its
  turn inside a savepoint of its own: its body runs on the writer's connection, in the
  caller's task. A body that ends cleanly is released into the shared transaction; one that
  raises (or is cancelled) is rolled back to its savepoint, leaving nothing of its writes, and
  its error reaches its caller alone, as if it had run by itself;
- when the turns waiting have been had (or `max_batch` transactions are in), the writer
  commits once, and only then does each member's `async with` return: an answer is sent after
  its write is committed, so an acknowledged write survives a crash as before. A commit that
  fails fails every member of the batch with its error;
- turns run one after another in one transaction, so statements that rely on the order of
  writes (feed positions, a unit's version) see it, and commit order is turn order.

A turn's statements run on the event loop's thread, not on the driver's (aiosqlite's) own: a
statement there costs a wait for the loop between each statement and the next, and turns,
being one after another, would each wait that many times (measured: 166 creates/s with the
loop's waits, bench/README.md). Run inline, a request's statements run without yielding to
the loop, and every transaction ready in a turn of the loop has its turn in it. Opening and
committing (which may wait on another process's lock, or run a checkpoint) run on the driver's
thread; so do the statements of background work (`inline=False`), whose statements may be
long, and which must not hold up the loop's other requests.

A body must not open a second write transaction in the same task: it would wait for ever for
the turn it holds, so that raises at once (`NestedWrite`). Other processes (job processes,
the CLI) write on connections of their own; SQLite's busy timeout still settles those.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import aiosqlite
from sqlalchemy import event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction

# How many transactions one commit may hold at most: a bound on the wait of the first.
MAX_BATCH = 64

log = logging.getLogger(__name__)

# How often, at most, the write-ahead log is checkpointed while writes go on (seconds).
CHECKPOINT_EVERY = 0.2

# Pages in the write-ahead log past which the writer finishes a checkpoint between two
# batches (SQLite's own threshold, `wal_autocheckpoint`, is 1,000).
RESTART_AFTER = 1_000

# A turn's savepoint.
_SAVEPOINT = "SAVEPOINT units_api_turn"
_RELEASE = "RELEASE units_api_turn"
_ROLL_BACK = "ROLLBACK TO units_api_turn"

# Marks the writer's connection in its `info`.
_WRITER = "units_api_writer"


class NestedWrite(RuntimeError):
    """A write transaction opened inside another in the same task (a bug: it would wait for
    the turn its own transaction holds)."""


class _Batch:
    """One shared transaction: its members waiting for the commit, and what lost it."""

    __slots__ = ("kept", "lost", "transaction")

    def __init__(self, transaction: AsyncTransaction) -> None:
        self.transaction = transaction
        # Each member whose body ended cleanly: set to None once committed, or to the error
        # that lost the batch.
        self.kept: list[asyncio.Future[BaseException | None]] = []
        self.lost: BaseException | None = None


class _Inline:
    """The aiosqlite connection's way of running a call: on its thread, as aiosqlite does,
    or (`on`) at once, on the caller's."""

    def __init__(self, driver: aiosqlite.Connection) -> None:
        self.on = False
        self._driver = driver
        self._queued: Callable[..., Any] = driver._execute

    def run(self, statement: str) -> None:
        """A statement run at once on the caller's thread, without SQLAlchemy."""
        self._driver._conn.execute(statement)

    async def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.on:
            return partial(fn, *args, **kwargs)()
        return await self._queued(fn, *args, **kwargs)


def _loss(cause: BaseException | None, rollback_error: Exception) -> BaseException:
    """What the members of a batch lose their writes to when a savepoint cannot be rolled
    back: the database's error that ended the transaction (a full disk is then each one's
    507, as alone), else the rollback's own."""
    return cause if isinstance(cause, DBAPIError) else rollback_error


def _settle(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


class Writer:
    """The one writer of a SQLite database in this process (see the module's text)."""

    def __init__(self, engine: AsyncEngine, max_batch: int | None = None) -> None:
        self._engine = engine
        self.max_batch = max_batch or MAX_BATCH
        self._conn: AsyncConnection | None = None
        self._inline: _Inline | None = None
        self._batch: _Batch | None = None
        # Whether the connection is in use: a member's turn, or the writer opening or
        # committing. Those waiting are all woken when it is free again (each then takes it
        # in turn, at once, if it is still free), so every one ready has its turn in the
        # same turn of the loop.
        self._busy = False
        self._waiters: list[asyncio.Future[None]] = []
        self._holder: asyncio.Task[Any] | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._checkpoint: asyncio.Task[None] | None = None
        self._checkpointed = 0.0
        self._restart = False
        # This process's commits, and the transactions they held.
        self.commits = 0
        self.members = 0

        @event.listens_for(engine.sync_engine, "handle_error")
        def _keep_on_cancel(context: ExceptionContext) -> None:
            # A statement of background work whose task was cancelled: the driver's thread
            # finishes it, and its savepoint is rolled back after it. The connection stays
            # (SQLAlchemy would close it, losing the other members' writes with it).
            connection = context.connection
            if (
                connection is not None
                and connection.info.get(_WRITER)
                and isinstance(context.original_exception, asyncio.CancelledError)
            ):
                context.is_disconnect = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="sqlite-writer")

    async def close(self) -> None:
        """Stop: the transactions still waiting fail, an open batch is rolled back."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._checkpoint is not None:
            with suppress(Exception):
                await self._checkpoint
        self._wake_all(RuntimeError("the database is closing"))
        if self._conn is not None:
            with suppress(Exception):
                await self._conn.close()
            self._conn = None

    @asynccontextmanager
    async def transaction(self, inline: bool = True) -> AsyncIterator[AsyncConnection]:
        """A turn in the writer's shared transaction: the body's writes are kept if it ends
        cleanly and its batch commits, and `async with` returns only once it has. `inline`:
        the statements run on the loop's thread (see the module's text)."""
        task = asyncio.current_task()
        if self._holder is not None and self._holder is task:
            raise NestedWrite("a write transaction inside another in the same task")
        batch = await self._take_turn()
        conn, switch = self._conn, self._inline
        assert conn is not None and switch is not None
        self._holder = task
        switch.on = inline
        if inline:
            # The savepoint's statements straight on the driver (SQLAlchemy's own savepoint
            # cost a turn more than its statement): nothing here suspends, so the turn cannot
            # be cancelled halfway.
            try:
                switch.run(_SAVEPOINT)
            except BaseException as error:
                self._end_turn(batch, error)
                raise
            try:
                yield conn
            except BaseException as error:
                self._end_turn(batch, await self._roll_back_inline(conn, switch, error))
                raise
            try:
                switch.run(_RELEASE)
            except BaseException as error:
                self._end_turn(batch, error)
                raise
        else:
            # On the driver's thread: the savepoint's statements run in tasks of their own, so
            # a cancelled caller leaves none of them halfway, and the turn always ends.
            begun = asyncio.ensure_future(conn.begin_nested())
            try:
                await asyncio.shield(begun)
            except BaseException:
                self._holder = None
                self._ending(batch, begun, clean=False)
                raise
            try:
                yield conn
            except BaseException as error:
                self._holder = None  # its task may open its next transaction at once
                self._ending(batch, begun, clean=False, cause=error)
                raise
            kept = await asyncio.shield(self._ending(batch, begun, clean=True))
            assert kept is not None
            lost = await asyncio.shield(kept)
            if lost is not None:
                raise lost
            return
        committed = self._keep(batch)
        self._end_turn(batch, None)
        lost = await asyncio.shield(committed)
        if lost is not None:
            raise lost

    @staticmethod
    def _keep(batch: _Batch) -> asyncio.Future[BaseException | None]:
        """A member's writes kept in `batch`: its future, told the commit's outcome."""
        committed: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        batch.kept.append(committed)
        return committed

    async def _take_turn(self) -> _Batch:
        """Wait until the connection is free in an open batch with room, and take it."""
        loop = asyncio.get_running_loop()
        while True:
            batch = self._batch
            usable = batch is not None and batch.lost is None and len(batch.kept) < self.max_batch
            if batch is not None and usable and not self._busy:
                self._busy = True
                return batch
            if self._task is None or self._task.done():
                raise RuntimeError("the writer is not running")
            if not usable:
                self._wake.set()  # a batch to open, or one to commit
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            await waiter

    async def _roll_back_inline(
        self, conn: AsyncConnection, switch: _Inline, cause: BaseException
    ) -> BaseException | None:
        """`_roll_back` for a savepoint of the driver's own, and of any savepoint the body had
        SQLAlchemy open inside it and left open."""
        try:
            nested = conn.get_nested_transaction()
            if nested is not None and nested.is_active:
                await nested.rollback()
            switch.run(_ROLL_BACK)
            switch.run(_RELEASE)
        except Exception as error:
            return _loss(cause, error)
        return None

    async def _roll_back(
        self, savepoint: Any, cause: BaseException | None = None
    ) -> BaseException | None:
        """Roll a member's savepoint back; if SQLite had ended the whole transaction (a full
        disk, an I/O error: the members before lose their writes too), what lost it."""
        try:
            await savepoint.rollback()
        except Exception as error:
            return _loss(cause, error)
        return None

    def _ending(
        self,
        batch: _Batch,
        begun: asyncio.Future[Any],
        clean: bool,
        cause: BaseException | None = None,
    ) -> asyncio.Future[asyncio.Future[BaseException | None] | None]:
        """End a turn on the driver's thread, in a task of its own: the savepoint released
        (`clean`: the member's future in the batch, or the release's error) or rolled back."""

        async def end() -> asyncio.Future[BaseException | None] | None:
            try:
                savepoint = await begun
            except BaseException as error:
                self._end_turn(batch, error)
                raise
            if not clean:
                self._end_turn(batch, await self._roll_back(savepoint, cause))
                return None
            try:
                await savepoint.commit()
            except BaseException as error:
                self._end_turn(batch, error)
                raise
            committed = self._keep(batch)
            self._end_turn(batch, None)
            return committed

        ending = asyncio.ensure_future(end())
        # Its error, if any, is its member's to raise (or was raised by the body already).
        ending.add_done_callback(lambda done: done.cancelled() or done.exception())
        return ending

    def _end_turn(self, batch: _Batch, lost: BaseException | None) -> None:
        """Give the connection back; `lost`: the shared transaction can no longer commit."""
        if self._inline is not None:
            self._inline.on = False
        if lost is not None and batch.lost is None:
            batch.lost = lost
        self._holder = None
        self._busy = False
        # The transactions waiting first, then the writer: those ready have their turns in
        # this batch before it commits.
        self._wake_all()
        self._wake.set()

    def _wake_all(self, error: BaseException | None = None) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._busy:
                continue  # a member's turn: its end wakes this again
            self._busy = True
            error: BaseException | None = None
            try:
                if self._batch is not None:
                    await self._close(self._batch)
                    self._batch = None
                if self._restart:
                    await self._finish_checkpoint()
                if self._waiters:
                    self._batch = await self._open()
            except Exception as failed:
                # The database cannot be written now (busy past the timeout, a broken file):
                # the transactions waiting fail with that error, as each would have alone.
                error = failed
            finally:
                self._busy = False
                self._wake_all(error)

    async def _connection(self) -> AsyncConnection:
        conn = self._conn
        if conn is not None and (conn.invalidated or conn.closed):
            with suppress(Exception):
                await conn.close()
            conn = self._conn = None
        if conn is None:
            conn = await self._engine.connect()
            await conn.execution_options(sqlite_begin="IMMEDIATE")
            conn.info[_WRITER] = True
            # Its commits leave checkpoints to `_checkpoint` (see there).
            await conn.exec_driver_sql("PRAGMA wal_autocheckpoint=0")
            await conn.commit()
            raw = await conn.get_raw_connection()
            driver = raw.dbapi_connection._connection  # type: ignore[union-attr]
            self._inline = _Inline(driver)
            driver._execute = self._inline
            self._conn = conn
        return conn

    async def _open(self) -> _Batch:
        conn = await self._connection()
        assert self._inline is not None
        self._inline.on = False
        transaction = await conn.begin()
        return _Batch(transaction)

    async def _close(self, batch: _Batch) -> None:
        """Commit the batch (or roll it back, lost or empty), then tell its members."""
        assert self._inline is not None
        self._inline.on = False
        lost = batch.lost
        if lost is None and batch.kept:
            try:
                await batch.transaction.commit()
            except Exception as error:
                lost = error
        if lost is not None or not batch.kept:
            with suppress(Exception):
                await batch.transaction.rollback()
        if batch.kept:
            self.commits += 1
            self.members += len(batch.kept)
        for member in batch.kept:
            _settle(member, lost)
        if batch.kept and self._checkpoint is None:
            loop = asyncio.get_running_loop()
            if loop.time() - self._checkpointed >= CHECKPOINT_EVERY:
                self._checkpoint = asyncio.create_task(self._run_checkpoint())

    async def _run_checkpoint(self) -> None:
        """Copy the write-ahead log's pages into the database file, on a connection of its
        own, while the writer goes on. SQLite's automatic checkpoint runs in the commit that
        passes its threshold, with two fsyncs: every member of that batch waited for it.
        Passive: it waits for nothing, and takes what readers no longer need."""
        try:
            async with self._engine.connect() as conn:
                # On the driver, outside any transaction (SQLAlchemy would begin one first).
                driver = (await conn.get_raw_connection()).driver_connection
                assert driver is not None
                cursor = await driver.execute("PRAGMA wal_checkpoint(PASSIVE)")
                _busy, logged, _copied = (await cursor.fetchall())[0]
                if logged >= RESTART_AFTER:
                    self._restart = True
        except Exception as error:  # the next one tries again; the log itself is kept
            log.warning("checkpoint not made", extra={"error": str(error)})
        finally:
            self._checkpointed = asyncio.get_running_loop().time()
            self._checkpoint = None

    async def _finish_checkpoint(self) -> None:
        """A checkpoint between two batches, by the writer: a checkpoint made while batches
        go on never catches up with the log's end, and SQLite starts the log again from its
        beginning only after one has; the log would grow as long as writes go on. What is
        left to copy by then is what came since the last one on its own connection."""
        self._restart = False
        conn = await self._connection()
        try:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            await (await driver.execute("PRAGMA wal_checkpoint(PASSIVE)")).fetchall()
        except Exception as error:
            log.warning("checkpoint not made", extra={"error": str(error)})
