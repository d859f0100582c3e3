"""A deleted unit's event, found by the unit's id: a partial index of the `unit.deleted`
events, so a public page asked for a deleted unit answers 410 (it was live) or 404 (it never
was) with one indexed lookup. Small: one entry per deleted unit still in the feed.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    where = sa.text("type = 'unit.deleted'")
    op.create_index(
        "ix_events_deleted_unit",
        "events",
        ["unit_id"],
        postgresql_where=where,
        sqlite_where=where,
    )


def downgrade() -> None:
    op.drop_index("ix_events_deleted_unit", table_name="events")
