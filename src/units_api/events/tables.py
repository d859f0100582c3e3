"""The outbox: one row per change, written in the transaction that makes the change, and the
feed's named positions."""

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
    # The event's place in the feed: NULL until its transaction has committed and the
    # sequencer has numbered it (SQLite numbers in the writer's own transaction).
    Column("pos", BigInteger),
    # The W3C traceparent of the request or job that wrote the event, when traces are on
    # (`tracing.py`): a webhook delivery's span links to it.
    Column("trace_context", Text),
    Index("uq_events_pos", "pos", unique=True),
    Index(
        "ix_events_pending",
        "seq",
        postgresql_where=text("pos IS NULL"),
        sqlite_where=text("pos IS NULL"),
    ),
    Index("ix_events_type_pos", "type", "pos"),
    # A deleted unit's last event, by its id (a public page that was live answers 410): 0024.
    Index(
        "ix_events_deleted_unit",
        "unit_id",
        postgresql_where=text("type = 'unit.deleted'"),
        sqlite_where=text("type = 'unit.deleted'"),
    ),
)

# head: the last position given; pruned: positions up to it are gone; webhooks: the last
# position fanned out to webhooks.
feed_positions = Table(
    "feed_positions",
    metadata,
    Column("name", String(40), primary_key=True),
    Column("pos", BigInteger, nullable=False),
)
