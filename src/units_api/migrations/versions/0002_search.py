"""Search index: SQLite FTS5 table, PostgreSQL tsvector table with a GIN index.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import json
import uuid

import sqlalchemy as sa
from alembic import op

from units_api.search.normalize import record_tokens

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BATCH = 2000


def _backfill(conn: sa.Connection, postgres: bool) -> None:
    last = None
    while True:
        query = "SELECT id, doc FROM units"
        if last is not None:
            query += " WHERE id > :last"
        rows = conn.execute(
            sa.text(query + " ORDER BY id LIMIT :n"), {"last": last, "n": BATCH}
        ).all()
        if not rows:
            return
        for unit_id, doc in rows:
            words = record_tokens(json.loads(doc))
            if postgres:
                conn.execute(
                    sa.text(
                        "INSERT INTO unit_search (unit_id, vector) "
                        "VALUES (:id, array_to_tsvector(CAST(:w AS text[])))"
                    ),
                    {"id": unit_id, "w": words},
                )
            else:
                key = uuid.UUID(hex=str(unit_id))
                conn.execute(
                    sa.text(
                        "INSERT INTO unit_search (rowid, unit_id, body) VALUES (:r, :id, :body)"
                    ),
                    {
                        "r": int.from_bytes(key.bytes[8:], "big", signed=True),
                        "id": key.hex,
                        "body": " ".join(words),
                    },
                )
        last = rows[-1][0]


def upgrade() -> None:
    conn = op.get_bind()
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        op.execute(
            "CREATE TABLE unit_search ("
            " unit_id uuid PRIMARY KEY REFERENCES units (id) ON DELETE CASCADE,"
            " vector tsvector NOT NULL)"
        )
        op.execute("CREATE INDEX ix_unit_search_vector ON unit_search USING gin (vector)")
    else:
        op.execute(
            "CREATE VIRTUAL TABLE unit_search USING fts5("
            "unit_id UNINDEXED, body, tokenize = 'ascii', detail = 'column')"
        )
    _backfill(conn, postgres)


def downgrade() -> None:
    op.execute("DROP TABLE unit_search")
