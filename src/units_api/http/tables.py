"""Idempotency records: the first response to a key, replayed for 24 hours."""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from units_api.db import UTCDateTime, metadata

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("owner", String(64), nullable=False),
    Column("key", String(255), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("state", String(12), nullable=False),
    Column("status_code", Integer),
    Column("headers", Text),
    Column("body", LargeBinary),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("owner", "key"),
    Index("ix_idempotency_keys_created_at", "created_at"),
)
