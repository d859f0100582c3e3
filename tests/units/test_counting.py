"""Exact totals: the change version moves with every write, so a remembered total is never stale."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from sqlalchemy import and_, func, select, update

from tests.conftest import Api, fresh_postgres, start_api
from units_api.config import Settings
from units_api.db import Database, create_engine
from units_api.filters.parser import parse_filter
from units_api.migrate import upgrade
from units_api.search.index import count_matches, search_condition
from units_api.units.counting import CHANGE_VERSION, CountCache
from units_api.units.filtering import unit_condition
from units_api.units.seeding import seed_units
from units_api.units.tables import units


async def version(api: Api) -> int:
    async with api.context.db.read() as conn:
        return int((await conn.execute(select(CHANGE_VERSION))).scalar_one())


async def total(api: Api, query: str) -> int:
    # One unit a page, so the page is not the last and the total is counted.
    response = await api.request("GET", f"/api/v2/units/?limit=1&{query}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["meta"]["count"] == "exact"
    value: int = body["meta"]["total"]
    return value


async def test_every_write_moves_the_version_whoever_makes_it(api: Api) -> None:
    start = await version(api)
    created = await api.create_unit(name="Versioned Villa")
    after_create = await version(api)
    assert after_create > start
    async with api.context.db.transaction() as conn:
        # A write that bypasses the service entirely still moves it (a trigger).
        await conn.execute(
            update(units).where(units.c.id == uuid.UUID(created["id"])).values(name="By hand")
        )
    after_hand = await version(api)
    assert after_hand > after_create
    response = await api.request("DELETE", f"/api/v2/units/{created['id']}")
    assert response.status_code == 204
    assert await version(api) > after_hand
    unchanged = await version(api)
    await total(api, "p=city==Nowhere")
    assert await version(api) == unchanged


async def test_totals_are_reused_only_while_nothing_changed(api: Api) -> None:
    scope = f"sp-{uuid.uuid4().hex[:10]}"
    word = f"zq{uuid.uuid4().hex[:8]}"
    made = [await api.create_unit(name=f"Unit {word} {i}", subProjectId=scope) for i in range(3)]
    query = f"p=subProjectId=={scope}"
    counts = api.context.counts
    assert await total(api, query) == 3
    hits = counts.hits
    assert await total(api, query) == 3
    assert counts.hits == hits + 1
    await api.create_unit(name=f"Unit {word} 3", subProjectId=scope)
    assert await total(api, query) == 4
    assert await total(api, f"q={word}") == 4
    async with api.context.db.transaction() as conn:
        await conn.execute(
            update(units)
            .where(units.c.id == uuid.UUID(made[0]["id"]))
            .values(sub_project_id="elsewhere")
        )
    assert await total(api, query) == 3
    # A page past the end reads no version; the total is counted afresh.
    assert await total(api, query + "&page=50") == 3
    response = await api.request("DELETE", f"/api/v2/units/{made[1]['id']}")
    assert response.status_code == 204
    assert await total(api, query) == 2
    assert await total(api, f"q={word}") == 3


async def test_policy_and_search_are_part_of_the_question(api: Api) -> None:
    scope = f"sp-{uuid.uuid4().hex[:10]}"
    await api.create_unit(name="Policy Villa", subProjectId=scope, city="Giza")
    await api.create_unit(name="Policy Villa", subProjectId=scope, city="Cairo")
    narrow = await api.create_key("units:read", policy="city==Giza")
    query = f"p=subProjectId=={scope}"
    assert await total(api, query) == 2
    response = await api.request("GET", f"/api/v2/units/?{query}", key=narrow)
    assert response.json()["meta"]["total"] == 1
    assert await total(api, query + "&q=policy") == 2
    assert await total(api, query + "&q=nomatchword") == 0


async def test_the_last_page_gives_the_total_without_a_count(api: Api) -> None:
    scope = f"sp-{uuid.uuid4().hex[:10]}"
    for i in range(3):
        await api.create_unit(name=f"Last {i}", subProjectId=scope)
    counted = api.context.counts.counted

    async def page_total(query: str) -> int:
        response = await api.request("GET", f"/api/v2/units/?p=subProjectId=={scope}&{query}")
        assert response.json()["meta"]["count"] == "exact"
        value: int = response.json()["meta"]["total"]
        return value

    for query, expected in (("limit=2&page=2", 3), ("limit=3", 3), ("q=zqnosuchword", 0)):
        assert await page_total(query) == expected
    assert api.context.counts.counted == counted
    assert await page_total("limit=2&page=3") == 3  # past the end: counted
    assert api.context.counts.counted == counted + 1
    # Remembered like a count, an empty page's total too (it chooses how a search is read).
    words = (f"zq{uuid.uuid4().hex[:8]}", "tower")
    response = await api.request("GET", "/api/v2/units/", params={"q": " ".join(words)})
    assert response.json()["meta"]["total"] == 0
    assert api.context.counts.remembered((None, None, words)) == 0


async def test_requests_asking_together_share_one_count(api: Api) -> None:
    scope = f"sp-{uuid.uuid4().hex[:10]}"
    for i in range(3):
        await api.create_unit(name=f"Together {i}", subProjectId=scope)
    counted = api.context.counts.counted
    totals = await asyncio.gather(*(total(api, f"p=subProjectId=={scope}") for _ in range(8)))
    assert totals == [3] * 8
    assert api.context.counts.counted == counted + 1


def test_cache_forgets_the_least_recently_used_and_can_be_off() -> None:
    cache = CountCache(size=2)
    cache.put("a", 1, 10)
    cache.put("b", 1, 20)
    assert cache.get("a", 1) == 10
    cache.put("c", 1, 30)
    assert cache.get("b", 1) is None
    assert cache.get("a", 1) == 10 and cache.get("c", 1) == 30
    assert cache.get("a", 2) is None and cache.get("a", None) is None
    off = CountCache(size=0)
    off.put("a", 1, 10)
    assert off.get("a", 1) is None


async def test_sizes_stop_at_a_cap_and_hold_until_a_newer_version_is_seen(api: Api) -> None:
    word = f"zq{uuid.uuid4().hex[:8]}"
    for i in range(3):
        await api.create_unit(name=f"{word} {i}")
    cache, db = CountCache(plan_seconds=0), api.context.db
    alone, other = (None, None, (word,)), ("other", word)

    async def size(key: tuple[object, ...], cap: int) -> int:
        async with db.read() as conn:
            capped = partial(count_matches, (word,), db.dialect, cap)
            return await cache.size(conn, key, capped, cap)

    assert await size(alone, 2) == 2  # stopped at the cap: not a total
    assert cache.remembered(alone) is None
    assert await size(other, 10) == 3  # below the cap: the exact total, remembered
    assert cache.remembered(other) == 3
    await api.create_unit(name=f"{word} more")
    assert await size(other, 10) == 3  # this cache has not read the change yet
    async with db.read() as conn:
        cache.saw(int((await conn.execute(select(CHANGE_VERSION))).scalar_one()))
    assert cache.remembered(other) is None
    assert await size(other, 10) == 4


async def test_a_size_serves_plans_for_a_while_whatever_changed(api: Api) -> None:
    word = f"zq{uuid.uuid4().hex[:8]}"
    for i in range(3):
        await api.create_unit(name=f"{word} {i}")
    now = [100.0]
    cache, db = CountCache(plan_seconds=1.0, clock=lambda: now[0]), api.context.db
    key = (None, None, (word,))
    runs = 0

    def capped() -> Any:
        nonlocal runs
        runs += 1
        return count_matches((word,), db.dialect, 10)

    async def size() -> int:
        async with db.read() as conn:
            return await cache.size(conn, key, capped, 10)

    async def see_the_version() -> None:
        async with db.read() as conn:
            cache.saw(int((await conn.execute(select(CHANGE_VERSION))).scalar_one()))

    assert await size() == 3 and runs == 1
    await api.create_unit(name=f"{word} more")
    await see_the_version()
    now[0] += 0.9
    assert await size() == 3 and runs == 1  # the plan's size, not recounted
    assert cache.remembered(key) is None  # never given as a total at the newer version
    now[0] += 0.2
    assert await size() == 4 and runs == 2  # past plan_seconds: counted again
    assert cache.remembered(key) == 4


CITIES = ("Giza", "Cairo", "Aswan")


async def direct_count(api: Api, scope: str, city_filter: str, word: str | None) -> int:
    """The same question counted afresh, without the service's list."""
    db = api.context.db
    tree = parse_filter(f"subProjectId=={scope};{city_filter}")
    condition = and_(
        unit_condition(tree, db.dialect), search_condition(word, db.dialect, units.c.id)
    )
    async with db.read() as conn:
        query = select(func.count()).select_from(units).where(condition)
        return int((await conn.execute(query)).scalar_one())


