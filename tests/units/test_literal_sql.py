"""A map search's page statement with its values written in (`repository.literal_sql`): only
when every value is a number or a time, never text; on PostgreSQL it reads the same rows as
the statement with parameters."""

from __future__ import annotations

import math
from typing import Any

from tests.conftest import Api
from units_api.filters.parser import parse_filter
from units_api.units import listing, repository
from units_api.units.listing import ListParams
from units_api.units.sorting import parse_sort

POLYGON = "unitLocation=inside=(31.20,30.00,31.30,30.00,31.30,30.10,31.25,30.12,31.20,30.10)"


def _page(p: str, sort: str | None = None, page: int = 1) -> Any:
    params = ListParams(
        limit=5,
        page=page,
        sort=parse_sort(sort, None),
        fields=None,
        filter=parse_filter(p, "p"),
        q=None,
        words=(),
        count="default",
    )
    return listing._statements("postgresql", params, None, (), False, True)


def test_numbers_are_written_in_and_text_never() -> None:
    for p, sort in (
        (POLYGON, None),
        (POLYGON, "price"),
        ("unitLocation=near=(31.2,30.0,900)", "distance"),
    ):
        sql = _page(p, sort).sql
        assert sql is not None and "$" not in sql and "%(" not in sql, (p, sort)
    # A text value keeps the statement's parameters, quoting or not.
    for p in (f"{POLYGON};city==Cairo", f"name==\"x' OR '1'='1\";{POLYGON}"):
        assert _page(p).sql is None
    assert _page("city==Cairo").sql is None  # not a map search
    # A polygon of many vertices keeps its parameters: its text would be too long.
    turns = [2 * math.pi * i / 250 for i in range(250)]
    vertices = [(31.2 + 0.05 * math.cos(a), 30.0 + 0.05 * math.sin(a)) for a in turns]
    many = "unitLocation=inside=(" + ",".join(f"{x:.6f},{y:.6f}" for x, y in vertices) + ")"
    assert _page(many).sql is None


async def test_the_written_in_statement_reads_what_the_parameters_do(pg_api: Api) -> None:
    for i in range(12):
        point = [31.21 + (i % 4) * 0.02, 30.01 + (i // 4) * 0.03]
        await pg_api.create_unit(
            price=1000 + i * 7, unitLocation={"type": "Point", "coordinates": point}
        )
    async with pg_api.context.db.read() as conn:
        for p, sort, page in (
            (POLYGON, None, 1),
            (POLYGON, None, 2),
            (POLYGON, "price", 2),
            ("unitLocation=near=(31.25,30.05,5000)", "distance", 1),
            ("unitLocation=within=(31.2,30.0,31.3,30.1)", None, 2),
        ):
            statements = _page(p, sort, page)
            assert statements.sql is not None
            with_parameters = await repository.read_page(conn, statements.query)
            written_in = await repository.read_page(conn, statements.query, statements.sql)
            assert with_parameters[0], (p, sort, page)  # a page of units, not an empty one
            assert written_in == with_parameters, (p, sort, page)
