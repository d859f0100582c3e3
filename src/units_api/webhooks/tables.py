"""Webhook subscriptions, their deliveries (one row per event and webhook) and every attempt
of a delivery."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    Uuid,
    text,
)

from units_api.db import UTCDateTime, metadata

webhooks = Table(
    "webhooks",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("url", Text, nullable=False),
    Column("event_types", Text, nullable=False),  # a JSON list, or ["*"]
    Column("description", Text),
    Column("filter", Text),
    # Kept to sign (shown once, never logged); after a rotation the previous one signs too
    # until `previous_secret_until`.
    Column("secret", Text, nullable=False),
    Column("previous_secret", Text),
    Column("previous_secret_until", UTCDateTime),
    Column("enabled", Boolean, nullable=False),
    Column("disabled_reason", Text),
    Column("failing_since", UTCDateTime),
    # Events at feed positions up to this one are not for it (before its creation, or
    # while it was disabled).
    Column("since_pos", BigInteger, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("webhook_id", Uuid, ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False),
    Column("event_id", Uuid, nullable=False),
    Column("event_pos", BigInteger),
    Column("event_type", String(60), nullable=False),
    # True: the event by which its unit left the webhook's filter, sent without the unit.
    Column("unit_left", Boolean),
    Column("status", String(16), nullable=False),  # pending, succeeded, failed
    Column("attempts", Integer, nullable=False),
    # When a worker may take it next: the next attempt, or the end of a worker's claim.
    Column("next_attempt_at", UTCDateTime),
    Column("last_attempt_at", UTCDateTime),
    Column("last_status_code", Integer),
    Column("last_error", Text),
    Column("last_duration_ms", Integer),
    Column("last_response", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_webhook_deliveries_webhook_id_id", "webhook_id", "id"),
    Index(
        "ix_webhook_deliveries_due",
        "next_attempt_at",
        postgresql_where=text("status = 'pending'"),
        sqlite_where=text("status = 'pending'"),
    ),
)

webhook_delivery_attempts = Table(
    "webhook_delivery_attempts",
    metadata,
    Column("id", Uuid, primary_key=True),  # UUIDv7: newest last
    Column(
        "delivery_id",
        Uuid,
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("attempt", Integer, nullable=False),  # 1 for the first
    Column("attempted_at", UTCDateTime, nullable=False),
    Column("status_code", Integer),
    Column("duration_ms", Integer, nullable=False),
    Column("error", Text),
    Column("response_body", Text),  # the first RESPONSE_BYTES of the body, whole characters
    Index("ix_webhook_delivery_attempts_delivery_id_id", "delivery_id", "id"),
)
