"""PostgreSQL: the search table keeps each unit's creation time, indexed.

The commonest search, every matching unit newest first, then walks this table alone in
creation order and checks each row's words, instead of probing it once per unit; the
page's records are fetched for the matches only. The table is rebuilt in creation order
(one pass, faster than updating a million rows and their GIN entries). SQLite's FTS5 table
is unchanged.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE TABLE unit_search_next ("
        " unit_id uuid NOT NULL,"
        " created_at timestamp with time zone NOT NULL,"
        " vector tsvector NOT NULL)"
    )
    op.execute(
        "INSERT INTO unit_search_next (unit_id, created_at, vector) "
        "SELECT s.unit_id, u.created_at, s.vector FROM unit_search s "
        "JOIN units u ON u.id = s.unit_id ORDER BY u.created_at, u.id"
    )
    op.execute("DROP TABLE unit_search")
    op.execute("ALTER TABLE unit_search_next RENAME TO unit_search")
    op.execute(
        "ALTER TABLE unit_search ADD CONSTRAINT unit_search_pkey PRIMARY KEY (unit_id), "
        "ADD CONSTRAINT unit_search_unit_id_fkey FOREIGN KEY (unit_id) "
        "REFERENCES units (id) ON DELETE CASCADE"
    )
    op.execute("CREATE INDEX ix_unit_search_vector ON unit_search USING gin (vector)")
    op.execute("CREATE INDEX ix_unit_search_created_at ON unit_search (created_at, unit_id)")
    op.execute("ANALYZE unit_search")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX ix_unit_search_created_at")
    op.execute("ALTER TABLE unit_search DROP COLUMN created_at")
