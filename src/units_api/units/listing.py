"""The list's query parameters: parsed and checked before any SQL is built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from starlette.requests import Request

from units_api.errors import InvalidParameter
from units_api.filters.parser import parse_filter
from units_api.filters.tree import Node
from units_api.http.paging import Limit, whole_number
from units_api.search.normalize import query_tokens
from units_api.units.fields import SORTABLE
from units_api.units.schemas import MAX_QUERY_LENGTH, PROJECTABLE

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
LIST_LIMIT = Limit(DEFAULT_LIMIT, MAX_LIMIT)
MAX_DEPTH = 10_000
# "default" is exact within the count budget (UNITS_API_COUNT_BUDGET_MS); "exact" was asked.
CountMode = Literal["default", "exact", "estimated", "none"]
COUNT_MODES = ("exact", "estimated", "none")  # what `Prefer: count=` may ask for


@dataclass(frozen=True, slots=True)
class SortKey:
    field: str
    descending: bool


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


def _csv(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",")]


def _sort(sort_by: str | None, order: str | None) -> tuple[SortKey, ...]:
    names = _csv(sort_by) if sort_by else ["createdAt"]
    for name in names:
        if name not in SORTABLE:
            raise InvalidParameter("sortBy", f"'{name}' is not sortable; use {', '.join(SORTABLE)}")
    if len(set(names)) != len(names):
        raise InvalidParameter("sortBy", "names a field twice")
    orders = _csv(order) if order else ["desc"]
    for value in orders:
        if value not in ("asc", "desc"):
            raise InvalidParameter("order", f"'{value}' is not asc or desc")
    if len(orders) == 1:
        orders = orders * len(names)
    if len(orders) != len(names):
        raise InvalidParameter("order", "give one order, or one per sortBy field")
    return tuple(SortKey(n, o == "desc") for n, o in zip(names, orders, strict=True))


def _fields(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    names = [name for name in _csv(raw) if name]
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
    return ListParams(
        limit=limit,
        page=page,
        sort=_sort(query.get("sortBy"), query.get("order")),
        fields=_fields(query.get("fields")),
        filter=parse_filter(raw_filter, "p") if raw_filter is not None else None,
        q=q,
        words=tuple(query_tokens(q or "")),
        count=_count_mode(request.headers.get("prefer")),
    )
