"""The unit list (GET /api/v2/units/): its query parameters, parsed and checked before any
SQL is built, and a page of records with its count and links, read as search.plan decides."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any, Literal

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
from units_api.search import plan
from units_api.search.index import match, newest_matches
from units_api.search.normalize import Words, query_tokens
from units_api.search.plan import FEW_MATCHES
from units_api.search.rank import Tier
from units_api.units import repository
from units_api.units.counting import (
    CountCache,
    Counting,
    Explain,
    SearchCounts,
    estimate,
    exact_count,
    explain_statement,
)
from units_api.units.fields import SortKey, project
from units_api.units.filtering import unit_filters
from units_api.units.repository import Computed
from units_api.units.schemas import MAX_QUERY_LENGTH, PROJECTABLE
from units_api.units.sorting import (
    by_distance,
    by_relevance,
    check_distance,
    check_relevance,
    order_of,
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


@dataclass(slots=True)
class _Statements:
    shape: plan.Shape  # what decides how the page is read
    question: Hashable  # what its total is remembered by: filter, policy, search words
    condition: ColumnElement[bool]  # the filter's, the policy's and the search's
    exact: Counting  # the cheapest exact count of the units the condition finds
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
    time). Nothing in them depends on the moment they are built. `by_time`: the database has
    the index of the points with their time (repository.located_by_time)."""
    filtered, place = unit_filters(params.filter, policy, dialect)
    condition = and_(filtered, match(params.words, dialect, units.c.id, first, walk))
    narrowed = params.filter is not None or policy is not None
    exact = partial(exact_count, narrowed, params.words, condition, first, dialect)
    distance = by_distance(params.sort, place.near)
    shape = plan.Shape(
        order=order_of(params.sort),
        words=params.words,
        narrowed=narrowed,
        box=place.box,
        near=place.near is not None,
        reach=(params.page - 1) * params.limit + params.limit + 1,
    )
    read = plan.page_read(shape, dialect, by_time)
    query = _page_query(read, dialect, params, filtered, condition, distance, place, first)
    sql = repository.literal_sql(query, dialect) if place.located else None
    question = (params.filter, policy, params.words)
    return _Statements(shape, question, condition, exact, distance, query, sql)


def _page_query(
    read: plan.Read,
    dialect: str,
    params: ListParams,
    filtered: ColumnElement[bool],
    condition: ColumnElement[bool],
    distance: Computed,
    place: MapPlan,
    first: Words,
) -> Select[Any]:
    """The statement of a page, read as the plan says (search.plan.page_read)."""
    sort, limit, offset = params.sort, params.limit + 1, (params.page - 1) * params.limit
    descending = sort[0].descending
    if read == "located_by_time":
        return repository.located_page_query(condition, descending, limit, offset)
    if read == "newest":
        hits = newest_matches(params.words, descending, limit, offset, first)
        return repository.hits_query(hits, descending)
    if read == "relevance":
        # The matches come with their score from the search table, joined to the units.
        computed = by_relevance(params.words, dialect, first, distance)
        return repository.page_query(
            filtered, sort, limit, offset, dialect, computed, place.located
        )
    if read == "nearest" and place.near is not None:
        # Nearest first: only the units as near as the page's last are sorted.
        bound = nearest_first(place.near, units, condition, offset + limit)
        condition = condition if bound is None else and_(condition, bound)
    # A map search finds its page in the index of the points (repository.page_query).
    return repository.page_query(condition, sort, limit, offset, dialect, distance, place.located)


async def _ranked_page(
    conn: AsyncConnection, counts: CountCache, sizes: SearchCounts, params: ListParams, few: int
) -> plan.Page | None:
    """A page of a search alone by relevance, then recency, read tier by tier (with PostgreSQL
    planning each statement for its own values: repository.custom_plans)."""
    words, descending = params.words, params.sort[0].descending
    limit, offset = params.limit + 1, (params.page - 1) * params.limit

    async def read(tiers: list[tuple[Tier, bool]], within: int) -> plan.Page:
        return await repository.ranked_page(conn, words, tiers, descending, limit, within)

    async with repository.custom_plans(conn):
        tiered = partial(sizes.tiers, words)
        return await plan.ranked_page(tiered, read, counts, descending, offset, limit, few)


# A page's total, and how it was counted (meta.count).
Total = tuple[int | None, str]


