"""IndexNow: the `indexnow_state` row (its place in the change feed, held by one process at a
time); and on PostgreSQL a partial index of published units by id, which the sitemaps walk
(SQLite walks its primary key).

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from units_api.db import UTCDateTime

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

PUBLISHED = "publishing_status = 'published'"


def upgrade() -> None:
    table = op.create_table(
        "indexnow_state",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("pos", sa.BigInteger()),
        sa.Column("channels", sa.Text(), nullable=False, server_default="[]"),
        sa.Column("walk_channel", sa.String(100)),
        sa.Column("walked", sa.Uuid()),
        sa.Column("owner", sa.Uuid()),
        sa.Column("lease_until", UTCDateTime()),
    )
    op.bulk_insert(table, [{"id": 1, "channels": "[]"}])
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(
            "ix_units_published_id", "units", ["id"], postgresql_where=sa.text(PUBLISHED)
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_units_published_id", table_name="units")
    op.drop_table("indexnow_state")
