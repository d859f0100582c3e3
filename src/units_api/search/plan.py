"""How a page of the list is read, decided in one place: a search through the index or walked
in order, by relevance tiers, or by place. Each read's SQL lives with its concern
(search.index, search.rank, filters.sql, units.repository); what a choice needs counted comes
in as callables (units.counting.SearchCounts), so nothing here reads a table.

By index, or walked in order: a page of a search that many units match is found fastest by
walking units in the list's order and checking each: for a word in 10% of units, a page of 20
reads about 200. For a rare word that walk reads every unit (half a second on a million);
reading the few matches through the index and sorting them is then cheap. Which it is comes
from how many units have each word, counted up to a cap and remembered while units do not
change (for a second while they do: units.counting.CountCache.size).

By relevance tiers: a search alone by relevance, then recency, is read from the tiers of one
score each that its page falls in (search.rank.ranked_matches), as their sizes tell.

By place: a map search in a box, in creation order, walks the index of the points with their
time; a page nearest first that does not reach far is bounded by a walk of the point index.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from units_api.search.normalize import Words

# Past this many matches, sorting them costs more than walking to a page of them (measured on
# 1,000,000 units: 1,737 matches cost 9 ms either way, 4,384 cost 39 ms sorted, 3 ms walked).
FEW_MATCHES = 2000
# SQLite reads each match's unit by id, dearer than PostgreSQL's, and walks cheaply: the same
# choice turns at fewer matches (measured on 100,000: 1,349 matches cost 23 ms read by id, 3
# walked; 400 cost 4 ms by id).
SQLITE_FEW_MATCHES = 500
# Relevance is read in tiers for searches of at most this many words (4 ** n combinations).
MAX_TIERED_TERMS = 3
# Pages nearest first reaching this far or less are bounded by a walk of the point index: at
# 1,000,000 units, 2,893 of them in the circle, 21 rows took 0.5 ms (3.3 ms sorting the
# circle), 521 rows 2.0 ms, 1,021 3.2 ms, as many as sorting all of them.
NEAREST_WALK = 500

# How many units have every one of some words, counted up to a cap; and a search's total,
# when it is known at the newest change version seen.
WordCount = Callable[[Words, int], Awaitable[int]]
KnownTotal = Callable[[Words], int | None]
# A page as read: its records (stored JSON), the change version they were read at (None for
# none), and each record's values of the keys it shows.
Page = tuple[list[str], int | None, list[tuple[Any, ...]]]
Tier = TypeVar("Tier")

# The orders a plan tells apart (units.sorting.order_of): createdAt alone; relevance, then
# createdAt the same way; any other with relevance; distance alone, nearest first; the rest.
Order = Literal["created", "ranked", "relevance", "nearest", "other"]
# How a page's statement reads it (a search by relevance tiers aside: by_tiers):
# - located_by_time: the index of the points with their time (repository.located_page_query);
# - nearest: the units no farther than a walk of the point index found (sql.nearest_first);
# - newest: the search table alone, in creation order (search.index.newest_matches);
# - relevance: the matches' scores joined to the units (search.rank.relevant_matches);
# - page: the units in the order asked (repository.page_query).
Read = Literal["located_by_time", "nearest", "newest", "relevance", "page"]


@dataclass(frozen=True, slots=True)
class Shape:
    """What of a page decides how it is read."""

    order: Order
    words: Words
    narrowed: bool  # by a filter or a key's policy
    box: bool  # every match in one box an index can walk (filters.maps.MapPlan)
    near: bool  # the filter's one =near= (filters.maps.MapPlan)
    reach: int  # the rows up to the page's end, and one more


class Versions(Protocol):
    """The newest change version read so far (units.counting.CountCache)."""

    @property
    def seen(self) -> int: ...

    def saw(self, version: int | None) -> None: ...


def few_matches(dialect: str, setting: int) -> int:
    """At most how many matches a search reads through the index and sorts."""
    return min(setting, SQLITE_FEW_MATCHES) if dialect == "sqlite" else setting


async def choose_first(words: Words, few: int, count: WordCount, known: KnownTotal) -> Words:
    """The words to read through the index first (first_words), from how many units have
    each, counted up to past `few`."""
    if not words or few < 1:
        return ()
    sizes = [await count((word,), few + 1) for word in words]
    return first_words(words, sizes, known(words), few)


def first_words(words: Words, sizes: Sequence[int], total: int | None, few: int) -> Words:
    """The words to read through the index first: the rarest one when at most `few` units
    have it, all of them when the search is known to match at most `few` (its `total`), or
    none (walk in order). `sizes` are how many units have each word; a negative size or
    total (a count that ran out of time) is many."""
    known = [(size, word) for size, word in zip(sizes, words, strict=True) if size >= 0]
    if known and min(known)[0] <= few:
        return (min(known)[1],)
    if total is not None and 0 <= total <= few:
        return words
    return ()


def walks(dialect: str, first: Words, few: int) -> bool:
    """Whether SQLite walks the units in order, checking each against the search index's row
    ids, for a search many match (search.index.match)."""
    return dialect == "sqlite" and not first and few > 0


def page_read(shape: Shape, dialect: str, by_time: bool) -> Read:
    """How a page's statement reads it; `by_time`: the database has the index of the points
    with their time."""
    if by_time and shape.box and shape.order == "created" and not shape.words:
        return "located_by_time"
    postgresql = dialect == "postgresql"
    if postgresql and shape.near and shape.order == "nearest" and shape.reach <= NEAREST_WALK:
        return "nearest"
    if postgresql and shape.order == "created" and shape.words and not shape.narrowed:
        return "newest"
    if shape.order in ("ranked", "relevance"):
        return "relevance"
    return "page"


def tiered(words: Words) -> bool:
    """Whether a search's relevance is read in tiers (search.rank.relevance_tiers)."""
    return 0 < len(words) <= MAX_TIERED_TERMS


