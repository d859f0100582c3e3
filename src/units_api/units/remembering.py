"""Remembered answers: the query endpoint's aggregates, given again while no unit has changed.

An answer is stored with the change version (`counting.CHANGE_VERSION`) read in the same
statement, hence from the same snapshot, and given only to a request that read that version
or an older one: never stale, whatever wrote to the units. Asking again costs one small read
of the version and a lookup. Each process keeps answers in memory (the least recently used
leave first, within a byte budget) and shares them with the other processes of every server:
through the `remembered_results` table (one row per question, replaced when it is answered
at a newer version), or, with UNITS_API_REDIS_URL, through Redis, so the database writes
nothing for them (a Redis out of reach is passed over, `redis_link.py`: requests compute
instead of failing).
Measured, reading an answer took 0.2 ms from Redis against 0.4-1 ms from the table, and
storing one in the table is a write and a commit; but the table needs nothing but the database.
Requests asking the same question together wait for one computation: in a process, for its
first request's; on PostgreSQL also across processes, under an advisory lock per question.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from datetime import timedelta
from typing import Any, Protocol

import orjson
from sqlalchemy import delete, func, select, true
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import utcnow
from units_api.db import Database
from units_api.redis_link import RedisLink, Unavailable
from units_api.units.counting import CHANGE_VERSION
from units_api.units.tables import remembered_results

log = logging.getLogger(__name__)

# Part of every question's name: bumped when the rendering of an answer changes, so a server
# never gives an answer that a server of other code stored.
ANSWER_FORMAT = 1
IDENTITY = "identity"  # the row of random bytes naming the database (migration 0009)
KEPT_SECONDS = 24 * 3600  # a shared answer not stored again for this long is dropped
ENTRY_OVERHEAD = 200  # bytes of memory an entry takes besides its answer
_LOCKS = 0x756E6974  # PostgreSQL advisory lock class of computing an answer ("unit")
_VERSION_SQL = "SELECT coalesce(sum(changes), 0) FROM unit_counters"  # CHANGE_VERSION

Answer = tuple[int, bytes]  # (the change version it was read at, its JSON)
# Computes an answer on the connection it is given, the version read in the same statement.
Computing = Callable[[AsyncConnection], Awaitable[Answer]]


def question_key(*parts: Any) -> str:
    """A question's name in every store: a digest of all its answer depends on but the units."""
    return hashlib.sha256(orjson.dumps([ANSWER_FORMAT, *parts])).hexdigest()


async def current_version(db: Database) -> int:
    """The change version now; on PostgreSQL a prepared statement on the fast pool."""
    if db.fast_pool is not None:
        return int(await db.fast_pool.fetchval(_VERSION_SQL))
    async with db.read() as conn:
        return int((await conn.execute(select(CHANGE_VERSION))).scalar_one())


class VersionReader:
    """The change version for requests arriving together: one read serves every request that
    arrived before it began (a read begun earlier might miss a write such a request saw
    committed), so under load one round trip serves many requests."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._next: asyncio.Future[int] | None = None
        self._reading: asyncio.Task[None] | None = None

    async def read(self) -> int:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        future = self._next
        if self._reading is None or self._reading.done():
            self._reading = asyncio.create_task(self._read_while_asked())
        return await asyncio.shield(future)

    async def _read_while_asked(self) -> None:
        while self._next is not None:
            future, self._next = self._next, None
            try:
                future.set_result(await current_version(self._db))
            except Exception as error:  # given to the requests waiting for this read
                future.set_exception(error)
            except BaseException:
                future.cancel()
                raise


class SharedAnswers(Protocol):
    """Where the processes of every server find the answers the others computed."""

    in_database: bool

    async def get(self, conn: AsyncConnection, key: str) -> Answer | None: ...

    async def put(self, conn: AsyncConnection, key: str, answer: Answer) -> None: ...

    async def close(self) -> None: ...


class ResultCache:
    """Answers by question, each for the change version it was read at."""

    def __init__(self, db: Database, budget: int, shared: SharedAnswers) -> None:
        self._db = db
        self._versions = VersionReader(db)
        self._budget = budget  # bytes of memory; 0 turns remembering off
        self._shared = shared
        self._entries: OrderedDict[str, Answer] = OrderedDict()
        self._bytes = 0
        self._pending: dict[str, asyncio.Future[Answer | None]] = {}
        self.hits = 0  # given from this process's memory
        self.waited = 0  # given the computation of a request that asked first
        self.shared = 0  # found among the shared answers
        self.computed = 0

    async def answer(self, key: str, computing: Computing) -> bytes:
        """The answer to a question, read at the current change version or a newer one."""
        if self._budget < 1:
            self.computed += 1
            async with self._db.read() as conn:
                return (await computing(conn))[1]
        version = await self._versions.read()
        found = self._recall(key, version)
        pending = self._pending.get(key)
        if found is None and pending is not None:
            # Requests asking the same question together wait for one computation; if it
            # fails or was read before their version, they compute for themselves.
            answer = await asyncio.shield(pending)
            if answer is not None and answer[0] >= version:
                self.waited += 1
                return answer[1]
        if found is not None:
            self.hits += 1
            return found
        return (await self._lead(key, version, computing))[1]

    @property
    def held(self) -> int:
        """Bytes of memory the remembered answers take, as counted (at most the budget)."""
        return self._bytes

    async def close(self) -> None:
        await self._shared.close()

    def _recall(self, key: str, version: int) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] < version:
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def _keep(self, key: str, answer: Answer) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old[1]) + ENTRY_OVERHEAD
            answer = max(old, answer, key=lambda entry: entry[0])
        size = len(answer[1]) + ENTRY_OVERHEAD
        if size > self._budget:
            return
        self._entries[key] = answer
        self._bytes += size
        while self._bytes > self._budget:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= len(dropped[1]) + ENTRY_OVERHEAD

    async def _lead(self, key: str, version: int, computing: Computing) -> Answer:
        future: asyncio.Future[Answer | None] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        answer = None
        try:
            answer = await self._find_or_compute(key, version, computing)
        finally:
            if self._pending.get(key) is future:
                del self._pending[key]
            future.set_result(answer)
        self._keep(key, answer)
        return answer

    async def _find_or_compute(self, key: str, version: int, computing: Computing) -> Answer:
        async with self._computing(key) as conn:
            found = await self._shared.get(conn, key)
            if found is not None and found[0] >= version:
                self.shared += 1
                return found
            answer = await computing(conn)
            self.computed += 1
            if self._db.dialect == "postgresql" or not self._shared.in_database:
                # Before the lock is let go, so a process waiting for it finds the answer.
                await self._shared.put(conn, key, answer)
                return answer
        async with self._db.transaction() as conn:  # SQLite: the writer's lock only to store
            await self._shared.put(conn, key, answer)
        return answer

    @asynccontextmanager
    async def _computing(self, key: str) -> AsyncIterator[AsyncConnection]:
        """A connection to answer a question on; on PostgreSQL in a transaction holding the
        question's advisory lock, so the processes asking it together compute it once."""
        if self._db.dialect != "postgresql":
            async with self._db.read() as conn:
                yield conn
            return
        async with self._db.transaction() as conn:
            lock_id = int(key[:8], 16) - 2**31
            # A stored answer lost in a crash is only computed again: its commit need not wait
            # for the disk (storing one took 9 ms with that wait, 2 ms without, measured).
            lock = func.pg_advisory_xact_lock(_LOCKS, lock_id)
            await conn.execute(select(lock, func.set_config("synchronous_commit", "off", True)))
            yield conn


