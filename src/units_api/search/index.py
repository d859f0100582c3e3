"""The search index, per dialect: SQLite FTS5, PostgreSQL tsvector with GIN.

Both hold the same lexemes of each unit (search.words) and match every query word by its
stem or as a prefix of a lexeme, so they give the same answers; both keep the unit's
`ranking` words beside them, unindexed, which relevance (search.rank) reads for the
matches only. Its rows are written with the unit's, by the unit change writer
(units/changes.py).

PostgreSQL's rows also hold the unit's creation time and the signature of its lexemes, both
in one index (migrations 0005 and 0019): a search many units match is walked in creation
order on that index alone, its words' signature bits tested there, and only the units that
pass have their words read (newest_matches).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    ScalarSelect,
    Select,
    Subquery,
    TextClause,
    Uuid,
    and_,
    any_,
    bindparam,
    column,
    func,
    literal,
    or_,
    select,
    table,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.sql.selectable import NamedFromClause

from units_api.db import UTCDateTime
from units_api.search.normalize import Words, query_tokens
from units_api.search.words import (
    SIGNATURE_COLUMNS,
    Term,
    signed_part,
    terms,
)

# The columns queries read (created_at and the signature exist on PostgreSQL only).
SEARCH = table(
    "unit_search",
    column("unit_id", Uuid()),
    column("created_at", UTCDateTime()),
    column("ranking", TSVECTOR()),
    *(column(name, BigInteger()) for name in SIGNATURE_COLUMNS),
)


def word_match(words: Words, dialect: str) -> TextClause:
    """The search table's rows whose text has every word, each as a word or a word prefix."""
    if dialect == "postgresql":
        return text("vector @@ CAST(:q AS tsquery)").bindparams(query_param(pg_query(words)))
    return text("unit_search MATCH :q").bindparams(query_param(f"body : ({fts_query(words)})"))


def query_param(value: str) -> BindParameter[str]:
    return bindparam("q", value, unique=True)  # a statement may hold several


def pg_lexeme(lexeme: str, prefix: bool) -> str:
    return "'" + lexeme.replace("'", "''") + "'" + (":*" if prefix else "")


def pg_term(term: Term, mark: str = "") -> str:
    options = [pg_lexeme(mark + lexeme, prefix) for lexeme, prefix in term.alternatives]
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def pg_query(words: Words) -> str:
    return " & ".join(pg_term(term) for term in terms(words))


def fts_term(term: Term, mark: str = "") -> str:
    options = [
        '"' + (mark + lexeme).replace('"', '""') + '"' + ("*" if prefix else "")
        for lexeme, prefix in term.alternatives
    ]
    return options[0] if len(options) == 1 else "(" + " OR ".join(options) + ")"


def fts_query(words: Words) -> str:
    return " AND ".join(fts_term(term) for term in terms(words))


def word_checks(words: Words, dialect: str, first: Words) -> list[TextClause]:
    """The search table's rows with every word; PostgreSQL looks the `first` words up in the
    GIN index and checks the others on the rows found (ts_match_vq, which no index serves):
    the index reads in full the entries of every word it is asked for, common ones included."""
    if dialect != "postgresql" or not first or first == words:
        return [word_match(words, dialect)]
    others = text("ts_match_vq(vector, CAST(:q AS tsquery))")
    return [word_match(first, dialect), others.bindparams(query_param(pg_query(words)))]


def search_condition(
    q: str | None, dialect: str, ids: ColumnElement[uuid.UUID]
) -> ColumnElement[bool]:
    """The condition for a search text on a column of unit ids; no words match every unit."""
    return match(tuple(query_tokens(q or "")), dialect, ids)


def match(
    words: Words,
    dialect: str,
    ids: ColumnElement[uuid.UUID],
    first: Words = (),
    walk: bool = False,
) -> ColumnElement[bool]:
    """Whether the unit whose id `ids` holds has every word (true for no words).

    `walk` (SQLite; a search many units match): the matches are read as the index's row ids
    (words.search_rowid of their units' ids), which it gives without reading its rows, and
    checked as the units are walked in the page's order; reading a unit id per match costs a
    read of its row each.

    With `first` (few matches, see plan.first_words), PostgreSQL reads the matching ids
    through the index before anything else, then the units by id: its statistics cannot tell
    it how few there are (for a word no unit has, it expects hundreds and walks in order).
    """
    if not words:
        return true()
    if walk and dialect == "sqlite":
        rowids: Select[Any] = select(column("rowid")).select_from(SEARCH)
        rowids = rowids.where(word_match(words, dialect))
        walked: ColumnElement[bool] = func.units_search_key(ids).in_(rowids)
        return walked
    found = select(SEARCH.c.unit_id).where(*word_checks(words, dialect, first))
    if first and dialect == "postgresql":
        return ids == any_(func.array(found.scalar_subquery()))
    return ids.in_(found)


