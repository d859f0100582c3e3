"""Units by price, highest first (PostgreSQL): the list's `sortBy=price` (descending by
default) puts units without a price last, an order `ix_units_price_id` read backwards does
not give (it puts them first), so at a million units PostgreSQL sorted every unit for each
page (0.7 s). This index holds that order.

Built CONCURRENTLY, so writes go on meanwhile; an index left invalid by an interrupted build
is dropped and built again. SQLite reads `ix_units_price_id` backwards: its NULLs sort lowest,
so descending already puts them last.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        op.execute(
            "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c "
            "ON c.oid = i.indexrelid WHERE c.relname = 'ix_units_price_desc_id' "
            "AND NOT i.indisvalid) THEN DROP INDEX ix_units_price_desc_id; END IF; END $$"
        )
        op.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_units_price_desc_id "
            "ON units (price DESC NULLS LAST, id DESC)"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_units_price_desc_id")
