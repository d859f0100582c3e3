"""Console sessions: a signed-in browser, known by the hash of its cookie, acting as one key."""

from __future__ import annotations

from sqlalchemy import Column, Index, String, Table, Uuid

from units_api.db import UTCDateTime, metadata

console_sessions = Table(
    "console_sessions",
    metadata,
    # SHA-256 of the cookie's random token: the cookie itself is never stored.
    Column("id", String(64), primary_key=True),
    Column("key_id", Uuid, nullable=False),
    # The key's own stored hash (api_keys.secret_hash): the session acts as that key.
    Column("key_hash", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index("ix_console_sessions_expires_at", "expires_at"),
)
