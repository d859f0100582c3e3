"""The change feed's positions, and webhooks with their deliveries.

`events.pos` is an event's place in the feed, given once its transaction has committed (see
`events/sequencer.py`); events written so far keep their insert order. `feed_positions` holds
the feed's named marks: `head` (the last position given), `pruned` (positions up to it are
gone) and `webhooks` (the last position fanned out to webhooks).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from units_api.db import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("pos", sa.BigInteger()))
    op.execute("UPDATE events SET pos = seq")
    op.create_index("uq_events_pos", "events", ["pos"], unique=True)
    op.create_index(
        "ix_events_pending",
        "events",
        ["seq"],
        postgresql_where=sa.text("pos IS NULL"),
        sqlite_where=sa.text("pos IS NULL"),
    )
    op.drop_index("ix_events_type_seq", "events")
    op.create_index("ix_events_type_pos", "events", ["type", "pos"])
    if op.get_bind().dialect.name == "postgresql":
        # An event's data (a unit of a few kilobytes, compressed to about two) stays in its
        # row rather than in the TOAST table: one write and one read fewer per event (a
        # page of 1,000 events was read in half the time).
        op.execute("ALTER TABLE events ALTER COLUMN data SET STORAGE MAIN")

    op.create_table(
        "feed_positions",
        sa.Column("name", sa.String(40), nullable=False),
        sa.Column("pos", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_feed_positions")),
    )
    # Webhooks start at the head: what happened before them is not delivered.
    op.execute(
        "INSERT INTO feed_positions (name, pos) "
        "SELECT 'head', coalesce(max(pos), 0) FROM events UNION ALL "
        "SELECT 'webhooks', coalesce(max(pos), 0) FROM events UNION ALL "
        "SELECT 'pruned', 0"
    )

    op.create_table(
        "webhooks",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("event_types", sa.Text(), nullable=False),
        sa.Column("description", sa.Text()),
        sa.Column("filter", sa.Text()),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("previous_secret", sa.Text()),
        sa.Column("previous_secret_until", UTCDateTime()),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text()),
        sa.Column("failing_since", UTCDateTime()),
        sa.Column("since_pos", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("webhook_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("event_pos", sa.BigInteger()),
        sa.Column("event_type", sa.String(60), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime()),
        sa.Column("last_attempt_at", UTCDateTime()),
        sa.Column("last_status_code", sa.Integer()),
        sa.Column("last_error", sa.Text()),
        sa.Column("last_duration_ms", sa.Integer()),
        sa.Column("last_response", sa.Text()),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.ForeignKeyConstraint(
            ["webhook_id"],
            ["webhooks.id"],
            name=op.f("fk_webhook_deliveries_webhook_id_webhooks"),
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_webhook_deliveries_webhook_id_id", "webhook_deliveries", ["webhook_id", "id"]
    )
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE events ALTER COLUMN data SET STORAGE EXTENDED")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
    op.drop_table("feed_positions")
    op.drop_index("ix_events_type_pos", "events")
    op.create_index("ix_events_type_seq", "events", ["type", "seq"])
    op.drop_index("ix_events_pending", "events")
    op.drop_index("uq_events_pos", "events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("pos")