# The shared answers: a table of the database, or Redis.


class TableAnswers:
    """The `remembered_results` table, of which this is the only writer."""

    in_database = True

    async def get(self, conn: AsyncConnection, key: str) -> Answer | None:
        table = remembered_results
        query = select(table.c.version, table.c.body).where(table.c.question == key)
        row = (await conn.execute(query)).first()
        return None if row is None else (int(row[0]), bytes(row[1]))

    async def put(self, conn: AsyncConnection, key: str, answer: Answer) -> None:
        """Stores an answer unless one read at a newer version is there already."""
        insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
        statement = insert(remembered_results).values(
            question=key, version=answer[0], body=answer[1], stored_at=utcnow()
        )
        newer = statement.excluded
        await conn.execute(
            statement.on_conflict_do_update(
                index_elements=[remembered_results.c.question],
                set_={"version": newer.version, "body": newer.body, "stored_at": newer.stored_at},
                where=remembered_results.c.version <= newer.version,
            )
        )

    async def close(self) -> None:
        return None


async def prune(db: Database, everything: bool = False) -> int:
    """Drops the stored answers no request can be given any more (read at a version older than
    the current one), and those not stored again for KEPT_SECONDS (`everything`: every one, for
    a benchmark that starts with none); returns how many."""
    table = remembered_results
    old = utcnow() - timedelta(seconds=KEPT_SECONDS)
    dead = (table.c.version < CHANGE_VERSION) | (table.c.stored_at < old)
    async with db.transaction() as conn:
        result = await conn.execute(
            delete(table).where(table.c.question != IDENTITY, true() if everything else dead)
        )
    return int(result.rowcount)


class RedisAnswers:
    """Answers in Redis under the database's identity, each kept KEPT_SECONDS. While Redis is
    lost (`redis_link`) it is passed over: answers are computed and kept in this process."""

    in_database = False

    def __init__(self, redis: RedisLink) -> None:
        self._redis = redis
        self._prefix: str | None = None

    async def get(self, conn: AsyncConnection, key: str) -> Answer | None:
        if not self._redis.up:
            return None
        name = await self._name(conn, key)
        try:
            stored = await self._redis.run(lambda client: client.get(name))
        except Unavailable:
            return None
        if not isinstance(stored, bytes):
            return None
        return int.from_bytes(stored[:8], "big", signed=True), stored[8:]

    async def put(self, conn: AsyncConnection, key: str, answer: Answer) -> None:
        if not self._redis.up:
            return
        name = await self._name(conn, key)
        stored = answer[0].to_bytes(8, "big", signed=True) + answer[1]
        with suppress(Unavailable):
            await self._redis.run(lambda client: client.set(name, stored, ex=KEPT_SECONDS))

    async def close(self) -> None:
        return None

    async def _name(self, conn: AsyncConnection, key: str) -> str:
        """Databases sharing a Redis keep apart: each has its own random identity."""
        if self._prefix is None:
            table = remembered_results
            query = select(table.c.body).where(table.c.question == IDENTITY)
            identity = bytes((await conn.execute(query)).scalar_one())
            self._prefix = f"units-api:answer:{identity.hex()}:"
        return self._prefix + key


def create_result_cache(db: Database, budget: int, redis: RedisLink | None) -> ResultCache:
    shared: SharedAnswers = RedisAnswers(redis) if redis else TableAnswers()
    return ResultCache(db, budget, shared)
