"""Stored display names: one row per field and value (the value normalised), the built-in
names (`builtin.py`) being those no row overrides."""

from __future__ import annotations

from sqlalchemy import Column, PrimaryKeyConstraint, String, Table

from units_api.db import UTCDateTime, metadata
from units_api.names.values import MAX_NAME, MAX_VALUE

display_names = Table(
    "display_names",
    metadata,
    Column("field", String(40), nullable=False),
    Column("value", String(MAX_VALUE), nullable=False),
    Column("en", String(MAX_NAME), nullable=False),
    Column("ar", String(MAX_NAME), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("field", "value"),
)
