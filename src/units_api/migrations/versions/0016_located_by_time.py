"""Map search pages in creation order read from an index ordered by time (PostgreSQL): the
points with their creation time, in one GiST index (`btree_gist` indexes the time), so a page
of a map search sorted by `createdAt` is a walk nearest-first to a time far in the future (or
past) instead of a sort of every point in the shape's box (units.repository.located_page_query).
The included columns let both of its steps read the index alone (a polygon's exact test reads
`lng` and `lat`; the page's ties are ordered by `id`): without them PostgreSQL reads the
second step from migration 0010's index, every point in the box again.

`btree_gist` ships with PostgreSQL (contrib) and is trusted: a role that may create objects in
the database (its owner) may create it. Where it is not available, or may not be created,
there is no index and map search reads as before. The index is built CONCURRENTLY, so writes
go on meanwhile; one left invalid by an interrupted build is dropped and built again. SQLite
has nothing to do. The downgrade drops the index and leaves the extension, which other
objects may use.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

INDEX = "ix_units_location_created_at"
_INSUFFICIENT_PRIVILEGE = "42501"
_AVAILABLE = "SELECT installed_version FROM pg_available_extensions WHERE name = 'btree_gist'"


def _btree_gist(conn: sa.Connection) -> bool:
    """Whether `btree_gist` is installed, creating it when it is available and allowed."""
    available = conn.execute(sa.text(_AVAILABLE)).first()
    if available is None:
        return False
    if available[0] is not None:
        return True
    try:
        conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS btree_gist"))
    except sa.exc.DBAPIError as error:
        code = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
        if code != _INSUFFICIENT_PRIVILEGE:
            raise
        return False
    return True


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        if not _btree_gist(op.get_bind()):
            return
        op.execute(
            "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c "
            "ON c.oid = i.indexrelid WHERE c.relname = 'ix_units_location_created_at' "
            "AND NOT i.indisvalid) THEN DROP INDEX ix_units_location_created_at; END IF; END $$"
        )
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON units "
            "USING gist (point(lng, lat), created_at) INCLUDE (lng, lat, id) WHERE lng IS NOT NULL"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
