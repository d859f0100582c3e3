"""Feed positions, given in commit order, each written once beside its event (the event row is
never written again).

An event is written with the change that makes it, in the writer's transaction. A number
taken at insert time (`seq`) becomes visible only at commit, and transactions commit out of
order, so a reader advancing past the highest number it saw would skip an event that commits
late. Instead, an event gets its feed position (`pos`, a row of `event_positions`) once it is
committed:

- PostgreSQL: one sequencing step at a time (the `head` row's lock, taken by the step's first
  statement, so its later statements' snapshots are taken after the lock is granted) gives
  every committed event that has no position the next ones, in insert order. An event seen by
  the step belongs to a committed transaction, and every transaction that committed before it
  is seen too, so it is numbered in the same step or an earlier one; within a step, insert
  order puts a unit's version after the version before it (whose transaction had committed,
  releasing the row, before the later event was inserted). Positions are given once (`seq`
  is unique among them) and always after the head: a cursor never misses or repeats an event.
- SQLite: its writers take turns, so a writer numbers its own events in its transaction
  (`take_positions`).

Which events have no position is an anti-join of the events after a watermark (`settled`, a
`seq`) with the positions given. Every event at or below it has its position or never will:
the watermark only rises to a `seq` that no transaction still running can hold. A step reads
the sequence's last value, then which transactions hold the events table's write lock (taken
before an insert draws its `seq`, and held until the transaction ends); every `seq` up to that
value belongs to a transaction that had ended or is among them. Once none of them is running
any more, a later step, whose snapshot then sees all they committed, numbers what they wrote
and raises the watermark to that value. Those candidates are kept in the process (`_Candidate`,
lost with it: a watermark that rises later only makes the anti-join longer), so under a stream
of short transactions the anti-join covers about the events of the last step; a transaction
that writes events for long (an atomic import) holds the watermark below its first `seq`
until it ends.

The feed runs a step before it reads, so a write's event is in the feed by the time the
write's response has returned; the event worker runs steps as events are written.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import bindparam, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import Database, driver_connection
from units_api.events.tables import feed_positions

STEP = 10_000
# Candidates a process keeps for the watermark; when full, the newest is replaced.
CANDIDATES = 64

# The events after the watermark without a position. Each is looked up in the positions'
# index (a subquery per event: as an anti-join, the planner, which cannot know how few events
# are past the watermark, hashes every position given).
_UNNUMBERED = """
FROM events e
WHERE e.seq > {settled}
  AND (SELECT 1 FROM event_positions p WHERE p.seq = e.seq) IS NULL
"""
# ruff: noqa: S608 (built once from constants; every value is a parameter)
_PENDING = "SELECT EXISTS (SELECT 1 {})".format(
    _UNNUMBERED.format(settled="(SELECT pos FROM feed_positions WHERE name = 'settled')")
)
# The head row's lock; the watermark (read at most as it was when the lock was granted: a
# lower one only makes the step read more); and the last `seq` drawn (read while or before
# the lock is taken: any value read before the writers below is one they cover). The sequence
# caches no values (CACHE 1, as BIGSERIAL made it): with a cache, its last value would count
# values a session hands out later, to a transaction not among the writers.
_LOCK_HEAD = """
SELECT pos, (SELECT pos FROM feed_positions WHERE name = 'settled'),
       coalesce(pg_sequence_last_value(pg_get_serial_sequence('events', 'seq')::regclass), 0)
FROM feed_positions WHERE name = 'head' FOR UPDATE
"""
# The transactions that may still commit an event: those holding the events table's write
# lock (an INSERT or COPY takes it before its rows draw their `seq`, and keeps it until its
# transaction ends). Readers (the feed, this step) hold a weaker one.
_WRITERS = """
SELECT virtualtransaction FROM pg_locks
WHERE locktype = 'relation' AND mode = 'RowExclusiveLock'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND relation = 'events'::regclass AND pid <> pg_backend_pid()
"""
# $1 the head, $2 the step's size, $3 a `seq` every transaction that could hold one at or
# below it had ended before this statement's snapshot (0: none known), $4 the watermark (a
# value, so the plan is made for the few events past it). The watermark rises to $3 if the
# step numbered everything unnumbered, else to the last `seq` it numbered (every committed
# event below that one was seen, and numbered now or before).
_NUMBER = f"""
WITH t AS (
    SELECT e.seq, e.type, row_number() OVER (ORDER BY e.seq) AS n
    {_UNNUMBERED.format(settled="$4::bigint")}
    ORDER BY e.seq LIMIT $2
), i AS (
    INSERT INTO event_positions (pos, seq, type) SELECT $1 + n, seq, type FROM t RETURNING seq
), h AS (
    UPDATE feed_positions SET pos = $1 + (SELECT count(*) FROM i) WHERE name = 'head'
), s AS (
    UPDATE feed_positions
    SET pos = CASE WHEN (SELECT count(*) FROM i) < $2 THEN $3::bigint
                   ELSE least($3::bigint, (SELECT max(seq) FROM i)) END
    WHERE name = 'settled'
      AND pos < CASE WHEN (SELECT count(*) FROM i) < $2 THEN $3::bigint
                     ELSE least($3::bigint, (SELECT max(seq) FROM i)) END
)
SELECT count(*) FROM i
"""


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A value the watermark may rise to once none of `writers` is running any more."""

    last_seq: int
    writers: frozenset[str]


