"""The kept pages stay within their budget, the least recently used going first."""

from __future__ import annotations

import asyncio

import pytest

from units_api.website.cache import Made, Page, PageCache


def page(size: int) -> Page:
    return Page("live", b"x" * size, '"t"', None)


def kept(cache: PageCache, count: int) -> set[int]:
    return {number for number in range(count) if cache.get(("unit", number)) is not None}


def test_the_least_recently_used_pages_go_first_within_the_budget() -> None:
    cache = PageCache(budget=10_000)  # each page costs its 1,000 bytes and 200 more
    for number in range(4):
        cache.put(("unit", number), page(1_000))
    assert cache.get(("unit", 0)) is not None  # now the most recently used
    for number in range(4, 9):
        cache.put(("unit", number), page(1_000))
    assert kept(cache, 9) == {0, 2, 3, 4, 5, 6, 7, 8}  # 9 x 1,200 > 10,000: unit 1 went
    cache.put(("big",), page(5_000))  # more than an eighth of the budget: not kept
    assert cache.get(("big",)) is None


async def test_a_page_asked_while_it_is_made_is_made_once() -> None:
    cache = PageCache()
    calls = 0
    release = asyncio.Event()

    async def make() -> Made:
        nonlocal calls
        calls += 1
        await release.wait()
        return page(100), ("unit", "kept")

    waiting = [asyncio.create_task(cache.made(("unit", "asked"), make)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    made = await asyncio.gather(*waiting)
    assert calls == 1
    assert all(found is made[0] for found in made)
    assert cache.get(("unit", "kept")) is made[0]  # kept by the key the maker gave


async def test_when_the_making_fails_the_waiting_requests_fail_with_it() -> None:
    cache = PageCache()
    calls = 0
    release = asyncio.Event()

    async def make() -> Made:
        nonlocal calls
        calls += 1
        await release.wait()
        raise OSError("the database went away")

    waiting = [asyncio.create_task(cache.made(("unit", 1), make)) for _ in range(3)]
    await asyncio.sleep(0)
    release.set()
    failed = await asyncio.gather(*waiting, return_exceptions=True)
    assert [type(error) for error in failed] == [OSError] * 3
    assert calls == 1
    assert cache.get(("unit", 1)) is None


async def test_when_the_maker_is_cancelled_each_waiting_request_makes_its_own() -> None:
    cache = PageCache()
    calls = 0
    release = asyncio.Event()

    async def make() -> Made:
        nonlocal calls
        calls += 1
        if calls == 1:
            await release.wait()  # cancelled here, as a request whose client went away
        return page(10), None

    first = asyncio.create_task(cache.made(("unit", 1), make))
    await asyncio.sleep(0)
    others = [asyncio.create_task(cache.made(("unit", 1), make)) for _ in range(2)]
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert [found is not None for found in await asyncio.gather(*others)] == [True, True]
    assert calls == 3
