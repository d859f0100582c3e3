"""Feed positions in a table of their own, `event_positions` (pos, seq, type), inserted once
by the sequencer: an event row is written once and never rewritten to receive its position
(before, every event row, two to seven kilobytes, was written twice and left a dead tuple).

The positions given so far are copied from `events.pos`. On PostgreSQL nothing takes more
than a share lock on `events`, and writes go on throughout:

1. `event_positions` is created (a new table: no lock on `events`);
2. the positions are copied in batches of BATCH in feed order, each committed on its own
   (`INSERT ... SELECT`: ACCESS SHARE on `events`, which only an ACCESS EXCLUSIVE waits for);
3. the sequencer's watermark, `settled` (every event at or below that `seq` has its position
   or never will), is found as the sequencer finds it: the sequence's last value, once every
   transaction that held `events`' write lock then has ended (waited for at most WAIT
   seconds; else the watermark starts at 0, and the sequencer's first steps read the whole
   table once), lowered below the first event still without a position;
4. in one short transaction holding the `head` row's lock (FOR UPDATE, the lock the
   sequencers of the release before take for each step, so none numbers meanwhile), the
   positions given since step 2 are copied and `settled` is written;
5. the indexes of `events.pos` are dropped CONCURRENTLY (SHARE UPDATE EXCLUSIVE: reads and
   writes go on). They cost every insert, and `ix_events_pending` (the events with no
   position) would hold every event from now on.

`events.pos` itself is left in place, unused (an empty column costs a row nothing): dropping
it takes an ACCESS EXCLUSIVE lock on PostgreSQL (queued behind every transaction on `events`,
and queueing every one after it) and rewrites the whole table on SQLite; kept, it also makes
the downgrade a fill of the positions given since.

Stop every server and worker of the release before, then migrate: one of them reads the feed
and fans it out to webhooks by `events.pos`, and would pass over what the new release numbers
(an event it numbers itself meanwhile is numbered again by the new release, and appears once
in the new feed).

SQLite numbers events as they are written, so every event already has its position: one
INSERT copies them (the database is the process's own, and the indexes go as quickly).

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

BATCH = 50_000
WAIT = 60.0
OLD_INDEXES = ("uq_events_pos", "ix_events_pending", "ix_events_type_pos")

_COPY = sa.text(
    "INSERT INTO event_positions (pos, seq, type) "
    "SELECT pos, seq, type FROM events WHERE pos > :after ORDER BY pos LIMIT :batch"
)
_LAST = sa.text("SELECT coalesce(max(pos), 0) FROM event_positions")
_LAST_SEQ = sa.text(
    "SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('events', 'seq')::regclass), 0)"
)
# As `events/sequencer.py` reads them.
_WRITERS = sa.text(
    "SELECT virtualtransaction FROM pg_locks "
    "WHERE locktype = 'relation' AND mode = 'RowExclusiveLock' "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND relation = 'events'::regclass AND pid <> pg_backend_pid()"
)


def upgrade() -> None:
    conn = op.get_bind()
    op.create_table(
        "event_positions",
        sa.Column("pos", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.String(60), nullable=False),
        sa.PrimaryKeyConstraint("pos", name=op.f("pk_event_positions")),
        sa.UniqueConstraint("seq", name=op.f("uq_event_positions_seq")),
    )
    op.create_index("ix_event_positions_type_pos", "event_positions", ["type", "pos"])
    if conn.dialect.name != "postgresql":
        op.execute(
            "INSERT INTO event_positions (pos, seq, type) "
            "SELECT pos, seq, type FROM events WHERE pos IS NOT NULL"
        )
        for name in OLD_INDEXES:
            op.drop_index(name, table_name="events")
        return
    with op.get_context().autocommit_block():
        after = _copy(conn, 0)
        last_seq = int(conn.execute(_LAST_SEQ).scalar_one())
        if not _ended(conn, set(conn.execute(_WRITERS).scalars())):
            last_seq = 0
    # The migration's own transaction again: the head's lock, until it commits.
    conn.execute(sa.text("SELECT pos FROM feed_positions WHERE name = 'head' FOR UPDATE"))
    _copy(conn, after)
    op.execute(
        sa.text(
            "INSERT INTO feed_positions (name, pos) SELECT 'settled', least(:last, "
            "coalesce((SELECT min(seq) - 1 FROM events WHERE pos IS NULL), :last))"
        ).bindparams(last=last_seq)
    )
    with op.get_context().autocommit_block():
        for name in OLD_INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute("ANALYZE event_positions")


def _copy(conn: sa.Connection, after: int) -> int:
    """Copy the positions given after `after`, a batch at a time; the last one copied."""
    while True:
        conn.execute(_COPY, {"after": after, "batch": BATCH})
        last = int(conn.execute(_LAST).scalar_one())
        if last == after:
            return last
        after = last


def _ended(conn: sa.Connection, writers: set[str]) -> bool:
    """Whether every one of these transactions has ended, waiting at most WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while writers:
        writers &= set(conn.execute(_WRITERS).scalars())
        if not writers:
            break
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def downgrade() -> None:
    """Positions back into `events.pos` (those given since 0027 are written into their event
    rows, every one rewritten), its indexes built again (a plain CREATE INDEX, which holds
    writes off while it runs)."""
    op.execute(
        "UPDATE events SET pos = p.pos FROM event_positions AS p "
        "WHERE p.seq = events.seq AND (events.pos IS NULL OR events.pos <> p.pos)"
    )
    op.create_index("uq_events_pos", "events", ["pos"], unique=True)
    where = sa.text("pos IS NULL")
    op.create_index(
        "ix_events_pending", "events", ["seq"], postgresql_where=where, sqlite_where=where
    )
    op.create_index("ix_events_type_pos", "events", ["type", "pos"])
    op.execute("DELETE FROM feed_positions WHERE name = 'settled'")
    op.drop_table("event_positions")
