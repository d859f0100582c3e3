"""What a channel's rules read of a unit, in columns of its own: the channels it is published
or scheduled to (`channels`, its `publishing.channels` as a JSON array), and whether its
`unitImageUrl`, `gallery`, `unitDesc` and `unitShortDesc` are set (`has_...`). Before, every
public page, sitemap and feed read these from each candidate's record, which PostgreSQL
parses as JSON for every row.

The columns are added with constant defaults (an empty array, false), so adding them rewrites
no row; they are then filled from the records in batches of BATCH units, each committed on
its own on PostgreSQL (no lock is held for long and writes go on meanwhile; a unit written
meanwhile by the new code gets the same values). An interrupted run is simply run again.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

BATCH = 5000
PRESENT = ("has_unit_image_url", "has_gallery", "has_unit_desc", "has_unit_short_desc")

_units = sa.table("units", sa.column("id", sa.Uuid()))

# One batch's values, from the record read once per row (`j`, the document as JSONB).
_PG_FILL = """
UPDATE units SET
  channels = CASE WHEN jsonb_typeof(j -> 'publishing' -> 'channels') = 'array'
                  THEN (j -> 'publishing' -> 'channels')::text ELSE '[]' END,
  has_unit_image_url = (j ->> 'unitImageUrl') IS NOT NULL,
  has_gallery = CASE WHEN jsonb_typeof(j -> 'gallery') = 'array'
                     THEN EXISTS (SELECT 1 FROM jsonb_array_elements(j -> 'gallery') AS item
                                  WHERE item <> 'null'::jsonb)
                     ELSE false END,
  has_unit_desc = (j ->> 'unitDesc') IS NOT NULL,
  has_unit_short_desc = (j ->> 'unitShortDesc') IS NOT NULL
FROM (SELECT id, doc::jsonb AS j FROM units WHERE id BETWEEN :first AND :last) AS stored
WHERE units.id = stored.id
"""
_SQLITE_FILL = """
UPDATE units SET
  channels = CASE WHEN json_type(doc, '$.publishing.channels') = 'array'
                  THEN json_extract(doc, '$.publishing.channels') ELSE '[]' END,
  has_unit_image_url = json_extract(doc, '$.unitImageUrl') IS NOT NULL,
  has_gallery = CASE WHEN json_type(doc, '$.gallery') = 'array'
                     THEN EXISTS (SELECT 1 FROM json_each(doc, '$.gallery')
                                  WHERE type <> 'null')
                     ELSE 0 END,
  has_unit_desc = json_extract(doc, '$.unitDesc') IS NOT NULL,
  has_unit_short_desc = json_extract(doc, '$.unitShortDesc') IS NOT NULL
WHERE id BETWEEN :first AND :last
"""


def _fill(conn: sa.Connection, statement: str) -> None:
    last = None
    while True:
        query = sa.select(_units.c.id).order_by(_units.c.id).limit(BATCH)
        if last is not None:
            query = query.where(_units.c.id > last)
        ids = conn.execute(query).scalars().all()
        if not ids:
            return
        # The ids are bound as the table stores them (SQLite: 32 hex digits).
        bounds = sa.text(statement).bindparams(
            sa.bindparam("first", ids[0], sa.Uuid()), sa.bindparam("last", ids[-1], sa.Uuid())
        )
        conn.execute(bounds)
        last = ids[-1]


def upgrade() -> None:
    conn = op.get_bind()
    postgresql = conn.dialect.name == "postgresql"
    false = "false" if postgresql else "0"
    exists = "IF NOT EXISTS " if postgresql else ""
    op.execute(f"ALTER TABLE units ADD COLUMN {exists}channels text NOT NULL DEFAULT '[]'")
    for name in PRESENT:
        op.execute(f"ALTER TABLE units ADD COLUMN {exists}{name} boolean NOT NULL DEFAULT {false}")
    if not postgresql:
        _fill(conn, _SQLITE_FILL)
        return
    with op.get_context().autocommit_block():
        _fill(conn, _PG_FILL)
        # Every row was written again: the visibility map and the planner's statistics.
        op.execute("VACUUM (ANALYZE) units")


def downgrade() -> None:
    for name in ("channels", *PRESENT):
        op.execute(f"ALTER TABLE units DROP COLUMN {name}")