def by_tiers(shape: Shape, first: Words) -> bool:
    """Whether a page is read by relevance tiers: a search alone by relevance, then recency,
    that is not read through the index first."""
    return not first and shape.order == "ranked" and not shape.narrowed and tiered(shape.words)


def window(
    tiers: Sequence[tuple[Tier, int]], descending: bool, offset: int, limit: int, few: int
) -> tuple[list[tuple[Tier, bool]], int]:
    """The tiers a page of `limit` from `offset` falls in, in the page's order, each with
    whether it has at most `few` (see first_words), and the page's offset in the first."""
    chosen = []
    start = skipped = 0
    for tier, size in tiers if descending else tiers[::-1]:
        if start + size <= offset:
            skipped += size
        elif start < offset + limit:
            chosen.append((tier, size <= few))
        start += size
    return chosen, offset - skipped


async def ranked_page(
    sizes: Callable[[], Awaitable[Sequence[tuple[Tier, int]]]],
    read: Callable[[list[tuple[Tier, bool]], int], Awaitable[Page]],
    versions: Versions,
    descending: bool,
    offset: int,
    limit: int,
    few: int,
) -> Page | None:
    """A page of a search by relevance, read (`read`) in the tiers it falls in as their
    `sizes` tell (best first, those holding matches); None when no tier holds one. The sizes
    are exact at the version they were counted at; a page read at a newer version is read
    again with sizes of its own, so a unit that has just entered a tier is neither missed nor
    shown twice."""
    for _ in range(2):
        planned = versions.seen
        sized = await sizes()
        if not sized:
            return None
        tiers, within = window(sized, descending, offset, limit, few)
        if not tiers:
            return [], None, []  # past the last match
        page = await read(tiers, within)
        if page[1] is None or page[1] <= max(planned, versions.seen):
            break
        versions.saw(page[1])
    return page
