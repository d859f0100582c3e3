"""The search index, per dialect: SQLite FTS5, PostgreSQL tsvector with GIN.

Both hold the same normalised words of each unit and match every query word as a word or a
word prefix, so they give the same answers. Its rows are written with the unit's, by the unit
change writer (units/changes.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    ScalarSelect,
    Subquery,
    TextClause,
    Uuid,
    any_,
    bindparam,
    column,
    func,
    select,
    table,
    text,
    true,
)

from units_api.db import UTCDateTime
from units_api.search.normalize import query_tokens

# The columns queries read (created_at exists on PostgreSQL only; migration 0005).
_SEARCH = table("unit_search", column("unit_id", Uuid()), column("created_at", UTCDateTime()))
Words = tuple[str, ...]  # a search text's words, as query_tokens gives them


def _matches(words: Words, dialect: str) -> TextClause:
    """The search table's rows whose text has every word, each as a word or a word prefix."""
    if dialect == "postgresql":
        return text("vector @@ CAST(:q AS tsquery)").bindparams(_query(_pg_query(words)))
    return text("unit_search MATCH :q").bindparams(_query(_fts_query(words)))


def _query(value: str) -> BindParameter[str]:
    return bindparam("q", value, unique=True)  # a statement may hold several


def _pg_query(words: Words) -> str:
    return " & ".join("'" + word.replace("'", "''") + "':*" for word in words)


def _fts_query(words: Words) -> str:
    return " ".join('"' + word.replace('"', '""') + '"*' for word in words)


def _found(words: Words, dialect: str, first: Words) -> list[TextClause]:
    """The search table's rows with every word; PostgreSQL looks the `first` words up in the
    GIN index and checks the others on the rows found (ts_match_vq, which no index serves):
    the index reads in full the entries of every word it is asked for, common ones included."""
    if dialect != "postgresql" or not first or first == words:
        return [_matches(words, dialect)]
    others = text("ts_match_vq(vector, CAST(:q AS tsquery))")
    return [_matches(first, dialect), others.bindparams(_query(_pg_query(words)))]


def search_condition(
    q: str | None, dialect: str, ids: ColumnElement[uuid.UUID]
) -> ColumnElement[bool]:
    """The condition for a search text on a column of unit ids; no words match every unit."""
    return match(tuple(query_tokens(q or "")), dialect, ids)


def match(
    words: Words, dialect: str, ids: ColumnElement[uuid.UUID], first: Words = ()
) -> ColumnElement[bool]:
    """Whether the unit whose id `ids` holds has every word (true for no words).

    With `first` (few matches, see plan.first_words), PostgreSQL reads the matching ids
    through the index before anything else, then the units by id: its statistics cannot tell
    it how few there are (for a word no unit has, it expects hundreds and walks in order).
    """
    if not words:
        return true()
    found = select(_SEARCH.c.unit_id).where(*_found(words, dialect, first))
    if first and dialect == "postgresql":
        return ids == any_(func.array(found.scalar_subquery()))
    return ids.in_(found)


def count_matches(
    words: Words, dialect: str, cap: int | None = None, first: Words = ()
) -> ScalarSelect[Any]:
    """How many units match a search alone, counted in the search table without a join;
    with `cap`, counting stops there (cheap for a rare word, bounded for a common one)."""
    found = _found(words, dialect, first)
    if cap is None:
        return select(func.count()).select_from(_SEARCH).where(*found).scalar_subquery()
    hits = select(_SEARCH.c.unit_id).where(*found).limit(cap).subquery()
    return select(func.count()).select_from(hits).scalar_subquery()


def newest_matches(
    words: Words, descending: bool, limit: int, offset: int, first: Words = ()
) -> Subquery:
    """PostgreSQL: a page of matching unit ids in creation order, from the search table alone.

    The table holds each unit's creation time, indexed, so this walks it in that order and
    checks each row's words; with `first` (few matches), it sorts what the index finds.
    """
    found = select(_SEARCH.c.unit_id, _SEARCH.c.created_at).where(
        *_found(words, "postgresql", first)
    )
    if first:
        # Materialised, so the planner cannot turn it into the walk it would prefer.
        matched = found.cte("matched").prefix_with("MATERIALIZED")
        found = select(matched.c.unit_id, matched.c.created_at)
    created, unit_id = found.selected_columns.created_at, found.selected_columns.unit_id
    return (
        found.order_by(*((created.desc(), unit_id.desc()) if descending else (created, unit_id)))
        .limit(limit)
        .offset(offset)
        .subquery("hits")
    )
