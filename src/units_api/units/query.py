"""The query endpoint: filters, search, projection, keyset cursors, and aggregates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import ColumnElement, and_, distinct, func
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time
from units_api.db import Database
from units_api.errors import ValidationFailed
from units_api.filters.maps import MapPlan
from units_api.filters.parser import parse_filter
from units_api.filters.tree import Node
from units_api.http.json import dumps
from units_api.http.paging import (
    FLOAT,
    INTEGER,
    NUMBER,
    TEXT,
    TIME,
    UUID,
    Keyset,
    Kind,
    nullable,
)
from units_api.search.index import search_condition
from units_api.search.normalize import query_tokens
from units_api.units import repository
from units_api.units.dashboards import Dashboards
from units_api.units.fields import (
    AGGREGATABLE,
    DISTANCE,
    GROUPABLE,
    NUMERIC,
    RELEVANCE,
    TIMES,
    WHOLE,
    SortKey,
    project,
)
from units_api.units.filtering import unit_filters
from units_api.units.remembering import Answer, ResultCache, question_key
from units_api.units.repository import NOTHING_COMPUTED, Computed
from units_api.units.schemas import (
    Aggregate,
    QueryRequest,
)
from units_api.units.sorting import (
    by_distance,
    by_relevance,
    check_distance,
    check_relevance,
    with_recency,
)
from units_api.units.tables import units

DEFAULT_SORT = (SortKey("createdAt", True),)
_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "sum": func.sum,
    "avg": func.avg,
    "min": func.min,
    "max": func.max,
}


def _filtered(
    db: Database, request: QueryRequest, policy: Node | None
) -> tuple[ColumnElement[bool], MapPlan]:
    tree = parse_filter(request.filter, "filter") if request.filter is not None else None
    return unit_filters(tree, policy, db.dialect, "filter")


async def run_query(
    db: Database,
    request: QueryRequest,
    policy: Node | None,
    results: ResultCache | None = None,
    dashboards: Dashboards | None = None,
) -> dict[str, Any]:
    """A page of units, or the aggregates' rows (remembered in `results` when given; from the
    dashboards' copy when it can answer)."""
    if request.aggregates:
        return await _aggregates(db, request, policy, results, dashboards)
    filtered, place = _filtered(db, request, policy)
    condition = and_(filtered, search_condition(request.q, db.dialect, units.c.id))
    if request.groupBy:
        raise ValidationFailed([("groupBy", "needs at least one aggregate")])
    sort = _sort(request)
    words = tuple(query_tokens(request.q or ""))
    check_relevance(sort, words, "sort")
    tree = parse_filter(request.filter, "filter") if request.filter is not None else None
    check_distance(sort, tree, "sort", "filter")
    distance = by_distance(sort, place.near)
    # A map search finds its page in the index of the points (repository.page_query).
    from_index = place.located
    if any(key.field == RELEVANCE for key in sort):
        relevance = by_relevance(words, db.dialect)
        computed = Computed({**relevance.keys, **distance.keys}, relevance.source, distance.shown)
        return await _page(db, request, sort, filtered, computed, from_index)
    return await _page(db, request, sort, condition, distance, from_index)


# Keyset pages.


def _sort(request: QueryRequest) -> tuple[SortKey, ...]:
    if not request.sort:
        return DEFAULT_SORT
    return with_recency(tuple(SortKey(spec.field, spec.descending) for spec in request.sort))


def _kind(field: str) -> Kind:
    if field == RELEVANCE:
        return INTEGER
    if field == DISTANCE:
        return FLOAT
    if field in TIMES:
        return nullable(TIME)
    if field in WHOLE:
        return nullable(INTEGER)
    if field in NUMERIC:
        return nullable(NUMBER)
    return nullable(TEXT)


def _keyset(sort: tuple[SortKey, ...]) -> Keyset:
    """The cursors of one sort order: its sort values, then the unit id."""
    order = ",".join(f"{key.field}:{'d' if key.descending else 'a'}" for key in sort)
    return Keyset(f"query:{order}", (*(_kind(key.field) for key in sort), UUID))


