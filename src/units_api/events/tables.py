"""The outbox: one row per change, written in the transaction that makes the change, once;
the feed's positions of events, each given once, in a table of its own; and the feed's named
positions."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, String, Table, Text, Uuid, text

from units_api.db import UTCDateTime, metadata

events = Table(
    "events",
    metadata,
    Column(
        "seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("id", Uuid, nullable=False, unique=True),
    Column("type", String(60), nullable=False),
    Column("occurred_at", UTCDateTime, nullable=False),
    Column("unit_id", Uuid),
    Column("version", Integer),
    Column("actor", Text, nullable=False),
    Column("data", Text, nullable=False),
    # Unused since 0027 (an event's place in the feed is in `event_positions`), and left in
    # place rather than dropped (see the migration): events written before 0027 keep theirs,
    # which 0027's downgrade completes. Nothing else reads or writes it.
    Column("pos", BigInteger),
    # The W3C traceparent of the request or job that wrote the event, when traces are on
    # (`tracing.py`): a webhook delivery's span links to it.
    Column("trace_context", Text),
    # A deleted unit's last event, by its id (a public page that was live answers 410): 0024.
    Index(
        "ix_events_deleted_unit",
        "unit_id",
        postgresql_where=text("type = 'unit.deleted'"),
        sqlite_where=text("type = 'unit.deleted'"),
    ),
)

# An event's place in the feed (`pos`), given once its transaction has committed (PostgreSQL:
# the sequencer's steps; SQLite: in the writer's own transaction), and never changed: the
# event row is written once. Its type is kept beside it, so a page of a few types is read
# through an index in feed order. Pruned with its event.
event_positions = Table(
    "event_positions",
    metadata,
    Column(
        "pos",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("seq", BigInteger, nullable=False, unique=True),
    Column("type", String(60), nullable=False),
    Index("ix_event_positions_type_pos", "type", "pos"),
)

# head: the last position given; pruned: positions up to it are gone; webhooks: the last
# position fanned out to webhooks; settled (PostgreSQL, a `seq`, not a position): every event
# up to it has its position or never will (the sequencer's watermark).
feed_positions = Table(
    "feed_positions",
    metadata,
    Column("name", String(40), primary_key=True),
    Column("pos", BigInteger, nullable=False),
)
