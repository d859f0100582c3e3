"""SQLite's one writer in a server process: concurrent write transactions committed together.

SQLite lets one connection write at a time. Each write request taking the lock on a pooled
connection of its own (BEGIN IMMEDIATE) meant the others waited in SQLite's busy handler,
which sleeps and backs off, and each commit was made alone: 32 clients creating units got 81
creates/s, with a p99 of 1.55 s (bench/README.md). Here one task owns one connection and
every write transaction of the process goes through it, in turns:

- the writer opens BEGIN IMMEDIATE and gives each waiting transaction its turn inside a
  savepoint of its own: the transaction's body runs on the writer's connection, in the
  caller's task; a body that ends cleanly is released into the shared transaction, one that
  raises (or is cancelled) is rolled back to its savepoint, leaving nothing of its writes,
  and its error reaches its caller alone, as if it had run by itself;
- once no transaction is waiting (or `max_batch` have had their turn), the writer commits
  once, and only then lets each member's `async with` return: an answer is sent after its
  write is committed, so an acknowledged write survives a crash as before. A commit that
  fails fails every member of the batch with its error;
- statements that must see each other's writes in order (feed positions, a unit's version)
  see them: turns run one after another in one transaction, and commit order is turn order.

A body must not open a second write transaction in the same task: it would wait for its own
turn for ever, so that raises at once (`NestedWrite`). Other processes (job processes, the CLI)
write with connections of their own; SQLite's busy timeout still settles those.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

# How many transactions one commit may hold at most: a bound on the wait of the first.
MAX_BATCH = 64

# Marks the writer's connection in its `info`.
_WRITER = "units_api_writer"


class NestedWrite(RuntimeError):
    """A write transaction opened inside another in the same task (a bug: it would wait for
    the writer's turn its own transaction holds)."""


class _Member:
    """One write transaction waiting for, holding or having had its turn."""

    __slots__ = ("committed", "done", "task", "turn")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.task = asyncio.current_task()
        # The writer's connection, once the savepoint of this turn is open.
        self.turn: asyncio.Future[AsyncConnection] = loop.create_future()
        # Set by the member when its body ends: whether it ended cleanly.
        self.done: asyncio.Future[bool] = loop.create_future()
        # Set by the writer: None once committed, or the error that lost the write.
        self.committed: asyncio.Future[BaseException | None] = loop.create_future()


def _settle(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


class Writer:
    """The one writer of a SQLite database in this process (see the module's text)."""

    def __init__(self, engine: AsyncEngine, max_batch: int = MAX_BATCH) -> None:
        self._engine = engine
        self.max_batch = max_batch
        self._waiting: deque[_Member] = deque()
        self._wake = asyncio.Event()
        self._conn: AsyncConnection | None = None
        self._holder: asyncio.Task[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        # Statistics of this process's batches: how many commits, how many transactions.
        self.commits = 0
        self.members = 0

        @event.listens_for(engine.sync_engine, "handle_error")
        def _keep_on_cancel(context: ExceptionContext) -> None:
            # A statement of a member whose task was cancelled: the driver's thread finishes
            # it, and its savepoint is rolled back. The connection stays (SQLAlchemy would
            # close it, losing the other members' writes with the shared transaction).
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
        """Stop taking turns; the transactions waiting are failed, the connection closed."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._waiting:
            member = self._waiting.popleft()
            if not member.turn.done():
                member.turn.set_exception(RuntimeError("the database is closing"))
        if self._conn is not None:
            with suppress(Exception):
                await self._conn.close()
            self._conn = None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A turn in the writer's shared transaction: the body's writes are kept if it ends
        cleanly and the batch commits, and `async with` returns only once it has."""
        if self._task is None or self._task.done():
            raise RuntimeError("the writer is not running")
        if self._holder is not None and self._holder is asyncio.current_task():
            raise NestedWrite("a write transaction inside another in the same task")
        member = _Member(asyncio.get_running_loop())
        self._waiting.append(member)
        self._wake.set()
        try:
            conn = await member.turn
        except asyncio.CancelledError:
            # Cancelled while waiting, or just as the turn came: give it back.
            self._give_back(member, False)
            raise
        try:
            yield conn
        except BaseException:
            self._give_back(member, False)
            raise
        self._give_back(member, True)
        lost = await member.committed
        if lost is not None:
            raise lost

    def _give_back(self, member: _Member, clean: bool) -> None:
        """End `member`'s turn (its task may open its next transaction at once)."""
        if self._holder is member.task:
            self._holder = None
        _settle(member.done, clean)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._waiting:
                await self._batch()

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
            self._conn = conn
        return conn

    async def _batch(self) -> None:
        """One shared transaction: turns until none waits or `max_batch` had one, one commit."""
        try:
            conn = await self._connection()
            transaction = await conn.begin()
        except Exception as error:
            # The database cannot be written now (busy past the timeout, a broken file):
            # every waiting transaction fails with that error, as each would have alone.
            while self._waiting:
                member = self._waiting.popleft()
                if not member.turn.done():
                    member.turn.set_exception(error)
            if self._conn is not None and self._conn.in_transaction():
                with suppress(Exception):
                    await self._conn.rollback()
            return
        kept: list[_Member] = []
        lost: BaseException | None = None
        turns = 0
        while self._waiting and turns < self.max_batch:
            member = self._waiting.popleft()
            if member.turn.done():  # cancelled while it waited
                continue
            turns += 1
            try:
                savepoint = await conn.begin_nested()
            except Exception as error:
                member.turn.set_exception(error)
                lost = error
                break
            self._holder = member.task
            member.turn.set_result(conn)
            try:
                clean = await asyncio.shield(member.done)
            finally:
                self._holder = None
            try:
                if clean:
                    await savepoint.commit()
                    kept.append(member)
                else:
                    await savepoint.rollback()
            except Exception as error:
                # SQLite ended the whole transaction (a full disk, an I/O error): the writes
                # of the members before are gone too.
                lost = error
                if clean:
                    kept.append(member)
                break
        if lost is None:
            try:
                await transaction.commit()
            except Exception as error:
                lost = error
        if lost is not None:
            with suppress(Exception):
                await transaction.rollback()
        self.commits += 1
        self.members += len(kept)
        for member in kept:
            _settle(member.committed, lost)
