"""The outbox: one row per change, written in the transaction that makes the change."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, String, Table, Text, Uuid

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
    Index("ix_events_type_seq", "type", "seq"),
)
