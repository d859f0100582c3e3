"""The search index, per dialect: SQLite FTS5, PostgreSQL tsvector with GIN.

Both hold the same lexemes of each unit (search.words) and match every query word by its
stem or as a prefix of a lexeme, so they give the same answers; both keep the unit's
`ranking` words beside them, unindexed, which relevance reads for the matches only. Its rows
are written with the unit's, by the unit change writer (units/changes.py).

PostgreSQL's rows also hold the unit's creation time and the signature of its lexemes, both
in one index (migrations 0005 and 0019): a search many units match is walked in creation
order on that index alone, its words' signature bits tested there, and only the units that
pass have their words read (newest_matches).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    BindParameter,
    Boolean,
    ColumnElement,
    CompoundSelect,
    Integer,
    ScalarSelect,
    Select,
    Subquery,
    Table,
    TextClause,
    Uuid,
    and_,
    any_,
    bindparam,
    case,
    cast,
    column,
    func,
    literal,
    or_,
    select,
    table,
    text,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import TSQUERY, TSVECTOR
from sqlalchemy.sql.selectable import NamedFromClause

from units_api.db import UTCDateTime
from units_api.search.normalize import Words, query_tokens
from units_api.search.words import (
    NAME_MARK,
    SIGNATURE_COLUMNS,
    WRITTEN_WEIGHT,
    Term,
    signed_part,
    terms,
)

# The columns queries read (created_at and the signature exist on PostgreSQL only).
_SEARCH = table(
    "unit_search",
    column("unit_id", Uuid()),
    column("created_at", UTCDateTime()),
    column("ranking", TSVECTOR()),
    *(column(name, BigInteger()) for name in SIGNATURE_COLUMNS),
)
# Relevance is read in tiers for searches of at most this many words (4 ** n combinations).
MAX_TIERED_TERMS = 3


def _matches(words: Words, dialect: str) -> TextClause:
    """The search table's rows whose text has every word, each as a word or a word prefix."""
    if dialect == "postgresql":
        return text("vector @@ CAST(:q AS tsquery)").bindparams(_query(_pg_query(words)))
    return text("unit_search MATCH :q").bindparams(_query(f"body : ({_fts_query(words)})"))


def _query(value: str) -> BindParameter[str]:
    return bindparam("q", value, unique=True)  # a statement may hold several


def _pg_lexeme(lexeme: str, prefix: bool) -> str:
    return "'" + lexeme.replace("'", "''") + "'" + (":*" if prefix else "")


def _pg_term(term: Term, mark: str = "") -> str:
    options = [_pg_lexeme(mark + lexeme, prefix) for lexeme, prefix in term.alternatives]
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _pg_query(words: Words) -> str:
    return " & ".join(_pg_term(term) for term in terms(words))