@pytest.mark.parametrize("seed", [1, 2])
async def test_totals_match_a_fresh_count_after_random_writes(api: Api, seed: int) -> None:
    rng = random.Random(seed)
    actions = ["create", "delete", "patch", "by hand", "ask", "search"]
    steps = [
        (rng.choice(actions), rng.randrange(20), rng.randrange(len(CITIES))) for _ in range(40)
    ]
    scope = f"sp-{uuid.uuid4().hex[:10]}"
    word = f"zq{uuid.uuid4().hex[:8]}"
    alive: list[str] = []
    asked = 0
    for action, index, city in steps:
        target = alive[index % len(alive)] if alive else None
        if action == "create" or target is None:
            made = await api.create_unit(name=f"{word} u", subProjectId=scope, city=CITIES[city])
            alive.append(made["id"])
        elif action == "delete":
            assert (await api.request("DELETE", f"/api/v2/units/{target}")).status_code == 204
            alive.remove(target)
        elif action == "patch":
            path = f"/api/v2/units/{target}"
            response = await api.request("PATCH", path, json={"city": CITIES[city]})
            assert response.status_code == 200, response.text
        elif action == "by hand":
            async with api.context.db.transaction() as conn:
                await conn.execute(
                    update(units).where(units.c.id == uuid.UUID(target)).values(city=CITIES[city])
                )
        else:
            city_filter = f"city=={CITIES[city]}" if index % 2 else f"city!={CITIES[city]}"
            q = word if action == "search" else None
            params = {"p": f"subProjectId=={scope};{city_filter}", **({"q": q} if q else {})}
            for _ in range(2):  # the second answer may come from what the first remembered
                response = await api.request("GET", "/api/v2/units/", params=params)
                assert response.status_code == 200, response.text
                expected = await direct_count(api, scope, city_filter, q)
                assert response.json()["meta"]["total"] == expected, (action, params)
                asked += 1
    assert asked >= 10


