"""Initial schema: units, history, outbox events, API keys, idempotency records.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from units_api.db import Number, UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _serial() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "units",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("type", sa.String(500), nullable=False),
        sa.Column("location", sa.String(500)),
        sa.Column("city", sa.String(500)),
        sa.Column("sub_project_id", sa.String(500)),
        sa.Column("price_base", sa.String(500)),
        sa.Column("price", Number()),
        sa.Column("surface", Number()),
        sa.Column("guaranty", Number()),
        sa.Column("starting_price", Number()),
        sa.Column("max_price", Number()),
        sa.Column("publishing_status", sa.String(20), nullable=False),
        sa.Column("published_at", UTCDateTime()),
        sa.Column("scheduled_at", UTCDateTime()),
        sa.Column("availability_status", sa.String(20), nullable=False),
        sa.Column("reserved_until", UTCDateTime()),
        sa.Column("doc", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_units")),
    )
    for name, columns in (
        ("ix_units_created_at_id", ["created_at", "id"]),
        ("ix_units_updated_at_id", ["updated_at", "id"]),
        ("ix_units_city_price", ["city", "price"]),
        ("ix_units_price_id", ["price", "id"]),
        ("ix_units_sub_project_id", ["sub_project_id"]),
        ("ix_units_type", ["type"]),
        ("ix_units_publishing_status", ["publishing_status"]),
        ("ix_units_availability_status", ["availability_status"]),
        ("ix_units_scheduled_at", ["scheduled_at"]),
        ("ix_units_reserved_until", ["reserved_until"]),
    ):
        op.create_index(name, "units", columns)

    op.create_table(
        "unit_history",
        sa.Column("id", _serial(), autoincrement=True, nullable=False),
        sa.Column("unit_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("changes", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_unit_history")),
    )
    op.create_index("ix_unit_history_unit_id_id", "unit_history", ["unit_id", "id"])

    op.create_table(
        "events",
        sa.Column("seq", _serial(), autoincrement=True, nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(60), nullable=False),
        sa.Column("occurred_at", UTCDateTime(), nullable=False),
        sa.Column("unit_id", sa.Uuid()),
        sa.Column("version", sa.Integer()),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_events")),
        sa.UniqueConstraint("id", name=op.f("uq_events_id")),
    )
    op.create_index("ix_events_type_seq", "events", ["type", "seq"])

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("policy", sa.Text()),
        sa.Column("rate_limit", sa.String(40)),
        sa.Column("expires_at", UTCDateTime()),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_used_at", UTCDateTime()),
        sa.Column("revoked_at", UTCDateTime()),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("secret_hash", name=op.f("uq_api_keys_secret_hash")),
    )

    op.create_table(
        "idempotency_keys",
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("status_code", sa.Integer()),
        sa.Column("headers", sa.Text()),
        sa.Column("body", sa.LargeBinary()),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("api_keys")
    op.drop_table("events")
    op.drop_table("unit_history")
    op.drop_table("units")
