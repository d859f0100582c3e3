"""Channels: where units are published to, each of a kind (`channels/readiness.KINDS`)."""

from __future__ import annotations

from sqlalchemy import Column, String, Table, Text

from units_api.db import UTCDateTime, metadata

channels = Table(
    "channels",
    metadata,
    # 1-40 of a-z 0-9 - for a channel made by the API; a name units carried before channels
    # existed (migration 0022) is kept as it was, up to the 100 characters it could have.
    Column("name", String(100), primary_key=True),
    Column("kind", String(20), nullable=False),
    Column("settings", Text, nullable=False),  # a JSON object, by kind
    # A meta-catalog channel's feed token: only its SHA-256 hash, and the first characters.
    Column("token_hash", String(64)),
    Column("token_prefix", String(16)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
