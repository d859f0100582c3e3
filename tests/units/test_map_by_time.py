"""Pages of map searches in creation order: on PostgreSQL with the index of points and their
time (migration 0016) read through it, and the same pages, in the same order, as without it
(units that share one creation time included); on SQLite as PostgreSQL gives them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest

from tests.conftest import Api, fresh_postgres, start_api
from units_api.clock import format_time
from units_api.config import Settings
from units_api.filters.parser import parse_filter
from units_api.migrate import upgrade
from units_api.units.filtering import unit_filters

BOX = "unitLocation=within=(31.20,30.00,31.30,30.10)"
TRIANGLE = "unitLocation=inside=(31.20,30.00,31.30,30.00,31.25,30.10)"
# Across the antimeridian: two boxes, read as without the index.
AROUND = "unitLocation=within=(31.25,30.00,31.21,30.10)"
FILTERS = (BOX, TRIANGLE, f"{BOX};type==villa", f"type==villa;{TRIANGLE}", AROUND)


def _places(count: int) -> list[tuple[float, float]]:
    """Points in and around the box and the triangle, a few of them on their edges."""
    points = [(31.20 + (i % 7) * 0.02, 29.98 + (i // 7) * 0.03) for i in range(count)]
    return [*points, (31.20, 30.00), (31.25, 30.10), (31.30, 30.05)]


class Scope:
    """A test's units, in a sub-project of their own."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.name = f"by-time-{uuid.uuid4().hex[:12]}"

    async def add(self, count: int) -> list[str]:
        ids = []
        for i, (lng, lat) in enumerate(_places(count)):
            unit = await self.api.create_unit(
                subProjectId=self.name,
                type="villa" if i % 3 else "apartment",
                unitLocation={"type": "Point", "coordinates": [lng, lat]},
            )
            ids.append(unit["id"])
        return ids

    async def page(
        self, p: str, order: str, page: int, limit: int, key: str | None = None
    ) -> list[dict[str, Any]]:
        params = {"p": p, "order": order, "page": str(page), "limit": str(limit)}
        response = await self.api.request("GET", "/api/v2/units/", params=params, key=key)
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["data"]
        return found

    async def walk(self, p: str, order: str, limit: int, key: str | None = None) -> list[str]:
        """Every unit of the filter, page after page, in the list's order."""
        found: list[str] = []
        for page in range(1, 100):
            units = await self.page(p, order, page, limit, key)
            found += [unit["id"] for unit in units]
            if len(units) < limit:
                return found
        raise AssertionError("too many pages")

    async def expected(self, p: str, order: str) -> list[str]:
        """The filter's units in creation order, then by id, sorted here."""
        units = await self.page(p, "asc", 1, 100)
        ordered = sorted(units, key=lambda unit: (unit["createdAt"], unit["id"]))
        ids = [unit["id"] for unit in ordered]
        return ids[::-1] if order == "desc" else ids


async def _same_pages(api: Api, scope: Scope, key: str | None = None) -> None:
    """Each filter's pages, in both orders and several page sizes, are the units sorted by
    (createdAt, id), with and without the index where there is one."""
    ways = [True, False] if api.context.located_by_time else [False]
    for p in FILTERS:
        scoped = f"subProjectId=={scope.name};{p}"
        for order in ("desc", "asc"):
            expected = await scope.expected(scoped, order)
            assert len(expected) >= 5, p
            for by_time in ways:
                api.context.located_by_time = by_time
                for limit in (1, 3, 7):
                    assert await scope.walk(scoped, order, limit, key) == expected, (p, order)
    api.context.located_by_time = ways[0]


async def test_map_pages_in_creation_order(api: Api) -> None:
    if api.context.db.dialect == "postgresql":
        assert api.context.located_by_time  # built by the migrations
    scope = Scope(api)
    await scope.add(35)
    await _same_pages(api, scope)


@pytest.fixture
def own_postgres() -> Iterator[str]:
    with fresh_postgres("units_by_time") as url:
        upgrade(url)
        yield url


@pytest.fixture
async def own_api(own_postgres: str, files_dir: str) -> AsyncIterator[tuple[Api, str]]:
    """The app on a PostgreSQL database of its own, and that database's URL."""
    settings = Settings(
        database_url=own_postgres, access_log=False, db_pool_size=5, files_dir=files_dir
    )
    async for api in start_api(settings):
        yield api, own_postgres


async def _share_times(url: str, ids: list[str], group: int) -> None:
    """Every `group` units in a row get one creation time, in the row and its record."""
    conn = await asyncpg.connect(url)
    try:
        base = datetime(2026, 1, 1, tzinfo=UTC)
        for i, unit_id in enumerate(ids):
            when = base + timedelta(seconds=i // group)
            doc = orjson.loads(
                await conn.fetchval("SELECT doc FROM units WHERE id = $1", uuid.UUID(unit_id))
            )
            doc["createdAt"] = format_time(when)
            await conn.execute(
                "UPDATE units SET created_at = $2, doc = $3 WHERE id = $1",
                uuid.UUID(unit_id),
                when,
                orjson.dumps(doc).decode(),
            )
    finally:
        await conn.close()


async def test_units_created_at_one_time_come_in_the_same_order(
    own_api: tuple[Api, str],
) -> None:
    api, url = own_api
    assert api.context.located_by_time
    scope = Scope(api)
    ids = await scope.add(40)
    await _share_times(url, ids, 6)
    await _same_pages(api, scope)


async def test_a_keys_policy_on_the_map_in_creation_order(own_api: tuple[Api, str]) -> None:
    api, url = own_api
    scope = Scope(api)
    ids = await scope.add(30)
    await _share_times(url, ids, 4)
    key = await api.create_key("units:read", policy=f"subProjectId=={scope.name};{TRIANGLE}")
    expected = await scope.expected(f"subProjectId=={scope.name};{TRIANGLE};type==villa", "desc")
    for by_time in (True, False):
        api.context.located_by_time = by_time
        for limit in (2, 5):
            assert await scope.walk("type==villa", "desc", limit, key) == expected
            assert await scope.walk("type==villa", "asc", limit, key) == expected[::-1]


async def test_without_the_index_map_search_reads_as_before(
    own_api: tuple[Api, str], files_dir: str
) -> None:
    api, url = own_api
    scope = Scope(api)
    await scope.add(20)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("DROP INDEX ix_units_location_created_at")
    finally:
        await conn.close()
    settings = Settings(database_url=url, access_log=False, db_pool_size=2, files_dir=files_dir)
    async for again in start_api(settings):
        assert not again.context.located_by_time
        moved = Scope(again)
        moved.name = scope.name
        await _same_pages(again, moved)


@pytest.mark.parametrize(
    ("p", "walked"),
    [
        (BOX, True),
        (TRIANGLE, True),
        (f"type==villa;({BOX})", True),
        (AROUND, False),
        ("unitLocation=near=(31.2357,30.0444,1000)", False),
        (f"{BOX},type==villa", False),
    ],
)
def test_which_map_searches_walk_the_index(p: str, walked: bool) -> None:
    _, place = unit_filters(parse_filter(p, "p"), None, "postgresql")
    assert place.box is walked
