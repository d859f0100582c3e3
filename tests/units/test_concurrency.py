"""Concurrent writers on PostgreSQL: every update lands, none is lost."""

from __future__ import annotations

import asyncio

from tests.conftest import Api

WRITERS = 12
ROUNDS = 5
TEXT_FIELDS = (
    "location",
    "city",
    "subProjectId",
    "priceBase",
    "unitNameAr",
    "unitDesc",
    "unitDescAr",
    "unitShortDesc",
    "unitShortDescAr",
    "name",
    "type",
)


async def test_if_match_retry_loops_lose_no_increment(pg_api: Api) -> None:
    api = pg_api
    unit = await api.create_unit(guaranty=0)
    path = f"/api/v2/units/{unit['id']}"
    conflicts = 0

    async def increment() -> None:
        nonlocal conflicts
        for _ in range(ROUNDS):
            while True:
                current = await api.request("GET", path)
                value = current.json()["guaranty"] + 1
                response = await api.request(
                    "PATCH",
                    path,
                    json={"guaranty": value},
                    headers={"If-Match": current.headers["etag"]},
                )
                if response.status_code == 200:
                    break
                assert response.status_code == 412, response.text
                conflicts += 1

    await asyncio.gather(*(increment() for _ in range(WRITERS)))
    final = (await api.request("GET", path)).json()
    assert final["guaranty"] == WRITERS * ROUNDS
    assert final["version"] == 1 + WRITERS * ROUNDS
    history = (await api.request("GET", f"{path}/history?limit=200")).json()["data"]
    assert len(history) == 1 + WRITERS * ROUNDS
    assert conflicts > 0  # the writers really did collide


async def test_concurrent_patches_of_different_fields_all_land(pg_api: Api) -> None:
    api = pg_api
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}"
    responses = await asyncio.gather(
        *(api.request("PATCH", path, json={field: f"value of {field}"}) for field in TEXT_FIELDS)
    )
    assert all(response.status_code == 200 for response in responses)
    final = (await api.request("GET", path)).json()
    for field in TEXT_FIELDS:
        assert final[field] == f"value of {field}"
    assert final["version"] == 1 + len(TEXT_FIELDS)
    assert sorted(r.json()["version"] for r in responses) == list(range(2, 2 + len(TEXT_FIELDS)))
