"""Display names in English and Arabic for the values of a unit's text fields (`type`,
`city`, ...): one row per field and normalised value. A new, empty table: the built-in names
are in the code (`names/builtin.py`) and need no row.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from units_api.db import UTCDateTime

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "display_names",
        sa.Column("field", sa.String(40), nullable=False),
        sa.Column("value", sa.String(500), nullable=False),
        sa.Column("en", sa.String(100), nullable=False),
        sa.Column("ar", sa.String(100), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("field", "value", name=op.f("pk_display_names")),
    )


def downgrade() -> None:
    op.drop_table("display_names")
