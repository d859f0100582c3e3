"""Relevance: a search's matches by score, read tier by tier, and the score as a sort key.

A match's score (search.words.relevance) is read from the `ranking` column of the search
table (search.index). A search alone by relevance, then recency, is read in tiers, one per
score (relevance_tiers): each tier's few units are read through the indexes, and a tier of
many is walked in creation order; a page takes from the tiers it falls in (ranked_matches),
chosen by their sizes (count_tiers; search.plan.ranked_page). Any other order with relevance in
it joins every match's score to the units (relevant_matches).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from sqlalchemy import (
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
    bindparam,
    case,
    cast,
    column,
    func,
    literal,
    select,
    text,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import TSQUERY

from units_api.search.index import (
    SEARCH,
    fts_query,
    fts_term,
    in_creation_order,
    pg_lexeme,
    pg_query,
    pg_term,
    query_param,
    walked_rows,
    word_checks,
    word_match,
)
from units_api.search.normalize import Words
from units_api.search.plan import tiered
from units_api.search.words import NAME_MARK, WRITTEN_WEIGHT, terms


@dataclass(frozen=True, slots=True)
class Tier:
    """The matches of a search that have one relevance score: `query`, a tsquery on their
    `ranking`, holds for exactly those."""

    score: int
    query: str


@lru_cache(maxsize=1024)
def relevance_tiers(words: Words, dialect: str = "postgresql") -> tuple[Tier, ...]:
    """A search's matches split by relevance score, best first; none for a search of more
    than search.plan.MAX_TIERED_TERMS words.

    Each word is matched as written or not, and in a name or not; every combination of those
    is a conjunction of ranking words and their negations, and a tier the union of the
    combinations with its score. PostgreSQL's `query` is a tsquery on `ranking` (whose GIN
    index, migration 0013, finds a tier's few units); SQLite's a full-text query on the body
    and the ranking columns together (both indexed, migration 0015). A walk in creation order
    finds a page of a tier of many. Built once per search (a request asks for them twice,
    and up to 4 ** 3 combinations are written for three words).
    """
    if not tiered(words):
        return ()
    searched = terms(words)
    if dialect == "postgresql":
        literals = [pg_lexeme(term.word, False) for term in searched]
        literals += [pg_term(term, NAME_MARK) for term in searched]
    else:
        literals = ['"' + term.word.replace('"', '""') + '"' for term in searched]
        literals += [fts_term(term, NAME_MARK) for term in searched]
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
    clause = f"body : ({fts_query(words)})"
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
            text(check.format("vector")).bindparams(query_param(pg_query(words))),
            text(check.format("ranking")).bindparams(query_param(tier.query)),
        ]
    ranked = text("ranking @@ CAST(:q AS tsquery)").bindparams(query_param(tier.query))
    return [word_match(words, "postgresql"), ranked]


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
                    .select_from(SEARCH)
                    .where(_in_fts_tier(tier))
                    .scalar_subquery()
                    .label("n"),
                )
                for tier in tiers
            )
        )
    score = _pg_relevance(words).label("score")
    scored = select(score).where(*word_checks(words, "postgresql", ())).subquery("scored")
    counted = (
        select(scored.c.score, func.count().label("n")).group_by(scored.c.score).subquery("counted")
    )
    at = select(version.label("version")).subquery("at")
    return select(at.c.version, counted.c.score, counted.c.n).select_from(
        at.outerjoin(counted, true())
    )


def _in_fts_tier(tier: Tier) -> TextClause:
    return text("unit_search MATCH :q").bindparams(query_param(tier.query))


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
                condition = units.c.id.in_(select(SEARCH.c.unit_id).where(_in_fts_tier(tier)))
            else:
                rowids: Select[Any] = select(column("rowid")).select_from(SEARCH)
                rowids = rowids.where(_in_fts_tier(tier))
                condition = func.units_search_key(units.c.id).in_(rowids)
            found = select(
                units.c.id.label("unit_id"), units.c.created_at.label("created_at")
            ).where(condition)
            hits = in_creation_order(found, descending, offset + limit, 0, False, f"tier{i}")
        elif few:
            in_tier = select(SEARCH.c.unit_id, SEARCH.c.created_at).where(*_in_tier(words, tier))
            hits = in_creation_order(in_tier, descending, offset + limit, 0, True, f"tier{i}")
        else:
            walked = walked_rows(words, _in_tier(words, tier, walked=True), f"walked{i}")
            hits = in_creation_order(walked, descending, offset + limit, 0, False, f"tier{i}")
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
    ranking = SEARCH.c.ranking

    def has(query: str) -> ColumnElement[bool]:
        tsquery = cast(bindparam("rank", query, unique=True), TSQUERY())
        found: ColumnElement[bool] = func.ts_match_vq(ranking, tsquery, type_=Boolean)
        return found

    score: ColumnElement[int] = sum(
        (
            case((has(pg_lexeme(term.word, False)), WRITTEN_WEIGHT), else_=0)
            + case((has(pg_term(term, NAME_MARK)), 1), else_=0)
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
        score = func.units_relevance(SEARCH.c.ranking, rank_words, type_=Integer)
    found = select(SEARCH.c.unit_id, score.label("score")).where(
        *word_checks(words, dialect, first)
    )
    return found.subquery("relevant")