@pytest.fixture
def seeded_postgres() -> Iterator[str]:
    """A database of its own with 3,000 seeded units (PostgreSQL only)."""

    async def seed(url: str) -> None:
        db = Database(create_engine(url, 2))
        await seed_units(db, 3000, seed=3)
        await db.dispose()

    with fresh_postgres("units_budget") as url:
        upgrade(url)
        asyncio.run(seed(url))
        yield url


async def test_an_unasked_total_past_its_budget_is_estimated(seeded_postgres: str) -> None:
    # One connection, so each request reuses the one the timed-out count ran on.
    settings = Settings(
        database_url=seeded_postgres,
        access_log=False,
        db_pool_size=1,
        db_fast_pool_size=0,
        count_budget_ms=5,
    )
    async for api in start_api(settings):
        nested = {"p": "floorsPlan.rooms=ge=2"}  # reads every record's JSON: far past 5 ms
        response = await api.request("GET", "/api/v2/units/", params=nested)
        assert response.status_code == 200, response.text
        meta = response.json()["meta"]
        assert meta["count"] == "estimated" and meta["total"] > 0
        async with api.context.db.read() as conn:
            timeout = (await conn.exec_driver_sql("SHOW statement_timeout")).scalar_one()
            condition = unit_condition(parse_filter(nested["p"]), "postgresql")
            query = select(func.count()).select_from(units).where(condition)
            expected = int((await conn.execute(query)).scalar_one())
        assert timeout == "0"  # put back on the pooled connection
        asked = await api.request(
            "GET", "/api/v2/units/", params=nested, headers={"Prefer": "count=exact"}
        )
        assert asked.json()["meta"] == {
            **meta,
            "count": "exact",
            "total": expected,
            "totalPages": asked.json()["meta"]["totalPages"],
        }
        # Cheap totals are unaffected by the budget.
        plain = await api.request("GET", "/api/v2/units/")
        assert plain.json()["meta"]["count"] == "exact"
        assert plain.json()["meta"]["total"] == 3000
