"""The search index, per dialect: SQLite FTS5, PostgreSQL tsvector with GIN.

Both hold the same normalised words of each unit and match every query word as a word or a
word prefix, so they give the same answers. Writes happen in the unit's own transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    ScalarSelect,
    Subquery,
    TextClause,
    Uuid,
    column,
    func,
    select,
    table,
    text,
    true,
)

from units_api.db import UTCDateTime
from units_api.search.normalize import query_tokens
from units_api.units.tables import units

# The columns queries read (created_at exists on PostgreSQL only; migration 0005).
_SEARCH = table("unit_search", column("unit_id", Uuid()), column("created_at", UTCDateTime()))
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


def search_condition(q: str | None, dialect: str) -> ColumnElement[bool]:
    """The condition for a search text; one with no words matches every unit."""
    return match(tuple(query_tokens(q or "")), dialect)


def match(words: Words, dialect: str) -> ColumnElement[bool]:
    """Units whose text has every word (every unit for no words)."""
    if not words:
        return true()
    return units.c.id.in_(select(_SEARCH.c.unit_id).where(_matches(words, dialect)))


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
