"""The kept pages stay within their budget, the least recently used going first."""

from __future__ import annotations

from units_api.website.cache import Page, PageCache


def page(size: int) -> Page:
    return Page("live", b"x" * size, '"t"', None)


def test_the_least_recently_used_pages_go_first_within_the_budget() -> None:
    cache = PageCache(budget=10_000)
    for number in range(4):
        cache.put(("unit", number), page(1_000))
    assert cache.get(("unit", 0)) is not None  # now the most recent
    for number in range(4, 12):
        cache.put(("unit", number), page(1_000))
    assert cache.get(("unit", 0)) is not None or cache.get(("unit", 1)) is None
    assert cache.get(("unit", 1)) is None and cache.get(("unit", 2)) is None
    assert cache.get(("unit", 11)) is not None
    assert sum(1 for n in range(12) if cache.get(("unit", n))) * 1_200 <= 10_000
    cache.put(("big",), page(5_000))  # more than an eighth of the budget: not kept
    assert cache.get(("big",)) is None