def count_matches(
    words: Words, dialect: str, cap: int | None = None, first: Words = ()
) -> ScalarSelect[Any]:
    """How many units match a search alone, counted in the search table without a join;
    with `cap`, counting stops there (cheap for a rare word, bounded for a common one)."""
    found = word_checks(words, dialect, first)
    if cap is None:
        return select(func.count()).select_from(SEARCH).where(*found).scalar_subquery()
    hits = select(SEARCH.c.unit_id).where(*found).limit(cap).subquery()
    return select(func.count()).select_from(hits).scalar_subquery()


def newest_matches(
    words: Words, descending: bool, limit: int, offset: int, first: Words = ()
) -> Subquery:
    """PostgreSQL: a page of matching unit ids in creation order, from the search table alone.

    The table holds each unit's creation time, indexed, so this walks it in that order and
    checks each row's words (see walked_rows); with `first` (few matches), it sorts what the
    index finds.
    """
    if first:
        found = select(SEARCH.c.unit_id, SEARCH.c.created_at).where(
            *word_checks(words, "postgresql", first)
        )
        return in_creation_order(found, descending, limit, offset, sort_found=True)
    walked = walked_rows(words, [word_match(words, "postgresql")])
    return in_creation_order(walked, descending, limit, offset, sort_found=False)


def walked_rows(words: Words, checks: list[TextClause], name: str = "walked") -> Select[Any]:
    """The search table's (unit_id, created_at) rows for which `checks` hold, to be walked in
    creation order.

    Where the search's words have signature bits (search.words.signature), the walk tests
    them on the index of creation times, which includes the signature, and reads the row of
    a unit that passes them by its id to check its words. A walk past thousands of units that
    lack the words (the newest units, say) then reads the few whose bits match: reading a
    row and testing its words costs about five times what testing its entry does.
    """
    walked = SEARCH.alias(name)
    tests = _signature_tests(words, walked)
    if not tests:
        return select(SEARCH.c.unit_id, SEARCH.c.created_at).where(*checks)
    read = (
        select(literal(1)).select_from(SEARCH).where(SEARCH.c.unit_id == walked.c.unit_id, *checks)
    )
    return select(walked.c.unit_id, walked.c.created_at).where(*tests, read.exists())


def _signature_tests(words: Words, walked: NamedFromClause) -> list[ColumnElement[bool]]:
    """For each word that has them, that the row's signature has all the bits of one of the
    word's alternatives.

    Each bit is its own test, `part & bit <> 0`, whose selectivity PostgreSQL takes to be
    nearly 1 (that of `<>`), as it takes the whole walk; written `part & mask = mask`, it took
    each to be that of `=` (0.5 %), expected one match for three words, and sorted the
    matches of the words' index instead of walking (330 ms instead of 2).
    """
    tests = []
    for term in terms(words):
        alternatives = term.bits
        if alternatives is None:
            continue
        options = [and_(*(_has_bit(walked, bit) for bit in bits)) for bits in alternatives]
        tests.append(options[0] if len(options) == 1 else or_(*options))
    return tests


def _has_bit(walked: NamedFromClause, bit: int) -> ColumnElement[bool]:
    part = walked.c[SIGNATURE_COLUMNS[bit >> 6]]
    mask = bindparam("sig", signed_part(1 << (bit & 63)), BigInteger(), unique=True)
    return part.op("&")(mask) != 0


def in_creation_order(
    found: Select[Any],
    descending: bool,
    limit: int,
    offset: int,
    sort_found: bool,
    name: str = "hits",
) -> Subquery:
    """A page of (unit_id, created_at) rows in creation order: walked in the index of
    creation times, or, `sort_found`, every row found read first and sorted."""
    if sort_found:
        # Materialised, so the planner cannot turn it into the walk it would prefer.
        matched = found.cte(f"{name}_found").prefix_with("MATERIALIZED")
        found = select(matched.c.unit_id, matched.c.created_at)
    created, unit_id = found.selected_columns.created_at, found.selected_columns.unit_id
    return (
        found.order_by(*((created.desc(), unit_id.desc()) if descending else (created, unit_id)))
        .limit(limit)
        .offset(offset)
        .subquery(name)
    )
