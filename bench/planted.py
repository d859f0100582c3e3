"""Words planted in seeded units, so searches have tens, hundreds and thousands of matches
spread over the whole table (the seed's own words are each in a tenth of the units or more).

Random units, old and new alike, get a description holding the word through the API (PATCH),
so their search words are written as any change writes them. Planting is idempotent: a word
already in enough units is left alone, so `--reuse` keeps a database's planted words.
"""

from __future__ import annotations

import asyncio
import random

import httpx
from sqlalchemy import select

from units_api.db import Database, create_engine
from units_api.http.json import dumps
from units_api.sample_data import fake_unit
from units_api.units.tables import units

JSON = "application/json"

# The text each planted unit gets in unitDesc and unitDescAr, by how many units get it.
PLANTED = {
    "marina": (40, "Marina berth", "مرسى مارينا"),
    "waterfront": (400, "Waterfront promenade", "واجهة بحرية"),
    "resort": (4000, "Resort living", "منتجع سياحي"),
}


async def _count(client: httpx.AsyncClient, word: str) -> int:
    response = await client.get("/api/v2/units/", params={"q": word, "limit": "1"})
    response.raise_for_status()
    return int(response.json()["meta"]["total"])


async def _ids(url: str, count: int, seed: int) -> list[str]:
    db = Database(create_engine(url, pool_size=1))
    try:
        async with db.read() as conn:
            rows = list((await conn.execute(select(units.c.id))).scalars())
    finally:
        await db.dispose()
    return [str(unit_id) for unit_id in random.Random(seed).sample(rows, count)]


async def plant(base: str, key: str, database_url: str, concurrency: int = 16) -> dict[str, int]:
    """Plant the words unless every one is already in enough units; returns how many units
    hold each. Each word goes to units of its own (one sample, split)."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        found = {word: await _count(client, word) for word in PLANTED}
        if all(found[word] >= count for word, (count, _, _) in PLANTED.items()):
            return found
        ids = await _ids(database_url, sum(count for count, _, _ in PLANTED.values()), seed=1)
        gate = asyncio.Semaphore(concurrency)

        async def patch(unit_id: str, text: str, text_ar: str) -> None:
            async with gate:
                response = await client.patch(
                    f"/api/v2/units/{unit_id}", json={"unitDesc": text, "unitDescAr": text_ar}
                )
                response.raise_for_status()

        jobs = []
        for count, text, text_ar in PLANTED.values():
            jobs += [patch(unit_id, text, text_ar) for unit_id in ids[:count]]
            ids = ids[count:]
        await asyncio.gather(*jobs)
        return {word: await _count(client, word) for word in PLANTED}


# The one body every newer unit gets (as bench/write.py creates them): its words are in none
# of find.py's searches, so a newest-first search walks past all of them.
NEWER_BODY_SEED = 7


async def add_newer(base: str, key: str, count: int, concurrency: int = 16) -> int:
    """Create units of one body through the API, newer than every other, until there are
    `count` (a database reused keeps those of earlier runs); returns how many there are."""
    body = fake_unit(random.Random(NEWER_BODY_SEED))
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:

        async def existing() -> int:
            response = await client.get(
                "/api/v2/units/", params={"p": f'name=="{body["name"]}"', "limit": "1"}
            )
            response.raise_for_status()
            return int(response.json()["meta"]["total"])

        gate = asyncio.Semaphore(concurrency)

        async def create() -> None:
            async with gate:
                response = await client.post(
                    "/api/v2/units/", content=dumps(body), headers={"content-type": JSON}
                )
                response.raise_for_status()

        await asyncio.gather(*(create() for _ in range(count - await existing())))
        return await existing()
