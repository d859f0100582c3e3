"""Remembered aggregates: answered again from memory while no unit has changed, never stale,
never shared between different questions or policies, and shared by processes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import select, update

from tests.conftest import READY_UNIT, REDIS_URL, Api, need_service, start_api
from units_api.config import Settings
from units_api.units.remembering import IDENTITY, ResultCache, prune
from units_api.units.tables import remembered_results, units


def by_city_and_type(scope: str, **extra: Any) -> dict[str, Any]:
    return {
        "filter": f"subProjectId=={scope}",
        "groupBy": ["city", "type"],
        "aggregates": {"n": {"fn": "count"}, "avgPrice": {"fn": "avg", "field": "price"}},
        **extra,
    }


async def ask(api: Api, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    response = await api.request("POST", "/api/v2/units/query", json=body, key=key)
    assert response.status_code == 200, response.text
    return response


async def populate(api: Api) -> str:
    scope = f"rm-{uuid.uuid4().hex[:10]}"
    for city, kind, price in (
        ("Cairo", "villa", 1000),
        ("Cairo", "villa", 2000),
        ("Cairo", "apartment", 500),
        ("Giza", "villa", 3000),
    ):
        await api.create_unit(subProjectId=scope, city=city, type=kind, price=price)
    return scope


async def questions(api: Api) -> set[str]:
    """The questions of the table of shared answers (housekeeping may drop some any time)."""
    async with api.context.db.read() as conn:
        return set((await conn.execute(select(remembered_results.c.question))).scalars())


def counters(cache: ResultCache) -> tuple[int, int, int, int]:
    return cache.hits, cache.waited, cache.shared, cache.computed


async def test_asked_again_unchanged_it_is_answered_from_memory(api: Api) -> None:
    scope = await populate(api)
    cache = api.context.results
    hits, _, _, computed = counters(cache)
    first = await ask(api, by_city_and_type(scope))
    assert first.json()["data"] == [
        {"city": "Cairo", "type": "apartment", "n": 1, "avgPrice": 500.0},
        {"city": "Cairo", "type": "villa", "n": 2, "avgPrice": 1500.0},
        {"city": "Giza", "type": "villa", "n": 1, "avgPrice": 3000.0},
    ]
    assert cache.computed == computed + 1
    for _ in range(3):
        again = await ask(api, by_city_and_type(scope))
        assert again.content == first.content
    assert (cache.hits, cache.computed) == (hits + 3, computed + 1)


async def test_any_write_to_any_unit_makes_the_next_answer_fresh(api: Api) -> None:
    scope = await populate(api)
    body = {
        "filter": f"subProjectId=={scope}",
        "groupBy": ["status", "availability"],
        "aggregates": {"n": {"fn": "count"}, "total": {"fn": "sum", "field": "price"}},
    }
    cache = api.context.results

    async def answer() -> list[dict[str, Any]]:
        computed = cache.computed
        data: list[dict[str, Any]] = (await ask(api, body)).json()["data"]
        assert cache.computed == computed + 1, "answered from memory after a write"
        return data

    assert await answer() == [
        {"status": "draft", "availability": "available", "n": 4, "total": 6500}
    ]
    await api.create_unit(subProjectId="elsewhere", price=1)  # outside the filter
    assert await answer() == [
        {"status": "draft", "availability": "available", "n": 4, "total": 6500}
    ]
    created = await api.create_unit(subProjectId=scope, price=100)
    unit_path = f"/api/v2/units/{created['id']}"
    assert (await answer())[0]["n"] == 5
    patched = await api.request("PATCH", unit_path, json={"price": 200})
    assert patched.status_code == 200, patched.text
    assert (await answer())[0]["total"] == 6700
    bulk = {"units": [{"id": created["id"], "price": 300}]}
    assert (await api.request("PUT", "/api/v2/units/bulk/update", json=bulk)).status_code == 200
    assert (await answer())[0]["total"] == 6800
    sold = await api.request(
        "PUT", f"/api/v2/units/availability-actions/{created['id']}", json={"action": "sell"}
    )
    assert sold.status_code == 200, sold.text
    assert {row["availability"]: row["n"] for row in await answer()} == {"available": 4, "sold": 1}
    archived = await api.request(
        "PUT", f"/api/v2/units/publishing-actions/{created['id']}", json={"action": "archive"}
    )
    assert archived.status_code == 200, archived.text
    assert {row["status"] for row in await answer()} == {"draft", "archived"}
    assert (await api.request("DELETE", unit_path)).status_code == 204
    assert await answer() == [
        {"status": "draft", "availability": "available", "n": 4, "total": 6500}
    ]
    async with api.context.db.transaction() as conn:  # a writer outside the service
        await conn.execute(update(units).where(units.c.sub_project_id == scope).values(price=1))
    assert (await answer())[0]["total"] == 4


async def test_a_scheduled_publication_makes_the_next_answer_fresh(api: Api) -> None:
    scope = f"rm-{uuid.uuid4().hex[:10]}"
    unit = await api.create_unit(**{**READY_UNIT, "subProjectId": scope})
    at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    scheduled = await api.request(
        "PUT",
        f"/api/v2/units/publishing-actions/{unit['id']}",
        json={"action": "schedule", "at": at},
    )
    assert scheduled.status_code == 200, scheduled.text
    body = {
        "filter": f"subProjectId=={scope}",
        "groupBy": ["status"],
        "aggregates": {"n": {"fn": "count"}},
    }
    assert (await ask(api, body)).json()["data"] == [{"status": "scheduled", "n": 1}]
    for _ in range(100):  # the app's own scheduler publishes it
        await asyncio.sleep(0.1)
        record = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
        if record["publishing"]["status"] == "published":
            break
    assert (await ask(api, body)).json()["data"] == [{"status": "published", "n": 1}]


async def test_policies_filters_and_searches_never_share_an_answer(api: Api) -> None:
    scope = await populate(api)
    await api.create_unit(subProjectId=scope, city="Giza", type="villa", name="Sea Tower")
    giza = await api.create_key("units:read", policy="city==Giza")
    cairo = await api.create_key("units:read", policy="city==Cairo")
    total = {"filter": f"subProjectId=={scope}", "aggregates": {"n": {"fn": "count"}}}
    cache = api.context.results
    computed = cache.computed
    for _ in range(2):  # the second round is remembered, each for its own question
        assert (await ask(api, total)).json()["data"] == [{"n": 5}]
        assert (await ask(api, total, key=giza)).json()["data"] == [{"n": 2}]
        assert (await ask(api, total, key=cairo)).json()["data"] == [{"n": 3}]
        assert (await ask(api, {**total, "q": "tower"})).json()["data"] == [{"n": 1}]
        narrower = {**total, "filter": f"subProjectId=={scope};type==villa"}
        assert (await ask(api, narrower)).json()["data"] == [{"n": 4}]
        assert (await ask(api, {**total, "limit": 1})).json()["data"] == [{"n": 5}]
        by_city = {**total, "groupBy": ["city"]}
        assert [row["n"] for row in (await ask(api, by_city)).json()["data"]] == [3, 2]
        assert (await ask(api, {**by_city, "limit": 1})).json()["data"] == [
            {"city": "Cairo", "n": 3}
        ]
        assert cache.computed == computed + 8


async def test_an_invalid_question_is_never_answered_from_memory(api: Api) -> None:
    scope = await populate(api)
    await ask(api, by_city_and_type(scope))
    for extra, where in (
        ({"sort": [{"field": "price"}]}, "sort"),
        ({"fields": ["name"]}, "fields"),
    ):
        response = await api.request(
            "POST", "/api/v2/units/query", json=by_city_and_type(scope, **extra)
        )
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["field"] == where
    # A bad filter is still named before a bad aggregate.
    body = {"filter": "colour==red", "aggregates": {"s": {"fn": "avg"}}}
    response = await api.request("POST", "/api/v2/units/query", json=body)
    assert response.status_code == 400
    assert response.json()["parameter"] == "filter"


async def test_no_group_is_remembered_too(api: Api) -> None:
    scope = f"rm-{uuid.uuid4().hex[:10]}"
    body = by_city_and_type(scope)
    cache = api.context.results
    assert (await ask(api, body)).json() == {"data": []}
    hits = cache.hits
    assert (await ask(api, body)).json() == {"data": []}
    assert cache.hits == hits + 1
    await api.create_unit(subProjectId=scope, city="Cairo", type="villa", price=10)
    assert (await ask(api, body)).json()["data"] == [
        {"city": "Cairo", "type": "villa", "n": 1, "avgPrice": 10.0}
    ]


async def test_concurrent_identical_requests_compute_once(api: Api) -> None:
    scope = await populate(api)
    cache = api.context.results
    _, waited, _, computed = counters(cache)
    answers = await asyncio.gather(*(ask(api, by_city_and_type(scope)) for _ in range(32)))
    assert len({answer.content for answer in answers}) == 1
    assert cache.computed == computed + 1
    assert cache.waited > waited


async def test_the_answers_are_the_bytes_computing_gives(api: Api, files_dir: str) -> None:
    scope = f"rm-{uuid.uuid4().hex[:10]}"
    await api.create_unit(subProjectId=scope, city="Cairo", price=1234567.89, surface=120.5)
    await api.create_unit(subProjectId=scope, city="Cairo", price=0.11, surface=80)
    await api.create_unit(subProjectId=scope, city="Giza", price=None)
    body = {
        "filter": f"subProjectId=={scope}",
        "groupBy": ["city"],
        "aggregates": {
            "n": {"fn": "count"},
            "total": {"fn": "sum", "field": "price"},
            "avgSurface": {"fn": "avg", "field": "surface"},
            "first": {"fn": "min", "field": "createdAt"},
            "cities": {"fn": "countDistinct", "field": "city"},
        },
    }
    first = await ask(api, body)
    remembered = await ask(api, body)
    settings = api.context.settings.model_copy(update={"result_cache_bytes": 0})
    async for plain in start_api(settings):
        computed = plain.context.results.computed
        fresh = await ask(plain, body)
        assert plain.context.results.computed == computed + 1
    assert remembered.content == first.content == fresh.content
    rows = first.json()["data"]
    assert rows[0]["avgSurface"] == 100.25 and rows[1]["avgSurface"] is None
    assert rows[0]["first"].endswith("Z") and len(rows[0]["first"]) == 24
    if api.context.db.dialect == "postgresql":  # exact sums
        assert b'"total":1234568.00' in first.content


async def test_two_app_instances_share_the_answer(api: Api) -> None:
    scope = await populate(api)
    await ask(api, by_city_and_type(scope))
    async for other in start_api(api.context.settings):
        cache = other.context.results
        answer = await ask(other, by_city_and_type(scope))
        assert (cache.shared, cache.computed) == (1, 0)
        assert answer.json()["data"][0] == {
            "city": "Cairo",
            "type": "apartment",
            "n": 1,
            "avgPrice": 500.0,
        }
        await ask(other, by_city_and_type(scope))
        assert cache.hits == 1
        await other.create_unit(subProjectId=scope, city="Cairo", type="apartment", price=700)
    answer = await ask(api, by_city_and_type(scope))
    assert answer.json()["data"][0] == {
        "city": "Cairo",
        "type": "apartment",
        "n": 2,
        "avgPrice": 600.0,
    }


async def test_processes_asking_together_compute_once(pg_api: Api) -> None:
    scope = await populate(pg_api)
    async for other in start_api(pg_api.context.settings):
        caches = (pg_api.context.results, other.context.results)
        before = sum(cache.computed for cache in caches)
        answers = await asyncio.gather(
            *(ask(api, by_city_and_type(scope)) for api in (pg_api, other) for _ in range(16))
        )
        assert len({answer.content for answer in answers}) == 1
        assert sum(cache.computed for cache in caches) == before + 1


async def test_one_stored_answer_per_question_and_the_dead_ones_pruned(api: Api) -> None:
    scope = await populate(api)
    before = await questions(api)
    await ask(api, by_city_and_type(scope))
    added = await questions(api) - before
    assert len(added) == 1
    for price in (10, 20):
        await api.create_unit(subProjectId=scope, city="Cairo", type="villa", price=price)
        await ask(api, by_city_and_type(scope))
        assert await questions(api) - before == added  # replaced, not added
    await api.create_unit(subProjectId="elsewhere")
    assert await prune(api.context.db) >= 1
    assert await questions(api) == {IDENTITY}


async def test_memory_stays_within_its_budget(api: Api) -> None:
    scope = await populate(api)
    settings = api.context.settings.model_copy(update={"result_cache_bytes": 1200})
    async for small in start_api(settings):
        cache = small.context.results
        for limit in range(1, 11):
            await ask(small, by_city_and_type(scope, limit=limit))
            assert 0 < cache.held <= 1200
        hits = cache.hits
        await ask(small, by_city_and_type(scope, limit=10))
        assert cache.hits == hits + 1  # the newest stays
        await ask(small, by_city_and_type(scope, limit=1))
        assert cache.hits == hits + 1  # the oldest left


@pytest.fixture
def redis_settings(settings: Settings) -> Settings:
    need_service(REDIS_URL, "redis")
    return settings.model_copy(update={"redis_url": REDIS_URL})


async def test_answers_are_shared_through_redis(redis_settings: Settings) -> None:
    assert REDIS_URL
    async for first in start_api(redis_settings):
        scope = await populate(first)
        before = await questions(first)
        answer = await ask(first, by_city_and_type(scope))
        async for second in start_api(redis_settings):
            again = await ask(second, by_city_and_type(scope))
            assert again.content == answer.content
            cache = second.context.results
            assert (cache.shared, cache.computed) == (1, 0)
            assert await questions(second) <= before  # the database stored nothing
            await second.create_unit(subProjectId=scope, city="Giza", type="villa", price=5000)
            fresh = await ask(second, by_city_and_type(scope))
            assert fresh.json()["data"][-1] == {
                "city": "Giza",
                "type": "villa",
                "n": 2,
                "avgPrice": 4000.0,
            }
            assert cache.computed == 1
    redis = Redis.from_url(REDIS_URL)
    try:
        assert await redis.keys("units-api:answer:*")
    finally:
        await redis.aclose()


async def test_an_unreachable_redis_still_answers(settings: Settings) -> None:
    unreachable = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    async for api in start_api(unreachable):
        scope = await populate(api)
        cache = api.context.results
        first = await ask(api, by_city_and_type(scope))
        again = await ask(api, by_city_and_type(scope))
        assert again.content == first.content
        assert (cache.hits, cache.computed) == (1, 1)
        await api.create_unit(subProjectId=scope, city="Giza", type="villa", price=5000)
        assert (await ask(api, by_city_and_type(scope))).json()["data"][-1]["n"] == 2
