"""Channels: the `channels` table, with `website` (kind `website`) and a `label` channel of
every other name units are already published or scheduled to, so every name a unit carries
is a channel and nothing a unit says changes.

A name from before is kept exactly as it was written (even one the API would not take for a
new channel, such as `Website `), so it can still be read, and deleted to take it off its
units. Finding the names reads every unit's record once, on PostgreSQL in one statement (at
1,000,000 units, a few seconds).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from units_api.db import UTCDateTime

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_NAMES = {
    "postgresql": "SELECT DISTINCT jsonb_array_elements_text(doc::jsonb -> 'publishing' "
    "-> 'channels') FROM units",
    "sqlite": "SELECT DISTINCT j.value FROM units, json_each(units.doc, '$.publishing.channels') j",
}


def upgrade() -> None:
    table = op.create_table(
        "channels",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.String(64)),
        sa.Column("token_prefix", sa.String(16)),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    conn = op.get_bind()
    used = {row[0] for row in conn.execute(sa.text(_NAMES[conn.dialect.name]))}
    now = datetime.now(UTC)
    rows = [{"name": "website", "kind": "website"}]
    rows += [{"name": name, "kind": "label"} for name in sorted(used - {"website"}) if name]
    op.bulk_insert(
        table,
        [{**row, "settings": "{}", "created_at": now, "updated_at": now} for row in rows],
    )


def downgrade() -> None:
    op.drop_table("channels")
