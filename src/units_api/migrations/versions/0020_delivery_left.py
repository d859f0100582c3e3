"""A webhook delivery says whether it is of the event by which its unit left the webhook's
filter (then its body is that event without the unit: `events/render.render_left`). NULL,
as for every delivery before, is the event whole.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column without a default: no table rewrite on either dialect.
    op.add_column("webhook_deliveries", sa.Column("unit_left", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_column("unit_left")
