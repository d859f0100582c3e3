"""The search index, per dialect: SQLite FTS5, PostgreSQL tsvector with GIN.

Both hold the same normalised words of each unit and match every query word as a word or a
word prefix, so they give the same answers. Writes happen in the unit's own transaction.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import (
    ColumnElement,
    ScalarSelect,
    Subquery,
    TextClause,
    Uuid,
    bindparam,
    column,
    func,
    select,
    table,
    text,
    true,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import UTCDateTime
from units_api.search.normalize import query_tokens

# SQLite: the FTS rowid is taken from the unit id's random bits, so a unit's row is found
# without a lookup; the `ascii` tokenizer keeps our already-normalised words whole.
_SQLITE_DELETE = text("DELETE FROM unit_search WHERE rowid = :rowid")
_SQLITE_INSERT = text("INSERT INTO unit_search (rowid, unit_id, body) VALUES (:rowid, :id, :body)")
# The creation time is read from the unit's row, written just before in the same transaction.
_PG_UPSERT = text(
    "INSERT INTO unit_search (unit_id, created_at, vector) "
    "SELECT id, created_at, array_to_tsvector(:words) FROM units WHERE id = :id "
    "ON CONFLICT (unit_id) DO UPDATE SET vector = excluded.vector"
).bindparams(bindparam("words", type_=None))
# The columns queries read (created_at exists on PostgreSQL only; migration 0005).
_SEARCH = table("unit_search", column("unit_id", Uuid()), column("created_at", UTCDateTime()))
_PG_DELETE = text("DELETE FROM unit_search WHERE unit_id = :id")


def fts_rowid(unit_id: uuid.UUID) -> int:
    return int.from_bytes(unit_id.bytes[8:], "big", signed=True)


async def write(conn: AsyncConnection, unit_id: uuid.UUID, words: list[str]) -> None:
    await write_many(conn, [(unit_id, words)])


async def write_many(conn: AsyncConnection, entries: list[tuple[uuid.UUID, list[str]]]) -> None:
    if not entries:
        return
    if conn.dialect.name == "postgresql":
        await conn.execute(_PG_UPSERT, [{"id": i, "words": w} for i, w in entries])
        return
    await conn.execute(_SQLITE_DELETE, [{"rowid": fts_rowid(i)} for i, _ in entries])
    await conn.execute(
        _SQLITE_INSERT,
        [{"rowid": fts_rowid(i), "id": i.hex, "body": " ".join(w)} for i, w in entries],
    )


async def remove(conn: AsyncConnection, unit_id: uuid.UUID) -> None:
    if conn.dialect.name == "postgresql":
        await conn.execute(_PG_DELETE, {"id": unit_id})
    else:
        await conn.execute(_SQLITE_DELETE, {"rowid": fts_rowid(unit_id)})


Words = tuple[str, ...]  # a search text's words, as query_tokens gives them


def _matches(words: Words, dialect: str) -> TextClause:
    """The search table's rows whose text has every word, each as a word or a word prefix."""
    if dialect == "postgresql":
        return text("vector @@ CAST(:q AS tsquery)").bindparams(q=_pg_query(words))
    return text("unit_search MATCH :q").bindparams(q=_fts_query(words))


def _pg_query(words: Words) -> str:
    return " & ".join("'" + word.replace("'", "''") + "':*" for word in words)


def _fts_query(words: Words) -> str:
    return " ".join('"' + word.replace('"', '""') + '"*' for word in words)


def search_condition(
    q: str | None, dialect: str, ids: ColumnElement[uuid.UUID]
) -> ColumnElement[bool]:
    """The condition for a search text on a column of unit ids; no words match every unit."""
    return match(tuple(query_tokens(q or "")), dialect, ids)


def match(words: Words, dialect: str, ids: ColumnElement[uuid.UUID]) -> ColumnElement[bool]:
    """Whether the unit whose id `ids` holds has every word (true for no words)."""
    if not words:
        return true()
    return ids.in_(select(_SEARCH.c.unit_id).where(_matches(words, dialect)))


def count_matches(words: Words, dialect: str) -> ScalarSelect[Any]:
    """How many units match a search alone, counted in the search table without a join."""
    return (
        select(func.count()).select_from(_SEARCH).where(_matches(words, dialect)).scalar_subquery()
    )


def newest_matches(words: Words, descending: bool, limit: int, offset: int) -> Subquery:
    """PostgreSQL: a page of matching unit ids in creation order, from the search table alone.

    The table holds each unit's creation time, indexed, so this walks it in that order and
    checks each row's words (or, for rare words, sorts the few matches the GIN index finds).
    """
    created, unit_id = _SEARCH.c.created_at, _SEARCH.c.unit_id
    return (
        select(unit_id, created)
        .where(_matches(words, "postgresql"))
        .order_by(*((created.desc(), unit_id.desc()) if descending else (created, unit_id)))
        .limit(limit)
        .offset(offset)
        .subquery("hits")
    )