async def _total(
    conn: AsyncConnection,
    counts: CountCache,
    params: ListParams,
    statements: _Statements,
    page: plan.Page,
    seen: int,
    on_primary: bool,
    budget_ms: int | None,
) -> Total:
    """The page's total, as `Prefer: count=` asks; `seen`: the version seen before the page
    was read; `on_primary`: it was read on the primary."""
    docs, version, _ = page
    offset = (params.page - 1) * params.limit
    if params.count == "none":
        return None, "none"
    if params.count == "estimated" and conn.dialect.name == "postgresql":
        return await estimate(conn, statements.explained(conn.dialect)), "estimated"
    if len(docs) <= params.limit and (docs or offset == 0):
        # The last page: what came before it and what is on it, read in one statement; an
        # empty one holds at the version seen before it, if that is still the current one.
        # An empty page read on a replica has no version of its own to be stored at.
        if version is not None or on_primary:
            at = seen if version is None else version
            counts.put(statements.question, at, offset + len(docs))
        return offset + len(docs), "exact"
    # Unasked, an exact total may take count_budget_ms; asked for, as long as it takes.
    budget = budget_ms if params.count == "default" else None
    total = await counts.total(conn, statements.question, version, statements.exact, budget)
    if total is None:
        return await estimate(conn, statements.explained(conn.dialect)), "estimated"
    return total, "exact"


def _body(
    params: ListParams, url: URL, page: plan.Page, total: Total, distance: Computed
) -> dict[str, Any]:
    docs, _, values = page
    count, mode = total
    pages = max(1, math.ceil(count / params.limit)) if count is not None else None
    shown = distance.shown.values()
    return {
        "data": [
            project(doc, params.fields, dict(zip(shown, row, strict=False)))
            for doc, row in zip(docs[: params.limit], values, strict=False)
        ],
        "meta": {
            "page": params.page,
            "limit": params.limit,
            "total": count,
            "totalPages": pages,
            "count": mode,
        },
        "links": page_links(url, params.page, pages, len(docs) > params.limit),
    }


@dataclass(frozen=True, slots=True)
class Listed:
    """A page of the list as read: its records (stored JSON; one more than the page when a
    next page exists), the change version they were read at, its total and what it computed."""

    page: plan.Page
    total: Total
    distance: Computed
    before: int | None = None  # the change version read just before, when asked

    @property
    def version(self) -> int | None:
        """The change version the records were read at (with none, one read before them)."""
        return self.page[1] if self.page[1] is not None else self.before


async def read_list(
    db: Database,
    counts: CountCache,
    params: ListParams,
    policy: Node | None,
    count_budget_ms: int | None = None,
    few_matches: int = FEW_MATCHES,
    located_by_time: bool = False,
    versioned: bool = False,
) -> Listed:
    """A page of the list: its plan (search.plan), its read, on a replica when one is in use
    (lists and searches may be a little behind), and its count. `located_by_time`: the
    database has the index of the points with their time (repository.located_by_time).
    `versioned`: the change version is read first on the same connection, so that a page
    without records has one too (what was read is at least as new)."""
    few = plan.few_matches(db.dialect, few_matches)
    shape = replace(params, fields=None, q=None, count="default")  # what the statements read

    async def read(conn: AsyncConnection) -> Listed:
        before = await repository.fetch_change_version(conn) if versioned else None
        sizes = SearchCounts(conn, counts)
        first = await plan.choose_first(params.words, few, sizes.words, sizes.known)
        walk = plan.walks(db.dialect, first, few)
        statements = _statements(db.dialect, shape, policy, first, walk, located_by_time)
        seen = counts.seen
        page = None
        if plan.by_tiers(statements.shape, first):
            page = await _ranked_page(conn, counts, sizes, params, few)
        if page is None:
            page = await repository.read_page(conn, statements.query, statements.sql)
        counts.saw(page[1])
        primary = conn.engine is db.engine
        total = await _total(conn, counts, params, statements, page, seen, primary, count_budget_ms)
        return Listed(page, total, statements.distance, before)

    return await db.run_on_replica(read)


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
    """A page of the list as the API answers it: read (read_list), then its body."""
    listed = await read_list(
        db, counts, params, policy, count_budget_ms, few_matches, located_by_time
    )
    return _body(params, url, listed.page, listed.total, listed.distance)
