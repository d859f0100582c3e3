"""The unit list (GET /api/v2/units/): its query parameters, parsed and checked before any
SQL is built, and a page of records with its count and links."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any, Literal

import msgspec
import orjson
from sqlalchemy import ColumnElement, Select, and_
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.datastructures import URL
from starlette.requests import Request

from units_api.db import Database
from units_api.errors import InvalidParameter
from units_api.filters.maps import MapPlan
from units_api.filters.parser import parse_filter
from units_api.filters.sql import nearest_first
from units_api.filters.tree import Node
from units_api.http.paging import Limit, page_links, whole_number
from units_api.search.index import count_matches, match, newest_matches
from units_api.search.normalize import Words, query_tokens
from units_api.search.plan import FEW_MATCHES, SQLITE_FEW_MATCHES, first_words
from units_api.search.rank import Tier, count_tiers, ranked_matches, relevance_tiers
from units_api.units import repository
from units_api.units.counting import (
    CHANGE_VERSION,
    CountCache,
    Explain,
    estimate,
    exact_count,
    explain_statement,
)
from units_api.units.fields import DISTANCE, RELEVANCE, SortKey
from units_api.units.filtering import unit_filters
from units_api.units.repository import Computed
from units_api.units.schemas import MAX_QUERY_LENGTH, PROJECTABLE
from units_api.units.sorting import (
    by_distance,
    by_relevance,
    check_distance,
    check_relevance,
    parse_sort,
    split_commas,
)
from units_api.units.tables import units

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
LIST_LIMIT = Limit(DEFAULT_LIMIT, MAX_LIMIT)
MAX_DEPTH = 10_000
# "default" is exact within the count budget (UNITS_API_COUNT_BUDGET_MS); "exact" was asked.
CountMode = Literal["default", "exact", "estimated", "none"]
COUNT_MODES = ("exact", "estimated", "none")  # what `Prefer: count=` may ask for


@dataclass(frozen=True, slots=True)
class ListParams:
    limit: int
    page: int
    sort: tuple[SortKey, ...]
    fields: tuple[str, ...] | None
    filter: Node | None
    q: str | None
    words: tuple[str, ...]  # of q, normalised once
    count: CountMode


def _fields(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    names = [name for name in split_commas(raw) if name]
    unknown = [name for name in names if name not in PROJECTABLE]
    if unknown or not names:
        raise InvalidParameter("fields", f"unknown field(s): {', '.join(unknown) or '(none)'}")
    return tuple(dict.fromkeys(["id", *names]))


def _count_mode(prefer: str | None) -> CountMode:
    for part in (prefer or "").split(","):
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "count" and value.strip() in COUNT_MODES:
            return value.strip()  # type: ignore[return-value]
    return "default"


def parse_list_params(request: Request) -> ListParams:
    query = request.query_params
    limit = LIST_LIMIT.parse(query.get("limit"))
    page = whole_number("page", query.get("page"), 1, 1, None)
    if page * limit > MAX_DEPTH:
        raise InvalidParameter(
            "page",
            f"page x limit may not pass {MAX_DEPTH:,}; for deeper reads use the query endpoint "
            "(POST /api/v2/units/query, cursor paging) or a batch export "
            "(POST /api/v2/units/exports)",
        )
    raw_filter = query.get("p")
    q = query.get("q")
    if q is not None and len(q) > MAX_QUERY_LENGTH:
        raise InvalidParameter("q", f"is longer than {MAX_QUERY_LENGTH} characters")
    sort = parse_sort(query.get("sortBy"), query.get("order"))
    words = tuple(query_tokens(q or ""))
    check_relevance(sort, words, "sortBy")
    tree = parse_filter(raw_filter, "p") if raw_filter is not None else None
    check_distance(sort, tree, "sortBy", "p")
    return ListParams(
        limit=limit,
        page=page,
        sort=sort,
        fields=_fields(query.get("fields")),
        filter=tree,
        q=q,
        words=words,
        count=_count_mode(request.headers.get("prefer")),
    )


_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _project(doc: str, fields: tuple[str, ...] | None, shown: dict[str, Any]) -> Any:
    """The record, or its `fields`, with the values a sort adds to it (`distanceMeters`)."""
    if fields is None:
        if not shown:
            return orjson.Fragment(doc)
        return orjson.Fragment(doc[:-1] + "," + orjson.dumps(shown).decode()[1:])
    # Only the top level is parsed: each field's value is kept as the JSON it is stored as
    # (a record's many numbers are not read into Decimals to be written back unchanged).
    record = _TOP_LEVEL.decode(doc)
    return {
        name: None if (value := record.get(name)) is None else orjson.Fragment(bytes(value))
        for name in fields
    } | shown


def _newest_matches_alone(dialect: str, params: ListParams, policy: Node | None) -> bool:
    """A search alone in creation order: PostgreSQL answers it from the search table."""
    return (
        dialect == "postgresql"
        and params.filter is None
        and policy is None
        and len(params.sort) == 1
        and params.sort[0].field == "createdAt"
        and bool(params.words)
    )


def _located_by_time(params: ListParams, place: MapPlan) -> bool:
    """A map search in a box or polygon in creation order: read through the index of points
    with their time (repository.located_page_query), where there is one."""
    return (
        place.box
        and len(params.sort) == 1
        and params.sort[0].field == "createdAt"
        and not params.words
    )


def _ranked_alone(params: ListParams, policy: Node | None) -> bool:
    """A search alone by relevance, then recency: read tier by tier
    (search.rank.ranked_matches)."""
    sort = params.sort
    return (
        params.filter is None
        and policy is None
        and len(sort) == 2
        and sort[0].field == RELEVANCE
        and sort[1].field == "createdAt"
        and sort[0].descending == sort[1].descending
        and bool(relevance_tiers(params.words))
    )


async def _tiers(conn: AsyncConnection, counts: CountCache, words: Words) -> list[tuple[Tier, int]]:
    """The relevance tiers of a search that hold matches, best first, with their sizes,
    remembered or counted together."""
    dialect = conn.dialect.name
    tiers = relevance_tiers(words, dialect)
    keys = {tier.score: (None, None, words, tier.score) for tier in tiers}
    counting = partial(count_tiers, words, dialect, tiers, CHANGE_VERSION)
    sizes = await counts.sizes(conn, keys, counting)
    return [(tier, sizes[tier.score]) for tier in tiers if sizes[tier.score]]


def _window(
    tiers: list[tuple[Tier, int]], descending: bool, offset: int, limit: int, few: int
) -> tuple[list[tuple[Tier, bool]], int]:
    """The tiers a page of `limit` from `offset` falls in, in the page's order, each with
    whether it has at most `few` (see plan.first_words), and the page's offset in the first."""
    chosen = []
    start = skipped = 0
    for tier, size in tiers if descending else tiers[::-1]:
        if start + size <= offset:
            skipped += size
        elif start < offset + limit:
            chosen.append((tier, size <= few))
        start += size
    return chosen, offset - skipped


