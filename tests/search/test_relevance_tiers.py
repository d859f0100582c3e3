"""A search alone by relevance is read tier by tier (search.rank.ranked_matches): its pages
are the ones the plain relevance order gives, tiers of few and of many alike, on both
databases, and a unit that has just entered a tier is on the next page read."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.conftest import Api, fresh_postgres, start_api
from units_api.config import Settings
from units_api.migrate import upgrade
from units_api.search.rank import relevance_tiers

NAMES = ["Garden Villa", "Villa", "Gardens Court", "Sea View", "Pool House", "Villas Park"]
DESCRIPTIONS = [
    "a garden and a pool",
    "two gardens",
    "quiet street",
    "sea view villas",
    "gardening shed",
    "pool",
    "villa with garden and sea view",
]
# Searchable fields of the second test's units, away from the first test's searches.
ELSEWHERE = {"type": "office", "city": "Giza"}
SEARCHES = ["garden", "gardens villa", "villa garden pool", "sea", "villas", "garde"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def tier_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('tiers') / 'units.db'}"
        upgrade(url)
        yield url
        return
    with fresh_postgres("units_tiers") as url:
        upgrade(url)
        yield url


@pytest.fixture
async def tier_api(tier_database: str, files_dir: str) -> AsyncIterator[Api]:
    # Tiers of at most 3 units are read through the indexes, larger ones walked.
    settings = Settings(
        database_url=tier_database,
        access_log=False,
        db_pool_size=5,
        files_dir=files_dir,
        search_few_matches=3,
    )
    async for instance in start_api(settings):
        yield instance


async def pages(api: Api, limit: int, **params: Any) -> list[str]:
    found: list[str] = []
    for page in range(1, 100):
        response = await api.request(
            "GET",
            "/api/v2/units/",
            params={"sortBy": "relevance", "limit": str(limit), "page": str(page), **params},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        found += [unit["id"] for unit in body["data"]]
        if body["links"]["next"] is None:
            assert body["meta"]["total"] == len(found)
            return found
    raise AssertionError("more pages than units")


async def test_tiered_pages_are_the_relevance_order(tier_api: Api) -> None:
    scope = f"t-{uuid.uuid4().hex[:8]}"
    chosen = random.Random(2026)
    for _ in range(40):
        await tier_api.create_unit(
            name=chosen.choice(NAMES), unitDesc=chosen.choice(DESCRIPTIONS), subProjectId=scope
        )
    for q in SEARCHES:
        assert relevance_tiers(tuple(q.split()), tier_api.context.db.dialect)
        for order in ("desc", "asc"):
            for limit in (4, 7):
                tiered = await pages(tier_api, limit, q=q, order=order)
                # A filter takes the list off the tiered reading: the plain relevance order.
                plain = await pages(tier_api, limit, q=q, order=order, p=f"subProjectId=={scope}")
                assert tiered == plain, (q, order, limit)
                assert tiered
    beyond = await tier_api.request(
        "GET", "/api/v2/units/", params={"q": "garden", "sortBy": "relevance", "page": "90"}
    )
    assert beyond.status_code == 200, beyond.text
    assert beyond.json()["data"] == []
    assert beyond.json()["meta"]["total"] == len(await pages(tier_api, 20, q="garden"))
    counted = [key for key in tier_api.context.counts._entries if len(key) == 4]
    assert counted, "the tiers' sizes were counted"


async def test_a_unit_entering_an_empty_tier_is_found_at_once(tier_api: Api) -> None:
    word = f"lagoon{uuid.uuid4().hex[:6]}"
    # No word of the other test's searches: its unfiltered lists see these units too.
    for _ in range(5):
        await tier_api.create_unit(name="Lodge", unitDesc=f"by the {word}s", **ELSEWHERE)
    before = await pages(tier_api, 20, q=word)
    assert len(before) == 5
    # The best tier (the word as written, in the name) was empty until now.
    newest = await tier_api.create_unit(name=f"{word} Lodge", unitDesc="calm", **ELSEWHERE)
    after = await pages(tier_api, 20, q=word)
    assert after[0] == newest["id"]
    assert sorted(after[1:]) == sorted(before)
