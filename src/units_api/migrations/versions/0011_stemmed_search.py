"""Stemmed search words: every unit's search row is rewritten with its lexemes (words, stems,
forms without an attached preposition) and its ranking words (search.words).

PostgreSQL: the `ranking` column is added (instant), then the rows are rewritten in batches
of BATCH units, each committed on its own, so no lock is held for long and writes go on
meanwhile. It is resumable: a row not yet rewritten has no ranking, and a second run takes
up only those. SQLite: the FTS5 table is rebuilt with the ranking column, in the migration's
transaction.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import orjson
import sqlalchemy as sa
from alembic import op

from units_api.search.normalize import record_tokens
from units_api.search.words import index_text

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

BATCH = 2000

_PENDING = sa.text(
    "SELECT s.unit_id, u.doc FROM unit_search s JOIN units u ON u.id = s.unit_id "
    "WHERE s.unit_id > :last AND s.ranking IS NULL ORDER BY s.unit_id LIMIT :n"
)
_REWRITE = sa.text(
    "UPDATE unit_search SET vector = array_to_tsvector(string_to_array(t.w, ' ')), "
    "ranking = array_to_tsvector(string_to_array(t.k, ' ')) "
    "FROM unnest(CAST(:ids AS uuid[]), CAST(:w AS text[]), CAST(:k AS text[])) AS t(u, w, k) "
    "WHERE unit_search.unit_id = t.u"
)


def _rewrite_postgres(conn: sa.Connection) -> None:
    last = uuid.UUID(int=0)
    while True:
        rows = conn.execute(_PENDING, {"last": last, "n": BATCH}).all()
        if not rows:
            return
        texts = [index_text(orjson.loads(doc)) for _, doc in rows]
        conn.execute(
            _REWRITE,
            {
                "ids": [unit_id for unit_id, _ in rows],
                "w": [" ".join(found.lexemes) for found in texts],
                "k": [" ".join(found.ranking) for found in texts],
            },
        )
        last = rows[-1][0]


def _fts_table(name: str, ranking: bool) -> str:
    extra = ", ranking UNINDEXED" if ranking else ""
    return (
        f"CREATE VIRTUAL TABLE {name} USING fts5(unit_id UNINDEXED, body{extra}, "
        "tokenize = 'ascii', detail = 'column')"
    )


def _rebuild_sqlite(conn: sa.Connection, row: Callable[[dict[str, Any]], dict[str, str]]) -> None:
    """The FTS5 table made anew, each unit's row from its document by `row`."""
    ranking = "ranking" in row({})
    op.execute(_fts_table("unit_search_next", ranking))
    columns = "rowid, unit_id, body" + (", ranking" if ranking else "")
    values = ":rowid, :id, :body" + (", :ranking" if ranking else "")
    insert = sa.text(f"INSERT INTO unit_search_next ({columns}) VALUES ({values})")  # noqa: S608
    last = ""
    while True:
        rows = conn.execute(
            sa.text("SELECT id, doc FROM units WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last, "n": BATCH},
        ).all()
        if not rows:
            break
        batch = []
        for unit_id, doc in rows:
            key = uuid.UUID(hex=str(unit_id))
            rowid = int.from_bytes(key.bytes[8:], "big", signed=True)
            batch.append({"rowid": rowid, "id": key.hex, **row(orjson.loads(doc))})
        conn.execute(insert, batch)
        last = rows[-1][0]
    op.execute("DROP TABLE unit_search")
    op.execute("ALTER TABLE unit_search_next RENAME TO unit_search")


def _stemmed(fields: dict[str, Any]) -> dict[str, str]:
    found = index_text(fields)
    return {"body": " ".join(found.lexemes), "ranking": " ".join(found.ranking)}


def _plain(fields: dict[str, Any]) -> dict[str, str]:
    return {"body": " ".join(record_tokens(fields))}


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        _rebuild_sqlite(conn, _stemmed)
        return
    op.execute("ALTER TABLE unit_search ADD COLUMN IF NOT EXISTS ranking tsvector")
    with op.get_context().autocommit_block():
        _rewrite_postgres(conn)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        _rebuild_sqlite(conn, _plain)
        return
    op.execute("ALTER TABLE unit_search DROP COLUMN ranking")
    with op.get_context().autocommit_block():
        last = uuid.UUID(int=0)
        while True:
            rows = conn.execute(
                sa.text(
                    "SELECT s.unit_id, u.doc FROM unit_search s JOIN units u ON u.id = s.unit_id "
                    "WHERE s.unit_id > :last ORDER BY s.unit_id LIMIT :n"
                ),
                {"last": last, "n": BATCH},
            ).all()
            if not rows:
                return
            conn.execute(
                sa.text(
                    "UPDATE unit_search SET vector = array_to_tsvector(string_to_array(t.w, ' ')) "
                    "FROM unnest(CAST(:ids AS uuid[]), CAST(:w AS text[])) AS t(u, w) "
                    "WHERE unit_search.unit_id = t.u"
                ),
                {
                    "ids": [unit_id for unit_id, _ in rows],
                    "w": [" ".join(record_tokens(orjson.loads(doc))) for _, doc in rows],
                },
            )
            last = rows[-1][0]
