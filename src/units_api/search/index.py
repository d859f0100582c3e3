"""The search index, per dialect: SQLite FTS5, PostgreSQL tsvector with GIN.

Both hold the same lexemes of each unit (search.words) and match every query word by its
stem or as a prefix of a lexeme, so they give the same answers; both keep the unit's
`ranking` words beside them, unindexed, which relevance reads for the matches only. Its rows
are written with the unit's, by the unit change writer (units/changes.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from sqlalchemy import (
    BindParameter,
    Boolean,
    ColumnElement,
    Integer,
    ScalarSelect,
    Subquery,
    TextClause,
    Uuid,
    any_,
    bindparam,
    case,
    cast,
    column,
    func,
    select,
    table,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import TSQUERY, TSVECTOR

from units_api.db import UTCDateTime
from units_api.search.normalize import query_tokens
from units_api.search.words import NAME_MARK, WRITTEN_WEIGHT, Term, terms

# The columns queries read (created_at exists on PostgreSQL only; migration 0005).
_SEARCH = table(
    "unit_search",
    column("unit_id", Uuid()),
    column("created_at", UTCDateTime()),
    column("ranking", TSVECTOR()),
)
Words = tuple[str, ...]  # a search text's words, as query_tokens gives them


def _matches(words: Words, dialect: str) -> TextClause:
    """The search table's rows whose text has every word, each as a word or a word prefix."""
    if dialect == "postgresql":
        return text("vector @@ CAST(:q AS tsquery)").bindparams(_query(_pg_query(words)))
    return text("unit_search MATCH :q").bindparams(_query(_fts_query(words)))


def _query(value: str) -> BindParameter[str]:
    return bindparam("q", value, unique=True)  # a statement may hold several


def _pg_lexeme(lexeme: str, prefix: bool) -> str:
    return "'" + lexeme.replace("'", "''") + "'" + (":*" if prefix else "")


def _pg_term(term: Term, mark: str = "") -> str:
    options = [_pg_lexeme(mark + lexeme, prefix) for lexeme, prefix in term.alternatives]
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _pg_query(words: Words) -> str:
    return " & ".join(_pg_term(term) for term in terms(words))


def _fts_term(term: Term) -> str:
    options = [
        '"' + lexeme.replace('"', '""') + '"' + ("*" if prefix else "")
        for lexeme, prefix in term.alternatives
    ]
    return options[0] if len(options) == 1 else "(" + " OR ".join(options) + ")"


def _fts_query(words: Words) -> str:
    return " AND ".join(_fts_term(term) for term in terms(words))


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


def _pg_relevance(words: Words) -> ColumnElement[int]:
    """The relevance score (search.words.relevance) computed from the `ranking` column."""
    ranking = _SEARCH.c.ranking

    def has(query: str) -> ColumnElement[bool]:
        tsquery = cast(bindparam("rank", query, unique=True), TSQUERY())
        found: ColumnElement[bool] = func.ts_match_vq(ranking, tsquery, type_=Boolean)
        return found

    score: ColumnElement[int] = sum(
        (
            case((has(_pg_lexeme(term.word, False)), WRITTEN_WEIGHT), else_=0)
            + case((has(_pg_term(term, NAME_MARK)), 1), else_=0)
            for term in terms(words)
        ),
        start=cast(0, Integer),
    )
    return score


def relevant_matches(words: Words, dialect: str, first: Words = ()) -> Subquery:
    """The matching units' ids with their relevance score (`score`), from the search table."""
    if dialect == "postgresql":
        score = _pg_relevance(words)
    else:
        rank_words: BindParameter[str] = bindparam(
            "rank", orjson.dumps(list(words)).decode(), unique=True
        )
        score = func.units_relevance(_SEARCH.c.ranking, rank_words, type_=Integer)
    found = select(_SEARCH.c.unit_id, score.label("score")).where(*_found(words, dialect, first))
    return found.subquery("relevant")
