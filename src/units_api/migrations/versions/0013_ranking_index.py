"""The search table's ranking words indexed (PostgreSQL, GIN): a search by relevance finds the
few units of a tier (search.rank.relevance_tiers) without reading every match.

Built CONCURRENTLY, so writes go on meanwhile; an index left invalid by an interrupted build
is dropped and built again. SQLite has nothing to do.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        op.execute(
            "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c "
            "ON c.oid = i.indexrelid WHERE c.relname = 'ix_unit_search_ranking' "
            "AND NOT i.indisvalid) THEN DROP INDEX ix_unit_search_ranking; END IF; END $$"
        )
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_unit_search_ranking "
            "ON unit_search USING gin (ranking)"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_unit_search_ranking")
