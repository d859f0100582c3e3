"""Single writes gathered: creates, and the updates of PUT and PATCH.

A unit's write is one statement (`changes.write_rows`), committed alone. On PostgreSQL most
of its cost is not the rows but the statement and its commit: creates one by one took 838 us
of the database's CPU a unit; eight units in one statement, 350 us each; thirty-two, 231
(bench/README.md). So the writes that arrive while others are being written wait for them,
then go together: their rows are one batch (`changes.Rows`), written by the array form of the
same statement, in one commit. Nothing waits on purpose: a write that finds a lane free is
written at once, alone.

Each write keeps its own outcome. Its unit is validated, judged by its key's policy and made
into rows before it waits, so what can fail alone fails before. A batch of creates is one
statement, atomic; a batch of updates runs in a transaction, as an update that finds its unit
moved on since it was read (`changes.Moved`) ends the statement with the others written. A
batch that fails so wrote nothing and is written again one write at a time, so each learns its
own outcome (a moved unit is read again by its request), unless the database could not be
reached, when the outcome is the same for all. A write is answered only once its batch
committed.

On SQLite a batch is one turn of the writer (`writer.py`): one savepoint in its shared
transaction, and one statement per table for all its units (`changes._write_sqlite`) where
each unit alone would run its own. As the turn holds the database, a batch of updates first
looks up which would move nothing (`changes.moved_sqlite`: the unit moved on since it was
read, or updated by an earlier write of the batch): those are left out, and told `Moved` once
the others are written together and committed. A batch that fails is rolled back to its
savepoint, then written again one write at a time, as above. An update's read is made on the
loop's thread there (`inline_reads.py`): on a pooled connection, through the driver's
thread, it cost a gathered PATCH more than gathering saved.

Only writes of one kind and one actor go together (the statement writes one actor), and none
with a trace context (each keeps its own). A write with an Idempotency-Key stores its answer
in its own transaction and is not gathered.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass, field

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import Database
from units_api.replicas import unreachable
from units_api.units.changes import Moved, Rows, moved_sqlite, write_rows

# Creates written in one statement at most (the array form's cost per unit stops falling
# well before; `changes.COPY_FROM` is where COPY would take over).
MOST = 64
# Batches written at once: while one commits, the next is written.
LANES = 2


@dataclass(slots=True)
class _Waiting:
    rows: Rows
    group: tuple[str, str]  # (kind, actor): what may be written together
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Gatherer:
    """This process's single writes, written together when they arrive together."""

    def __init__(self, db: Database, most: int = MOST, lanes: int = LANES) -> None:
        self._db = db
        self._most = most
        self._lanes = lanes
        self._waiting: list[_Waiting] = []
        # Writers still writing: counted down by a writer as it finds nothing left, in the
        # same step (a task's own end is told later, after what runs meanwhile).
        self._running = 0
        self._writers: set[asyncio.Task[None]] = set()  # held, so none is collected

    async def write(self, rows: Rows) -> None:
        """Write one unit's insert or update (a batch of one, `changes.prepare`); returns once
        it is committed, or raises what writing it alone would have raised (Moved included)."""
        waiting = _Waiting(rows, (rows.kind, rows.history[0]["actor"]))
        self._waiting.append(waiting)
        if self._running < self._lanes:
            self._running += 1
            # Its own context: the first create's request id is no one else's.
            writer = asyncio.get_running_loop().create_task(
                self._write_waiting(), context=contextvars.Context()
            )
            self._writers.add(writer)
            writer.add_done_callback(self._writers.discard)
        await waiting.done

    async def _write_waiting(self) -> None:
        try:
            while self._waiting:
                batch = self._take()
                try:
                    await self._write(batch)
                except BaseException as error:
                    _tell(batch, error)
                    if isinstance(error, asyncio.CancelledError):
                        raise
                else:
                    _tell(batch, None)
        finally:
            self._running -= 1

    def _take(self) -> list[_Waiting]:
        """The first waiting write and those after it of its kind and actor, `most` at most."""
        group = self._waiting[0].group
        batch: list[_Waiting] = []
        kept: list[_Waiting] = []
        for waiting in self._waiting:
            if waiting.group == group and len(batch) < self._most:
                batch.append(waiting)
            else:
                kept.append(waiting)
        self._waiting = kept
        return batch

    async def _write(self, batch: list[_Waiting]) -> None:
        # A write whose client left while it waited is not made, as it would not have been
        # alone.
        batch = [waiting for waiting in batch if not waiting.done.cancelled()]
        if not batch:
            return
        moved: list[_Waiting] = []
        try:
            await self._write_batch(batch, moved)
        finally:
            # Told once the others are committed (or failed): a request told sooner would
            # read its unit again before the write that moved it was committed, and find it
            # moved once more.
            for waiting in moved:
                _tell([waiting], Moved())

    async def _write_batch(self, batch: list[_Waiting], moved: list[_Waiting]) -> None:
        """`batch` written together, or each alone if the database refused it; on SQLite the
        updates that would move nothing are left out, into `moved`."""
        joined = _joined([waiting.rows for waiting in batch])
        try:
            async with self._db.operation() as conn:
                if (
                    isinstance(conn, AsyncConnection)
                    and conn.dialect.name == "sqlite"
                    and joined.kind == "update"
                    and len(batch) > 1
                ):
                    # The updates that would move nothing are left out (SQLite's write
                    # transaction holds the database: nothing else moves a unit meanwhile), and
                    # the others written together, rather than the batch rolled back and each
                    # written alone.
                    places = set(await moved_sqlite(conn, [w.rows for w in batch]))
                    moved += [w for place, w in enumerate(batch) if place in places]
                    batch = [w for place, w in enumerate(batch) if place not in places]
                    if not batch:
                        return
                    joined = _joined([waiting.rows for waiting in batch])
                # Alone (no BEGIN, no COMMIT): one unit, or inserts, which cannot move.
                await write_rows(conn, joined, last=len(batch) == 1 or joined.kind == "insert")
        except (asyncpg.PostgresError, IntegrityError, Moved) as error:
            # The database refused the statement (PostgreSQL, or a constraint on SQLite), or
            # a unit had moved (anything else, e.g. the database out of reach or too slow,
            # would be the same for each: everyone's).
            if len(batch) == 1 or unreachable(error):
                raise
        else:
            return
        # The batch wrote nothing: each write alone, with its own outcome.
        for waiting in batch:
            try:
                async with self._db.operation() as conn:
                    await write_rows(conn, waiting.rows, last=True)
            except Exception as error:
                _tell([waiting], error)
            else:
                _tell([waiting], None)


def _tell(batch: list[_Waiting], error: BaseException | None) -> None:
    for waiting in batch:
        if waiting.done.done():
            continue
        if error is None:
            waiting.done.set_result(None)
        else:
            waiting.done.set_exception(error)


def _joined(parts: list[Rows]) -> Rows:
    """One batch made of several of one kind."""
    if len(parts) == 1:
        return parts[0]
    joined = Rows(parts[0].kind, [], [], [], [], [])
    for rows in parts:
        joined.units.extend(rows.units)
        joined.history.extend(rows.history)
        joined.events.extend(rows.events)
        joined.words.extend(rows.words)
        joined.columns.extend(rows.columns)
    return joined