async def _page(
    db: Database,
    request: QueryRequest,
    sort: tuple[SortKey, ...],
    condition: ColumnElement[bool],
    computed: Computed = NOTHING_COMPUTED,
    from_index: bool = False,
) -> dict[str, Any]:
    keyset = _keyset(sort)
    after = keyset.decode(request.cursor)
    if after is not None:
        *values, last_id = after
        after_last = repository.keyset_after(sort, values, last_id, db.dialect, computed)
        condition = and_(condition, after_last)

    async def read(conn: AsyncConnection) -> list[RowMapping]:
        return await repository.keyset_page(
            conn, condition, sort, request.limit + 1, computed, from_index
        )

    rows = await db.run_on_replica(read)  # a page may be a little behind: a replica's
    shown, next_cursor = keyset.page(
        rows, request.limit, lambda row: [*(row[f"k{i}"] for i in range(len(sort))), row["id"]]
    )
    names = [key.field for key in sort]
    added = {field: f"k{names.index(name)}" for name, field in computed.shown.items()}
    fields = None if request.fields is None else tuple(dict.fromkeys(["id", *request.fields]))
    return {
        "data": [
            project(row["doc"], fields, {field: row[k] for field, k in added.items()})
            for row in shown
        ],
        "nextCursor": next_cursor,
    }


# Aggregates.


def _check(alias: str, spec: Aggregate) -> None:
    path = f"aggregates.{alias}.field"
    if spec.field is None:
        if spec.fn != "count":
            raise ValidationFailed([(path, f"{spec.fn} needs a field")])
        return
    if spec.field not in AGGREGATABLE:
        raise ValidationFailed([(path, f"must be one of: {', '.join(AGGREGATABLE)}")])
    if spec.fn in ("sum", "avg") and spec.field not in NUMERIC:
        raise ValidationFailed([(path, f"{spec.fn} needs a number: {', '.join(NUMERIC)}")])


def _measure(spec: Aggregate) -> Any:
    """The SQL of a checked aggregate (built only to compute it: it costs more than a
    remembered answer)."""
    if spec.field is None:
        return func.count()
    column = units.c[AGGREGATABLE[spec.field]]
    if spec.fn == "count":
        return func.count(column)
    if spec.fn == "countDistinct":
        return func.count(distinct(column))
    return _FUNCTIONS[spec.fn](column)


def _output(value: Any, fn: str | None) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if fn == "avg" and value is not None:
        return float(value)
    return value


def _check_aggregates(request: QueryRequest) -> None:
    for name in ("cursor", "sort", "fields"):
        if getattr(request, name):
            raise ValidationFailed([(name, "does not apply to aggregates")])
    clashes = set(request.aggregates) & set(request.groupBy)
    if clashes:
        raise ValidationFailed(
            [(f"aggregates.{a}", "clashes with a groupBy field") for a in clashes]
        )
    for alias, spec in request.aggregates.items():
        _check(alias, spec)


def _question(request: QueryRequest, policy: Node | None) -> str:
    """All an aggregate's answer depends on besides the units, the key's policy included."""
    return question_key(
        [(alias, spec.fn, spec.field) for alias, spec in request.aggregates.items()],
        request.groupBy,
        request.limit,
        request.filter,
        query_tokens(request.q or ""),
        repr(policy),  # a filter tree's repr is its values
    )


async def _aggregates(
    db: Database,
    request: QueryRequest,
    policy: Node | None,
    results: ResultCache | None,
    dashboards: Dashboards | None,
) -> dict[str, Any]:
    try:
        _check_aggregates(request)
    except ValidationFailed:
        _filtered(db, request, policy)  # a bad filter is named first, as it always was
        raise
    names = [*request.groupBy, *request.aggregates]
    functions: list[str | None] = [None] * len(request.groupBy)
    functions += [spec.fn for spec in request.aggregates.values()]

    async def compute(primary: AsyncConnection) -> Answer:
        if dashboards is not None:
            # Caught up on the primary: the copy holds every change before the request.
            found = await dashboards.answer(primary, request, policy)
            if found is not None:
                return found
        # On a replica when one is in use: an answer is remembered with the version it was
        # read at, so one read a little behind is given again only to requests that read
        # that version or an older one.
        return await db.run_on_replica(aggregate, primary)

    async def aggregate(conn: AsyncConnection) -> Answer:
        condition = and_(
            _filtered(db, request, policy)[0], search_condition(request.q, db.dialect, units.c.id)
        )
        groups = [(name, GROUPABLE[name]) for name in request.groupBy]
        measures = [(alias, _measure(spec)) for alias, spec in request.aggregates.items()]
        version, rows = await repository.aggregate(conn, condition, groups, measures, request.limit)
        rendered = (zip(names, functions, row, strict=True) for row in rows)
        data = [{name: _output(value, fn) for name, fn, value in row} for row in rendered]
        return version, dumps(data)

    if results is None and dashboards is None:
        body = (await db.run_on_replica(aggregate))[1]
    elif results is None:
        async with db.read() as conn:
            body = (await compute(conn))[1]
    else:
        body = await results.answer(_question(request, policy), compute)
    return {"data": orjson.Fragment(body)}
