"""Remembered query results: the query endpoint's aggregate answers, one row per question,
each with the change version it was read at (units/remembering.py), shared by every process
on the database.

One more row, `identity`, holds random bytes naming this database: answers shared through
Redis are kept under that name, so databases sharing one Redis never take each other's.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

from units_api.clock import utcnow
from units_api.db import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

IDENTITY = "identity"  # as units/remembering.py names it


def upgrade() -> None:
    table = op.create_table(
        "remembered_results",
        sa.Column("question", sa.String(64), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("stored_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("question", name=op.f("pk_remembered_results")),
    )
    op.bulk_insert(
        table,
        [{"question": IDENTITY, "version": 0, "body": os.urandom(16), "stored_at": utcnow()}],
    )


def downgrade() -> None:
    op.drop_table("remembered_results")
