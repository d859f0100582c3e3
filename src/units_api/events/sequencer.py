"""Feed positions, given in commit order.

An event is written with the change that makes it, in the writer's transaction. A number
taken at insert time (`seq`) becomes visible only at commit, and transactions commit out of
order, so a reader advancing past the highest number it saw would skip an event that commits
late. Instead, an event gets its feed position (`pos`) once it is committed:

- PostgreSQL: one sequencing step at a time (the `head` row's lock, taken by the step's first
  statement, so its second statement's snapshot is taken after the lock is granted) gives
  every committed event that has no position the next ones, in insert order. An event seen by
  the step belongs to a committed transaction, and every transaction that committed before it
  is seen too, so it is numbered in the same step or an earlier one; within a step, insert
  order puts a unit's version after the version before it (whose transaction had committed,
  releasing the row, before the later event was inserted). Positions are given once and
  always after the head: a cursor never misses or repeats an event.
- SQLite: its writers take turns, so a writer numbers its own events in its transaction
  (`take_positions`).

The feed runs a step before it reads, so a write's event is in the feed by the time the
write's response has returned; the event worker runs steps as events are written.
"""

from __future__ import annotations

from sqlalchemy import bindparam, update
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import Database, driver_connection
from units_api.events.tables import feed_positions

STEP = 10_000

_PENDING = "SELECT EXISTS (SELECT 1 FROM events WHERE pos IS NULL)"
_LOCK_HEAD = "SELECT pos FROM feed_positions WHERE name = 'head' FOR UPDATE"
_NUMBER = """
WITH t AS (
    SELECT seq, row_number() OVER (ORDER BY seq) AS n
    FROM events WHERE pos IS NULL ORDER BY seq LIMIT $2
), e AS (
    UPDATE events SET pos = $1 + t.n FROM t WHERE events.seq = t.seq RETURNING 1
), h AS (
    UPDATE feed_positions SET pos = $1 + (SELECT count(*) FROM e) WHERE name = 'head'
)
SELECT count(*) FROM e
"""


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
            if not await driver.fetchval(_PENDING):
                return numbered
        async with db.transaction() as conn:
            driver = await driver_connection(conn)
            head = await driver.fetchval(_LOCK_HEAD)
            step = int(await driver.fetchval(_NUMBER, head, STEP))
        numbered += step
        if step < STEP:
            return numbered


# SQLite's writers take turns (BEGIN IMMEDIATE), so events numbered inside the writer's own
# transaction are numbered in commit order: they take the next feed positions directly.
_ADVANCE_HEAD = (
    update(feed_positions)
    .where(feed_positions.c.name == "head")
    .values(pos=feed_positions.c.pos + bindparam("n"))
    .returning(feed_positions.c.pos)
)


async def take_positions(conn: AsyncConnection, n: int) -> int:
    """SQLite: the first of the next `n` feed positions, taken in the writer's transaction."""
    head: int = (await conn.execute(_ADVANCE_HEAD, {"n": n})).scalar_one()
    return head - n + 1
