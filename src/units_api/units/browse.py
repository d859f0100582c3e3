"""The unit list (GET /api/v2/units/): a page of records with counts and links."""

from __future__ import annotations

import math
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson
from sqlalchemy import ColumnElement, ScalarSelect, and_
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.datastructures import URL

from units_api.db import Database
from units_api.filters.sql import to_condition
from units_api.filters.tree import Node
from units_api.http.json import load_stored
from units_api.search.index import Words, count_matches, match, newest_matches
from units_api.search.plan import FEW_MATCHES, first_words
from units_api.units import repository
from units_api.units.counting import CountCache
from units_api.units.listing import ListParams
from units_api.units.tables import units


def _project(doc: str, fields: tuple[str, ...] | None) -> Any:
    if fields is None:
        return orjson.Fragment(doc)
    record = load_stored(doc)
    return {name: record.get(name) for name in fields}


def _links(url: URL, page: int, last: int | None, has_next: bool) -> dict[str, str | None]:
    # As URL.include_query_params(page=n) gives, with the other parameters encoded once.
    others = [(k, v) for k, v in parse_qsl(url.query, keep_blank_values=True) if k != "page"]
    base = str(url.replace(query=urlencode(others) + "&" if others else ""))

    def at(number: int) -> str:
        return f"{base}{'' if others else '?'}page={number}"

    return {
        "self": at(page),
        "first": at(1),
        "prev": at(page - 1) if page > 1 else None,
        "next": at(page + 1) if has_next else None,
        "last": at(last) if last is not None else None,
    }


def link_header(links: dict[str, str | None]) -> str:
    return ", ".join(f'<{href}>; rel="{rel}"' for rel, href in links.items() if href)


def _newest_matches_alone(db: Database, params: ListParams, policy: Node | None) -> bool:
    """A search alone in creation order: PostgreSQL answers it from the search table."""
    return (
        db.dialect == "postgresql"
        and params.filter is None
        and policy is None
        and len(params.sort) == 1
        and params.sort[0].field == "createdAt"
        and bool(params.words)
    )


def _exact_count(
    params: ListParams,
    policy: Node | None,
    condition: ColumnElement[bool],
    first: Words,
    dialect: str,
) -> ScalarSelect[Any]:
    """The cheapest exact count: the counters, the search index alone, or the query."""
    if params.filter is None and policy is None:
        if not params.words:
            return repository.count_all()
        return count_matches(params.words, dialect, first=first)
    return repository.count(condition)


async def _first_words(conn: AsyncConnection, counts: CountCache, words: Words, few: int) -> Words:
    """PostgreSQL: the words to read through the search index first (see plan.first_words),
    from how many units have each, as remembered or counted up to past `few`."""
    dialect = conn.dialect.name
    if dialect != "postgresql" or not words or few < 1:
        return ()
    cap = few + 1
    sizes = [
        await counts.size(conn, (None, None, (w,)), partial(count_matches, (w,), dialect, cap), cap)
        for w in words
    ]
    return first_words(words, sizes, counts.remembered((None, None, words)), few)


async def list_units(
    db: Database,
    counts: CountCache,
    params: ListParams,
    url: URL,
    policy: Node | None,
    count_budget_ms: int | None = None,
    few_matches: int = FEW_MATCHES,
) -> dict[str, Any]:
    offset = (params.page - 1) * params.limit
    async with db.read() as conn:
        first = await _first_words(conn, counts, params.words, few_matches)
        condition = and_(
            to_condition(params.filter, db.dialect),
            to_condition(policy, db.dialect, "policy"),
            match(params.words, db.dialect, units.c.id, first),
        )
        if _newest_matches_alone(db, params, policy):
            descending = params.sort[0].descending
            hits = newest_matches(params.words, descending, params.limit + 1, offset, first)
            query = repository.hits_query(hits, descending)
        else:
            query = repository.page_query(
                condition, params.sort, params.limit + 1, offset, db.dialect
            )
        seen = counts.seen
        docs, version = await repository.read_page(conn, query)
        counts.saw(version)
        mode: str = params.count
        total: int | None = None
        key = (params.filter, policy, params.words)
        if mode == "estimated" and db.dialect == "postgresql":
            total = await repository.estimate(conn, condition)
        elif mode != "none" and len(docs) <= params.limit and (docs or offset == 0):
            # The last page: what came before it and what is on it, read in one statement; an
            # empty one holds at the version seen before it, if that is still the current one.
            mode, total = "exact", offset + len(docs)
            counts.put(key, seen if version is None else version, total)
        elif mode != "none":
            # Unasked, an exact total may take count_budget_ms; asked for, as long as it takes.
            budget = count_budget_ms if mode == "default" else None
            mode = "exact"
            counting = partial(_exact_count, params, policy, condition, first, db.dialect)
            total = await counts.total(conn, key, version, counting, budget)
            if total is None:
                mode = "estimated"
                total = await repository.estimate(conn, condition)
    has_next = len(docs) > params.limit
    pages = max(1, math.ceil(total / params.limit)) if total is not None else None
    return {
        "data": [_project(doc, params.fields) for doc in docs[: params.limit]],
        "meta": {
            "page": params.page,
            "limit": params.limit,
            "total": total,
            "totalPages": pages,
            "count": mode,
        },
        "links": _links(url, params.page, pages, has_next),
    }