async def _ranked_page(
    conn: AsyncConnection, counts: CountCache, params: ListParams, offset: int, few: int
) -> tuple[list[str], int | None, list[tuple[Any, ...]]] | None:
    """A page of a search by relevance read in the tiers it falls in (None when no tier holds
    a match). The tiers' sizes are exact at the version they were counted at; a page read at
    a newer version is read again with sizes of its own, so a unit that has just entered a
    tier is neither missed nor shown twice."""
    if conn.dialect.name != "postgresql":
        return await _ranked_read(conn, counts, params, offset, few)
    async with repository.custom_plans(conn):
        return await _ranked_read(conn, counts, params, offset, few)


async def _ranked_read(
    conn: AsyncConnection, counts: CountCache, params: ListParams, offset: int, few: int
) -> tuple[list[str], int | None, list[tuple[Any, ...]]] | None:
    descending = params.sort[0].descending
    for _ in range(2):
        planned = counts.seen
        sized = await _tiers(conn, counts, params.words)
        if not sized:
            return None
        tiers, within = _window(sized, descending, offset, params.limit + 1, few)
        if not tiers:
            return [], None, []  # past the last match
        hits = ranked_matches(
            params.words, tiers, descending, params.limit + 1, within, conn.dialect.name, units
        )
        page = await repository.read_page(conn, repository.ranked_hits_query(hits, descending))
        if page[1] is None or page[1] <= max(planned, counts.seen):
            break
        counts.saw(page[1])
    return page


