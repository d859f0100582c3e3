"""API keys, stored only as a SHA-256 hash of the secret."""

from __future__ import annotations

from sqlalchemy import Column, String, Table, Text, Uuid

from units_api.db import UTCDateTime, metadata

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("prefix", String(16), nullable=False),
    Column("secret_hash", String(64), nullable=False, unique=True),
    Column("scopes", Text, nullable=False),
    Column("policy", Text),
    Column("rate_limit", String(40)),
    Column("expires_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_used_at", UTCDateTime),
    Column("revoked_at", UTCDateTime),
)
