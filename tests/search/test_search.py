"""Search over HTTP on both databases: the contract's Arabic cases, mixed queries, and a
differential test against a reference that applies the same rules in Python."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Api, start_api
from units_api.config import Settings
from units_api.sample_data import fake_unit
from units_api.search.normalize import query_tokens, record_tokens
from units_api.search.stem import stem
from units_api.search.words import index_text


async def search(api: Api, scope: str, q: str) -> set[str]:
    response = await api.request(
        "GET", "/api/v2/units/", params={"p": f"subProjectId=={scope}", "q": q, "limit": "100"}
    )
    assert response.status_code == 200, response.text
    return {unit["id"] for unit in response.json()["data"]}


async def test_arabic_and_english_queries(api: Api) -> None:
    scope = f"s-{uuid.uuid4().hex[:8]}"
    flat = await api.create_unit(
        name="Sunny Apartment", unitNameAr="شقّة مشمسة", city="Cairo", subProjectId=scope
    )
    city = await api.create_unit(
        name="Garden Villa", unitDescAr="فيلا في مدينتي الجديدة", subProjectId=scope
    )
    cafe = await api.create_unit(name="Café ÉLAN", type="retail", subProjectId=scope)
    assert await search(api, scope, "شقة") == {flat["id"]}
    assert await search(api, scope, "شقّة") == {flat["id"]}
    assert await search(api, scope, "مدينتى") == {city["id"]}
    assert await search(api, scope, "cafe elan") == {cafe["id"]}
    assert await search(api, scope, "sun شق") == {flat["id"]}  # mixed, prefixes
    assert await search(api, scope, "sunny garden") == set()  # every word must match
    assert await search(api, scope, "APART") == {flat["id"]}
    assert await search(api, scope, "  ,. ") == {flat["id"], city["id"], cafe["id"]}


async def test_stemmed_forms_find_each_other(api: Api) -> None:
    """The contract's examples (section 5): articles, attached prepositions, suffixes and
    English stems, on both sides; a preposition is dropped only before 3 letters."""
    scope = f"s-{uuid.uuid4().hex[:8]}"
    texts = {
        "cairo": "شقة في القاهرة",
        "in_cairo": "تقع بالقاهرة",
        "and_cairo": "والقاهرة الجديدة",
        "garden": "فيلا بحديقة",
        "the_garden": "تطل على الحديقة",
        "lake": "إطلالة على البحيرة",
        "free": "دخول حر",
        "sea": "قرب البحر",
        "flat": "Sunny apartment",
        "gardens": "Two gardens",
        "penthouse": "Penthouse with roof",
    }
    ids = {}
    for key, text in texts.items():
        unit = await api.create_unit(name="Listing", unitDescAr=text, subProjectId=scope)
        ids[key] = unit["id"]

    def found(*keys: str) -> set[str]:
        return {ids[key] for key in keys}

    assert await search(api, scope, "قاهرة") == found("cairo", "in_cairo", "and_cairo")
    assert await search(api, scope, "القاهرة") == found("cairo", "in_cairo", "and_cairo")
    assert await search(api, scope, "حديقة") == found("garden", "the_garden")
    assert await search(api, scope, "بحيرة") == found("lake")
    assert await search(api, scope, "بحر") == found("sea")  # not حر
    assert await search(api, scope, "apartments") == found("flat")
    assert await search(api, scope, "garden") == found("gardens")
    assert await search(api, scope, "pentho") == found("penthouse")
    assert await search(api, scope, "قاه") == found("cairo", "in_cairo", "and_cairo")


async def test_search_follows_updates_and_deletes(api: Api) -> None:
    scope = f"s-{uuid.uuid4().hex[:8]}"
    unit = await api.create_unit(name="Old Name", subProjectId=scope)
    path = f"/api/v2/units/{unit['id']}"
    await api.request("PATCH", path, json={"name": "Brand New"})
    assert await search(api, scope, "old") == set()
    assert await search(api, scope, "brand") == {unit["id"]}
    await api.request("DELETE", path)
    assert await search(api, scope, "brand") == set()


async def test_search_text_has_a_length_limit(api: Api) -> None:
    response = await api.request("GET", "/api/v2/units/", params={"q": "a" * 501})
    assert response.status_code == 400 and response.json()["parameter"] == "q"


def reference(records: list[dict[str, Any]], q: str) -> set[str]:
    """A word matches a lexeme that is its stem or starts with the word as typed."""
    words = query_tokens(q)
    found = set()
    for record in records:
        have = index_text(record).lexemes
        if all(any(t == stem(w) or t.startswith(w) for t in have) for w in words):
            found.add(record["id"])
    return found


@pytest.mark.parametrize("seed", [5])
async def test_search_agrees_with_the_reference(api: Api, seed: int) -> None:
    scope = f"s-{uuid.uuid4().hex[:8]}"
    rng = random.Random(seed)
    records = [
        await api.create_unit(**{**fake_unit(rng), "subProjectId": scope}) for _ in range(30)
    ]
    vocabulary = sorted({token for record in records for token in record_tokens(record)})
    queries: list[str] = []

    @settings(
        max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(
        st.lists(
            st.sampled_from(vocabulary).flatmap(
                lambda word: st.sampled_from([word, word[: max(1, len(word) // 2)], word.upper()])
            ),
            min_size=1,
            max_size=3,
        )
    )
    def collect(words: list[str]) -> None:
        queries.append(" ".join(words))

    collect()
    discriminating = 0
    for q in queries:
        expected = reference(records, q)
        assert await search(api, scope, q) == expected, q
        discriminating += 0 < len(expected) < len(records)
    assert discriminating > len(queries) // 4


async def test_search_alone_counts_exactly(api: Api) -> None:
    word = f"zq{uuid.uuid4().hex[:8]}"
    for index in range(3):
        await api.create_unit(name=f"{word} home {index}")
    await api.create_unit(name=f"{word}x elsewhere")
    response = await api.request("GET", "/api/v2/units/", params={"q": word, "limit": "2"})
    assert response.json()["meta"]["total"] == 4  # a prefix: zq…x counts too
    exact = await api.request("GET", "/api/v2/units/", params={"q": f"{word} home"})
    assert exact.json()["meta"]["total"] == 3


async def pages(api: Api, params: dict[str, str]) -> tuple[list[str], set[int]]:
    """Every page's ids in turn, two by two, and the totals the pages gave."""
    seen: list[str] = []
    totals: set[int] = set()
    for page in range(1, 10):
        response = await api.request(
            "GET", "/api/v2/units/", params={**params, "limit": "2", "page": str(page)}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        seen += [unit["id"] for unit in body["data"]]
        totals.add(body["meta"]["total"])
        if body["links"]["next"] is None:
            return seen, totals
    raise AssertionError("no last page")


async def queried(api: Api, q: str, order: str) -> list[str]:
    """The query endpoint's answer: the general condition, with no plan chosen for it."""
    body = {"q": q, "sort": [{"field": "createdAt", "order": order}], "limit": 100}
    response = await api.request("POST", "/api/v2/units/query", json=body)
    assert response.status_code == 200, response.text
    return [unit["id"] for unit in response.json()["data"]]


@pytest.fixture
async def few_api(settings: Settings) -> AsyncIterator[Api]:
    """A search with a word at most 4 units have is read through the index and sorted."""
    async for instance in start_api(settings.model_copy(update={"search_few_matches": 4})):
        yield instance


async def same_pages(api: Api, q: str, order: str, expected: list[str]) -> None:
    expected = expected if order == "asc" else expected[::-1]
    alone = await pages(api, {"q": q, "order": order})
    # A filter true for every unit takes the general page and count queries.
    general = await pages(api, {"q": q, "order": order, "p": "name!=no-such-name"})
    assert alone == general == (expected, {len(expected)}), q
    assert await queried(api, q, order) == expected, q


@pytest.mark.parametrize("order", ["desc", "asc"])
@pytest.mark.parametrize("made", [3, 9], ids=["few", "many"])
async def test_search_alone_pages_as_the_general_path(few_api: Api, order: str, made: int) -> None:
    # On PostgreSQL a search alone walks the search table in creation order, or, with a word
    # at most 4 units have here, sorts what the index finds for that word (checking the
    # others, "tow" here, on each); both must page and count exactly as the general path,
    # before and after the units change.
    word = f"zq{uuid.uuid4().hex[:8]}"
    ids = [(await few_api.create_unit(name=f"{word} tower {i}"))["id"] for i in range(made)]
    await few_api.create_unit(name="Unrelated tower")
    await few_api.create_unit(name=f"{word} elsewhere")
    for q in (f"{word} tow", f"tow {word}"):
        await same_pages(few_api, q, order, ids)
    await few_api.request("PATCH", f"/api/v2/units/{ids[1]}", json={"name": f"{word} new tower"})
    await few_api.request("PATCH", f"/api/v2/units/{ids[0]}", json={"name": f"{word} gone"})
    response = await few_api.request("DELETE", f"/api/v2/units/{ids[-1]}")
    assert response.status_code == 204
    joined = (await few_api.create_unit(unitDesc=f"{word} tower at last"))["id"]
    for q in (f"{word} tow", f"tow {word}"):
        await same_pages(few_api, q, order, [*ids[1:-1], joined])


@pytest.mark.parametrize("order", ["desc", "asc"])
async def test_words_many_units_have_but_few_together(few_api: Api, order: str) -> None:
    # Each word is in 8 units, both in 3: the first page walks in order, then, the search's
    # total known, the pages after it read both words through the index and sort.
    one, two = (f"zq{uuid.uuid4().hex[:8]}" for _ in range(2))
    both = [(await few_api.create_unit(name=f"{one} {two} {i}"))["id"] for i in range(3)]
    for i in range(5):
        await few_api.create_unit(name=f"{one} apart {i}")
        await few_api.create_unit(name=f"{two} apart {i}")
    await same_pages(few_api, f"{one} {two}", order, both)
    await few_api.request("DELETE", f"/api/v2/units/{both[1]}")
    await same_pages(few_api, f"{one} {two}", order, [both[0], both[2]])
