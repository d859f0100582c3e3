"""Indexes for case-insensitive filters; sharded unit counters for exact totals.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SHARDS = 16


def upgrade() -> None:
    # INCLUDE (city): PostgreSQL answers counts from an expression index alone only when the
    # column under the expression is in it too.
    op.create_index(
        "ix_units_lower_city_price_id",
        "units",
        [sa.text("lower(city)"), "price", "id"],
        postgresql_include=["city"],
    )
    op.create_index("ix_units_lower_type", "units", [sa.text("lower(type)")])
    op.create_index("ix_units_lower_sub_project_id", "units", [sa.text("lower(sub_project_id)")])
    counters = op.create_table(
        "unit_counters",
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("shard", name=op.f("pk_unit_counters")),
    )
    total = op.get_bind().execute(sa.text("SELECT count(*) FROM units")).scalar_one()
    op.bulk_insert(counters, [{"shard": s, "n": total if s == 0 else 0} for s in range(SHARDS)])


def downgrade() -> None:
    op.drop_table("unit_counters")
    op.drop_index("ix_units_lower_sub_project_id", "units")
    op.drop_index("ix_units_lower_type", "units")
    op.drop_index("ix_units_lower_city_price_id", "units")