def _fts_term(term: Term, mark: str = "") -> str:
    options = [
        '"' + (mark + lexeme).replace('"', '""') + '"' + ("*" if prefix else "")
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
        rowids: Select[Any] = select(column("rowid")).select_from(_SEARCH)
        rowids = rowids.where(_matches(words, dialect))
        walked: ColumnElement[bool] = func.units_search_key(ids).in_(rowids)
        return walked
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
    checks each row's words (see _walked); with `first` (few matches), it sorts what the
    index finds.
    """
    if first:
        found = select(_SEARCH.c.unit_id, _SEARCH.c.created_at).where(
            *_found(words, "postgresql", first)
        )
        return _in_creation_order(found, descending, limit, offset, sort_found=True)
    walked = _walked(words, [_matches(words, "postgresql")])
    return _in_creation_order(walked, descending, limit, offset, sort_found=False)


def _walked(words: Words, checks: list[TextClause], name: str = "walked") -> Select[Any]:
    """The search table's (unit_id, created_at) rows for which `checks` hold, to be walked in
    creation order.

    Where the search's words have signature bits (search.words.signature), the walk tests
    them on the index of creation times, which includes the signature, and reads the row of
    a unit that passes them by its id to check its words. A walk past thousands of units that
    lack the words (the newest units, say) then reads the few whose bits match: reading a
    row and testing its words costs about five times what testing its entry does.
    """
    walked = _SEARCH.alias(name)
    tests = _signature_tests(words, walked)
    if not tests:
        return select(_SEARCH.c.unit_id, _SEARCH.c.created_at).where(*checks)
    read = (
        select(literal(1))
        .select_from(_SEARCH)
        .where(_SEARCH.c.unit_id == walked.c.unit_id, *checks)
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


def _in_creation_order(
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


@dataclass(frozen=True, slots=True)
class Tier:
    """The matches of a search that have one relevance score: `query`, a tsquery on their
    `ranking`, holds for exactly those."""

    score: int
    query: str


@lru_cache(maxsize=1024)
def relevance_tiers(words: Words, dialect: str = "postgresql") -> tuple[Tier, ...]:
    """A search's matches split by relevance score, best first; none for a search of more
    than MAX_TIERED_TERMS words.

    Each word is matched as written or not, and in a name or not; every combination of those
    is a conjunction of ranking words and their negations, and a tier the union of the
    combinations with its score. PostgreSQL's `query` is a tsquery on `ranking` (whose GIN
    index, migration 0013, finds a tier's few units); SQLite's a full-text query on the body
    and the ranking columns together (both indexed, migration 0015). A walk in creation order
    finds a page of a tier of many. Built once per search (a request asks for them twice,
    and up to 4 ** 3 combinations are written for three words).
    """
    searched = terms(words)
    if not searched or len(searched) > MAX_TIERED_TERMS:
        return ()
    if dialect == "postgresql":
        literals = [_pg_lexeme(term.word, False) for term in searched]
        literals += [_pg_term(term, NAME_MARK) for term in searched]
    else:
        literals = ['"' + term.word.replace('"', '""') + '"' for term in searched]
        literals += [_fts_term(term, NAME_MARK) for term in searched]
    weights = [WRITTEN_WEIGHT] * len(searched) + [1] * len(searched)
    combinations: dict[int, list[str]] = {}
    for held in itertools.product((True, False), repeat=len(literals)):
        score = sum(weight for weight, has in zip(weights, held, strict=True) if has)
        present = [literal for literal, has in zip(literals, held, strict=True) if has]
        absent = [literal for literal, has in zip(literals, held, strict=True) if not has]
        if dialect == "postgresql":
            clause = " & ".join([*present, *("!" + literal for literal in absent)])
        else:
            clause = _fts_combination(words, present, absent)
        combinations.setdefault(score, []).append("(" + clause + ")")
    joiner = " | " if dialect == "postgresql" else " OR "
    return tuple(
        Tier(score, joiner.join(clauses))
        for score, clauses in sorted(combinations.items(), reverse=True)
    )


def _fts_combination(words: Words, present: list[str], absent: list[str]) -> str:
    """SQLite: the matches (body) with the `present` ranking words and none of the `absent`."""
    clause = f"body : ({_fts_query(words)})"
    if present:
        clause += f" AND ranking : ({' AND '.join(present)})"
    if absent:
        clause += f" NOT ranking : ({' OR '.join(absent)})"
    return clause


def _in_tier(words: Words, tier: Tier, walked: bool = False) -> list[TextClause]:
    """The search table's rows in a tier. `walked`: checked row by row (ts_match_vq, which no
    index serves), so the planner walks in creation order to the page rather than sorting
    every match, which its estimate of two independent conditions (a few rows) would choose."""
    if walked:
        check = "ts_match_vq({}, CAST(:q AS tsquery))"
        return [
            text(check.format("vector")).bindparams(_query(_pg_query(words))),
            text(check.format("ranking")).bindparams(_query(tier.query)),
        ]
    ranked = text("ranking @@ CAST(:q AS tsquery)").bindparams(_query(tier.query))
    return [_matches(words, "postgresql"), ranked]


def count_tiers(
    words: Words, dialect: str, tiers: Sequence[Tier], version: ScalarSelect[Any]
) -> Select[Any] | CompoundSelect[Any]:
    """How many of a search's matches each relevance score has: rows of (`version`, score,
    count). PostgreSQL scores every match in one pass (one row of (`version`, None, None) for
    a search without any); SQLite's full-text index counts each tier."""
    if dialect != "postgresql":
        return union_all(
            *(
                select(
                    version.label("version"),
                    literal(tier.score).label("score"),
                    select(func.count())
                    .select_from(_SEARCH)
                    .where(_in_fts_tier(tier))
                    .scalar_subquery()
                    .label("n"),
                )
                for tier in tiers
            )
        )
    score = _pg_relevance(words).label("score")
    scored = select(score).where(*_found(words, "postgresql", ())).subquery("scored")
    counted = (
        select(scored.c.score, func.count().label("n")).group_by(scored.c.score).subquery("counted")
    )
    at = select(version.label("version")).subquery("at")
    return select(at.c.version, counted.c.score, counted.c.n).select_from(
        at.outerjoin(counted, true())
    )


def _in_fts_tier(tier: Tier) -> TextClause:
    return text("unit_search MATCH :q").bindparams(_query(tier.query))


def ranked_matches(
    words: Words,
    tiers: Sequence[tuple[Tier, bool]],
    descending: bool,
    limit: int,
    offset: int,
    dialect: str,
    units: Table,
) -> Subquery:
    """A page of a search's matches by relevance, then creation, then id: the (unit_id,
    created_at, score) of the page, read tier by tier.

    `tiers` are the tiers that may hold matches, each with whether it has few (read through
    the indexes and sorted) or many (walked in creation order). Each gives at most the rows up
    to the page's end, so deep pages cost more, within the list's depth limit. PostgreSQL
    reads the search table alone; SQLite `units` (its search table has no creation time),
    by id for few, and for many walking them, checked by their search row ids (see match).
    """
    branches = []
    for i, (tier, few) in enumerate(tiers):
        if dialect != "postgresql":
            if few:
                condition = units.c.id.in_(select(_SEARCH.c.unit_id).where(_in_fts_tier(tier)))
            else:
                rowids: Select[Any] = select(column("rowid")).select_from(_SEARCH)
                rowids = rowids.where(_in_fts_tier(tier))
                condition = func.units_search_key(units.c.id).in_(rowids)
            found = select(
                units.c.id.label("unit_id"), units.c.created_at.label("created_at")
            ).where(condition)
            hits = _in_creation_order(found, descending, offset + limit, 0, False, f"tier{i}")
        elif few:
            in_tier = select(_SEARCH.c.unit_id, _SEARCH.c.created_at).where(*_in_tier(words, tier))
            hits = _in_creation_order(in_tier, descending, offset + limit, 0, True, f"tier{i}")
        else:
            walked = _walked(words, _in_tier(words, tier, walked=True), f"walked{i}")
            hits = _in_creation_order(walked, descending, offset + limit, 0, False, f"tier{i}")
        branches.append(
            select(hits.c.unit_id, hits.c.created_at, literal(tier.score).label("score"))
        )
    ranked = union_all(*branches).subquery("ranked")
    order = (ranked.c.score, ranked.c.created_at, ranked.c.unit_id)
    return (
        select(ranked)
        .order_by(*(column.desc() if descending else column.asc() for column in order))
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
