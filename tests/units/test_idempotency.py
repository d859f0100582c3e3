"""Idempotency-Key on create: replay, reuse with another body, in-flight twin."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import orjson
from sqlalchemy import func, select

from tests.conftest import Api, unit_body
from units_api.clock import utcnow
from units_api.http.idempotency import request_fingerprint
from units_api.http.tables import idempotency_keys
from units_api.units.tables import units


async def count_units(api: Api) -> int:
    async with api.context.db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(units))).scalar_one())


async def test_same_key_and_body_replays_the_first_response(api: Api) -> None:
    body = orjson.dumps(unit_body(price=10))
    headers = {"Idempotency-Key": "create-1", "content-type": "application/json"}
    first = await api.request("POST", "/api/v2/units/", content=body, headers=headers)
    before = await count_units(api)
    second = await api.request("POST", "/api/v2/units/", content=body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert second.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert second.headers["location"] == first.headers["location"]
    assert second.headers["etag"] == first.headers["etag"]
    assert await count_units(api) == before


async def test_same_key_with_another_body_is_422(api: Api) -> None:
    headers = {"Idempotency-Key": "create-2"}
    first = await api.request("POST", "/api/v2/units/", json=unit_body(price=1), headers=headers)
    assert first.status_code == 201
    other = await api.request("POST", "/api/v2/units/", json=unit_body(price=2), headers=headers)
    assert other.status_code == 422


async def test_keys_are_per_api_key(api: Api) -> None:
    other_key = await api.create_key("units:write")
    headers = {"Idempotency-Key": "shared-name"}
    first = await api.request("POST", "/api/v2/units/", json=unit_body(), headers=headers)
    second = await api.request(
        "POST", "/api/v2/units/", json=unit_body(), headers=headers, key=other_key
    )
    assert second.status_code == 201 and second.json()["id"] != first.json()["id"]


async def test_failed_request_releases_the_key(api: Api) -> None:
    headers = {"Idempotency-Key": "create-3"}
    bad = await api.request("POST", "/api/v2/units/", json={"name": "x"}, headers=headers)
    assert bad.status_code == 422
    fixed = unit_body(name="x")
    retry = await api.request("POST", "/api/v2/units/", json=fixed, headers=headers)
    assert retry.status_code == 201
    assert "idempotent-replayed" not in retry.headers
    replay = await api.request("POST", "/api/v2/units/", json=fixed, headers=headers)
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["id"] == retry.json()["id"]


async def claim(api: Api, key: str, body: bytes, age: timedelta) -> None:
    """Leave the claim a request still in progress (or one that died) would leave."""
    async with api.context.db.transaction() as conn:
        await conn.execute(
            idempotency_keys.insert().values(
                owner=api.admin_key_id,
                key=key,
                state="in_flight",
                created_at=utcnow() - age,
                request_hash=request_fingerprint("POST", "/api/v2/units", body),
            )
        )


@asynccontextmanager
async def in_progress(api: Api, key: str) -> AsyncIterator[None]:
    """The claim of `key` as its request holds it while it runs: on PostgreSQL locked by the
    operation's transaction (on SQLite a claim is in flight by its age alone)."""
    if api.context.db.dialect != "postgresql":
        yield
        return
    async with api.context.db.transaction() as conn:
        await conn.execute(
            select(idempotency_keys.c.key)
            .where(idempotency_keys.c.owner == api.admin_key_id, idempotency_keys.c.key == key)
            .with_for_update()
        )
        yield


async def test_in_flight_claim_is_409_and_an_abandoned_one_is_taken_over(api: Api) -> None:
    body = orjson.dumps(unit_body())
    headers = {"content-type": "application/json"}
    await claim(api, "busy", body, timedelta(seconds=1))
    async with in_progress(api, "busy"):
        twin = await api.request(
            "POST", "/api/v2/units/", content=body, headers={**headers, "Idempotency-Key": "busy"}
        )
    assert twin.status_code == 409
    assert twin.headers["content-type"] == "application/problem+json"
    await claim(api, "dead", body, timedelta(minutes=10))
    taken = await api.request(
        "POST", "/api/v2/units/", content=body, headers={**headers, "Idempotency-Key": "dead"}
    )
    assert taken.status_code == 201


async def test_a_claim_its_transaction_left_unlocked_is_taken_over_at_once(pg_api: Api) -> None:
    """PostgreSQL: a claim in flight that no operation holds belongs to a request whose
    transaction ended without an answer (its connection cut at commit, its release lost):
    repeated, the create is done, once."""
    api = pg_api
    body = orjson.dumps(unit_body(name="left behind"))
    headers = {"content-type": "application/json", "Idempotency-Key": "left"}
    await claim(api, "left", body, timedelta(seconds=1))
    before = await count_units(api)
    done = await api.request("POST", "/api/v2/units/", content=body, headers=headers)
    assert done.status_code == 201, done.text
    replay = await api.request("POST", "/api/v2/units/", content=body, headers=headers)
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["id"] == done.json()["id"]
    assert await count_units(api) == before + 1


async def test_concurrent_twins_create_one_unit(pg_api: Api) -> None:
    api = pg_api
    body = orjson.dumps(unit_body(name="twin"))
    headers = {"Idempotency-Key": "race", "content-type": "application/json"}
    async with api.context.db.transaction() as conn:
        # Hold the units table so the first request stays in flight.
        await conn.exec_driver_sql("LOCK TABLE units IN EXCLUSIVE MODE")
        first = asyncio.create_task(
            api.request("POST", "/api/v2/units/", content=body, headers=headers)
        )
        await asyncio.sleep(0.5)
        twin = await api.request("POST", "/api/v2/units/", content=body, headers=headers)
        assert twin.status_code == 409
    assert (await first).status_code == 201
    replay = await api.request("POST", "/api/v2/units/", content=body, headers=headers)
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["id"] == (await first).json()["id"]


async def test_bad_idempotency_key_is_400(api: Api) -> None:
    response = await api.request(
        "POST", "/api/v2/units/", json=unit_body(), headers={"Idempotency-Key": "x" * 300}
    )
    assert response.status_code == 400


async def test_housekeeping_sweeps_records_past_their_window(api: Api) -> None:
    body = orjson.dumps(unit_body())
    for key in ("sweep-old", "sweep-new"):
        headers = {"Idempotency-Key": key, "content-type": "application/json"}
        response = await api.request("POST", "/api/v2/units/", content=body, headers=headers)
        assert response.status_code == 201
    old = utcnow() - timedelta(hours=25)
    async with api.context.db.transaction() as conn:
        await conn.execute(
            idempotency_keys.update()
            .where(idempotency_keys.c.key == "sweep-old")
            .values(created_at=old)
        )
    assert await api.context.idempotency.sweep() >= 1
    async with api.context.db.read() as conn:
        kept = await conn.execute(
            select(idempotency_keys.c.key).where(
                idempotency_keys.c.key.in_(["sweep-old", "sweep-new"])
            )
        )
        assert [row[0] for row in kept] == ["sweep-new"]