async def _first_words(conn: AsyncConnection, counts: CountCache, words: Words, few: int) -> Words:
    """The words to read through the search index first (see plan.first_words), from how
    many units have each, as remembered or counted up to past `few`."""
    dialect = conn.dialect.name
    if not words or few < 1:
        return ()
    cap = few + 1
    sizes = [
        await counts.size(conn, (None, None, (w,)), partial(count_matches, (w,), dialect, cap), cap)
        for w in words
    ]
    return first_words(words, sizes, counts.remembered((None, None, words)), few)


_NEAREST_FIRST = (SortKey(DISTANCE, False),)
# Pages nearest first reaching this far or less are bounded by a walk of the point index: at
# 1,000,000 units, 2,893 of them in the circle, 21 rows took 0.5 ms (3.3 ms sorting the
# circle), 521 rows 2.0 ms, 1,021 3.2 ms, as many as sorting all of them.
NEAREST_WALK = 500


def _page_query(
    dialect: str,
    params: ListParams,
    policy: Node | None,
    filtered: ColumnElement[bool],
    condition: ColumnElement[bool],
    distance: Computed,
    place: MapPlan,
    offset: int,
    first: Words,
    by_time: bool,
) -> Select[Any]:
    """The statement of a page of the list, but for a search alone by relevance. `by_time`:
    the database has the index of points with their time (repository.located_by_time)."""
    if by_time and _located_by_time(params, place):
        descending = params.sort[0].descending
        return repository.located_page_query(condition, descending, params.limit + 1, offset)
    # A map search finds its page in the index of the points (repository.page_query).
    from_index = place.located
    near = place.near
    reach = offset + params.limit + 1
    if (
        dialect == "postgresql"
        and near is not None
        and params.sort == _NEAREST_FIRST
        and reach <= NEAREST_WALK
    ):
        # Nearest first: only the units as near as the page's last are sorted.
        bound = nearest_first(near, units, condition, reach)
        condition = condition if bound is None else and_(condition, bound)
    if _newest_matches_alone(dialect, params, policy):
        descending = params.sort[0].descending
        hits = newest_matches(params.words, descending, params.limit + 1, offset, first)
        return repository.hits_query(hits, descending)
    if any(key.field == RELEVANCE for key in params.sort):
        # The matches come with their score from the search table, joined to the units.
        computed = by_relevance(params.words, dialect, first)
        computed = Computed({**computed.keys, **distance.keys}, computed.source, distance.shown)
        return repository.page_query(
            filtered, params.sort, params.limit + 1, offset, dialect, computed, from_index
        )
    return repository.page_query(
        condition, params.sort, params.limit + 1, offset, dialect, distance, from_index
    )


@dataclass(slots=True)
class _Statements:
    condition: ColumnElement[bool]  # the filter's, the policy's and the search's
    distance: Computed
    query: Select[Any]  # the page's
    # The page's statement with its values written in, when they are all numbers (a map
    # search's: see repository.literal_sql).
    sql: str | None
    # The estimate's statement, compiled at its first use (two requests may both compile it).
    explain: Explain | None = None

    def explained(self, dialect: Dialect) -> Explain:
        if self.explain is None:
            self.explain = explain_statement(self.condition, dialect)
        return self.explain


