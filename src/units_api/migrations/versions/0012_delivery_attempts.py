"""Every attempt of a webhook delivery: when, the answer's status, time taken, error and the
start of its body. Deleted with their delivery.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from units_api.db import UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_delivery_attempts",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("delivery_id", sa.Uuid(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("attempted_at", UTCDateTime(), nullable=False),
        sa.Column("status_code", sa.Integer()),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("response_body", sa.Text()),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_delivery_attempts")),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["webhook_deliveries.id"],
            name=op.f("fk_webhook_delivery_attempts_delivery_id_webhook_deliveries"),
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "ix_webhook_delivery_attempts_delivery_id_id",
        "webhook_delivery_attempts",
        ["delivery_id", "id"],
    )


def downgrade() -> None:
    op.drop_table("webhook_delivery_attempts")
