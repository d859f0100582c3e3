"""Durable jobs: one row per export or import, claimed by a worker under a lease.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from units_api.db import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("owner_key_id", sa.Uuid()),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("row_count", sa.BigInteger()),
        sa.Column("bytes", sa.BigInteger()),
        sa.Column("error", sa.Text()),
        sa.Column("result", sa.Text()),
        sa.Column("checkpoint", sa.Text()),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("run_after", UTCDateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(80)),
        sa.Column("lease_until", UTCDateTime()),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime()),
        sa.Column("finished_at", UTCDateTime()),
        sa.Column("expires_at", UTCDateTime()),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index("ix_jobs_status_run_after", "jobs", ["status", "run_after"])
    op.create_index("ix_jobs_kind_id", "jobs", ["kind", "id"])


def downgrade() -> None:
    op.drop_table("jobs")