@lru_cache(maxsize=128)  # a polygon's statements may take a few hundred KB
def _statements(
    dialect: str,
    params: ListParams,
    policy: Node | None,
    first: Words,
    walk: bool,
    by_time: bool,
) -> _Statements:
    """A page's statements, built once for each shape of page (`params` without what does not
    change them): asked again, the same objects, whose SQLAlchemy cache keys are then known
    (building a map search's page and its cache key cost a request about a fifth of its
    time). Nothing in them depends on the moment they are built."""
    filtered, place = unit_filters(params.filter, policy, dialect)
    condition = and_(filtered, match(params.words, dialect, units.c.id, first, walk))
    distance = by_distance(params.sort, place.near)
    offset = (params.page - 1) * params.limit
    query = _page_query(
        dialect, params, policy, filtered, condition, distance, place, offset, first, by_time
    )
    sql = repository.literal_sql(query) if dialect == "postgresql" and place.located else None
    return _Statements(condition, distance, query, sql)


async def list_units(
    db: Database,
    counts: CountCache,
    params: ListParams,
    url: URL,
    policy: Node | None,
    count_budget_ms: int | None = None,
    few_matches: int = FEW_MATCHES,
    located_by_time: bool = False,
) -> dict[str, Any]:
    """A page of the list; `located_by_time`: whether the database has the index of points
    with their time (repository.located_by_time)."""
    offset = (params.page - 1) * params.limit

    few = min(few_matches, SQLITE_FEW_MATCHES) if db.dialect == "sqlite" else few_matches
    shape = replace(params, fields=None, q=None, count="default")  # what the statements read

    async def read(conn: AsyncConnection) -> tuple[list[str], list[Any], int | None, str, Computed]:
        first = await _first_words(conn, counts, params.words, few)
        # SQLite walks the units in order for a search many match (search.index.match).
        walk = db.dialect == "sqlite" and not first and few > 0
        statements = _statements(db.dialect, shape, policy, first, walk, located_by_time)
        condition, distance = statements.condition, statements.distance
        seen = counts.seen
        ranked = None
        if not first and _ranked_alone(params, policy):
            ranked = await _ranked_page(conn, counts, params, offset, few)
        if ranked is not None:
            docs, version, values = ranked
        else:
            docs, version, values = await repository.read_page(
                conn, statements.query, statements.sql
            )
        counts.saw(version)
        mode: str = params.count
        total: int | None = None
        key = (params.filter, policy, params.words)
        if mode == "estimated" and db.dialect == "postgresql":
            total = await estimate(conn, statements.explained(conn.dialect))
        elif mode != "none" and len(docs) <= params.limit and (docs or offset == 0):
            # The last page: what came before it and what is on it, read in one statement; an
            # empty one holds at the version seen before it, if that is still the current one.
            mode, total = "exact", offset + len(docs)
            # An empty page read on a replica has no version of its own to be stored at.
            if version is not None or conn.engine is db.engine:
                counts.put(key, seen if version is None else version, total)
        elif mode != "none":
            # Unasked, an exact total may take count_budget_ms; asked for, as long as it takes.
            budget = count_budget_ms if mode == "default" else None
            mode = "exact"
            narrowed = params.filter is not None or policy is not None
            counting = partial(exact_count, narrowed, params.words, condition, first, db.dialect)
            total = await counts.total(conn, key, version, counting, budget)
            if total is None:
                mode = "estimated"
                total = await estimate(conn, statements.explained(conn.dialect))
        return docs, values, total, mode, distance

    # Lists and searches may be a little behind: a replica's, when one is in use.
    docs, values, total, mode, distance = await db.run_on_replica(read)
    has_next = len(docs) > params.limit
    pages = max(1, math.ceil(total / params.limit)) if total is not None else None
    return {
        "data": [
            _project(doc, params.fields, dict(zip(distance.shown.values(), shown, strict=False)))
            for doc, shown in zip(docs[: params.limit], values, strict=False)
        ],
        "meta": {
            "page": params.page,
            "limit": params.limit,
            "total": total,
            "totalPages": pages,
            "count": mode,
        },
        "links": page_links(url, params.page, pages, has_next),
    }
