"""The query endpoint: filters, search, projection, keyset cursors, and aggregates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import ColumnElement, and_, distinct, func

from units_api.db import Database, format_time
from units_api.errors import ValidationFailed
from units_api.filters.parser import parse_filter
from units_api.filters.tree import Node
from units_api.http.json import load_stored
from units_api.http.paging import NUMBER, TEXT, TIME, UUID, Keyset, Kind, nullable
from units_api.search.index import search_condition
from units_api.units import repository
from units_api.units.fields import AGGREGATABLE, GROUPABLE, NUMERIC, TIMES, SortKey
from units_api.units.filtering import unit_condition
from units_api.units.schemas import (
    Aggregate,
    QueryRequest,
)
from units_api.units.tables import units

DEFAULT_SORT = (SortKey("createdAt", True),)
_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "sum": func.sum,
    "avg": func.avg,
    "min": func.min,
    "max": func.max,
}


def _condition(db: Database, request: QueryRequest, policy: Node | None) -> ColumnElement[bool]:
    tree = parse_filter(request.filter, "filter") if request.filter is not None else None
    return and_(
        unit_condition(tree, db.dialect, "filter"),
        unit_condition(policy, db.dialect, "policy"),
        search_condition(request.q, db.dialect, units.c.id),
    )


async def run_query(db: Database, request: QueryRequest, policy: Node | None) -> dict[str, Any]:
    condition = _condition(db, request, policy)
    if request.aggregates:
        return await _aggregates(db, request, condition)
    if request.groupBy:
        raise ValidationFailed([("groupBy", "needs at least one aggregate")])
    return await _page(db, request, condition)


# Keyset pages.


def _sort(request: QueryRequest) -> tuple[SortKey, ...]:
    if not request.sort:
        return DEFAULT_SORT
    return tuple(SortKey(spec.field, spec.order == "desc") for spec in request.sort)


def _kind(field: str) -> Kind:
    if field in TIMES:
        return nullable(TIME)
    if field in NUMERIC:
        return nullable(NUMBER)
    return nullable(TEXT)


def _keyset(sort: tuple[SortKey, ...]) -> Keyset:
    """The cursors of one sort order: its sort values, then the unit id."""
    order = ",".join(f"{key.field}:{'d' if key.descending else 'a'}" for key in sort)
    return Keyset(f"query:{order}", (*(_kind(key.field) for key in sort), UUID))


def _project(doc: str, fields: list[str] | None) -> Any:
    if fields is None:
        return orjson.Fragment(doc)
    record = load_stored(doc)
    return {name: record.get(name) for name in dict.fromkeys(["id", *fields])}


async def _page(
    db: Database, request: QueryRequest, condition: ColumnElement[bool]
) -> dict[str, Any]:
    sort = _sort(request)
    keyset = _keyset(sort)
    after = keyset.decode(request.cursor)
    if after is not None:
        *values, last_id = after
        condition = and_(condition, repository.keyset_after(sort, values, last_id, db.dialect))
    async with db.read() as conn:
        rows = await repository.keyset_page(conn, condition, sort, request.limit + 1)
    shown, next_cursor = keyset.page(
        rows, request.limit, lambda row: [*(row[f"k{i}"] for i in range(len(sort))), row["id"]]
    )
    return {
        "data": [_project(row["doc"], request.fields) for row in shown],
        "nextCursor": next_cursor,
    }


# Aggregates.


def _measure(alias: str, spec: Aggregate) -> Any:
    path = f"aggregates.{alias}.field"
    if spec.field is None:
        if spec.fn != "count":
            raise ValidationFailed([(path, f"{spec.fn} needs a field")])
        return func.count()
    column_name = AGGREGATABLE.get(spec.field)
    if column_name is None:
        raise ValidationFailed([(path, f"must be one of: {', '.join(AGGREGATABLE)}")])
    column = units.c[column_name]
    if spec.fn in ("sum", "avg") and spec.field not in NUMERIC:
        raise ValidationFailed([(path, f"{spec.fn} needs a number: {', '.join(NUMERIC)}")])
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


async def _aggregates(
    db: Database, request: QueryRequest, condition: ColumnElement[bool]
) -> dict[str, Any]:
    for name in ("cursor", "sort", "fields"):
        if getattr(request, name):
            raise ValidationFailed([(name, "does not apply to aggregates")])
    clashes = set(request.aggregates) & set(request.groupBy)
    if clashes:
        raise ValidationFailed(
            [(f"aggregates.{a}", "clashes with a groupBy field") for a in clashes]
        )
    measures = [(alias, _measure(alias, spec)) for alias, spec in request.aggregates.items()]
    groups = [(name, GROUPABLE[name]) for name in request.groupBy]
    async with db.read() as conn:
        rows = await repository.aggregate(conn, condition, groups, measures, request.limit)
    functions = {alias: spec.fn for alias, spec in request.aggregates.items()}
    return {
        "data": [
            {key: _output(value, functions.get(key)) for key, value in row.items()} for row in rows
        ]
    }