# Each database's candidates, in this process.
_candidates: weakref.WeakKeyDictionary[Database, list[_Candidate]] = weakref.WeakKeyDictionary()
# Each database's head as this process last left it (the feed's size, for `_planned_now`).
_heads: weakref.WeakKeyDictionary[Database, int] = weakref.WeakKeyDictionary()


async def sequence(db: Database) -> int:
    """Give committed events their feed positions; how many were numbered. A step under way
    elsewhere is waited for (milliseconds): what committed after its snapshot is numbered
    here, so every event committed before the call has its position when it returns."""
    if db.dialect != "postgresql":
        return 0
    numbered = 0
    while True:
        async with db.read() as conn:
            driver = await driver_connection(conn, alone=True)
            if not await _planned_now(driver, _heads.get(db, 0), _PENDING):
                return numbered
        async with db.transaction() as conn:
            driver = await driver_connection(conn)
            head, settled, last_seq = await driver.fetchrow(_LOCK_HEAD)
            writers = frozenset(row[0] for row in await driver.fetch(_WRITERS))
            kept = _candidates.setdefault(db, [])
            candidate = _Candidate(int(last_seq), writers)
            if len(kept) < CANDIDATES:
                kept.append(candidate)
            else:
                kept[-1] = candidate
            ended = [found for found in kept if found.writers.isdisjoint(writers)]
            settle = max((found.last_seq for found in ended), default=0)
            step = int(await _planned_now(driver, head, _NUMBER, head, STEP, settle, settled))
            _heads[db] = head + step
            if step < STEP:
                # The watermark rose to every ended candidate's value (or stays above it).
                kept[:] = [found for found in kept if found not in ended]
        numbered += step
        if step < STEP:
            return numbered


async def _planned_now(driver: asyncpg.Connection, feed: int, statement: str, *args: Any) -> Any:
    """`statement`'s value, by a plan made for the tables at least half as large as they are
    now (`feed`: the head, or the last one seen). A statement kept prepared keeps the plan it
    was given at first: given while the events were few (a new database, or a table not
    analysed since; autovacuum may be off or not have come yet), it scanned every position for
    each event, and 30,000 events written at once then took a minute to number, and every step
    after, numbering nothing, 37 s. Its text is marked with the feed's order of magnitude (the
    head's bit length): each connection prepares it again, for the tables as they are,
    whenever the feed has doubled, and keeps it prepared in between (planning it at every step
    cost a round trip and a plan each time)."""
    return await driver.fetchval(f"{statement}/* feed < 2^{feed.bit_length()} */", *args)


# SQLite's writers take turns (BEGIN IMMEDIATE), so events numbered inside the writer's own
# transaction are numbered in commit order: they take the next feed positions directly.
_ADVANCE_HEAD = (
    update(feed_positions)
    .where(feed_positions.c.name == "head")
    .values(pos=feed_positions.c.pos + bindparam("n"))
    .returning(feed_positions.c.pos)
)
# The writer's last `n` events are the `n` highest: `seq` is SQLite's rowid, one more than the
# highest at each insert.
_GIVE_POSITIONS = text(
    "INSERT INTO event_positions (pos, seq, type) "
    "SELECT :first - 1 + row_number() OVER (ORDER BY seq), seq, type "
    "FROM (SELECT seq, type FROM events ORDER BY seq DESC LIMIT :n) AS written"
)


async def take_positions(conn: AsyncConnection, n: int) -> None:
    """SQLite: the next `n` feed positions, given in the writer's transaction to the `n`
    events it has just written."""
    head: int = (await conn.execute(_ADVANCE_HEAD, {"n": n})).scalar_one()
    await conn.execute(_GIVE_POSITIONS, {"first": head - n + 1, "n": n})
