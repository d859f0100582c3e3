"""An event keeps the trace context (W3C traceparent) of the request or job that wrote it,
when traces are on: a webhook delivery's span links to it. NULL otherwise.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column without a default: no table rewrite on either dialect.
    op.add_column("events", sa.Column("trace_context", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_column("trace_context")
