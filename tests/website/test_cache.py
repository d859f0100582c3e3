"""The kept pages stay within their budget, the least recently used going first."""

from __future__ import annotations

from units_api.website.cache import Page, PageCache


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
