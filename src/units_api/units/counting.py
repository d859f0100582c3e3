"""Counting units: every count the service runs (the counters, a filter's count, a search's
count, the planner's estimate), and exact totals that are not recounted while nothing has
changed.

Every statement that writes units bumps `unit_counters.changes` (a trigger, migration 0004),
so their sum is a version of the whole unit set. A total is stored with the version read in
the same statement, hence from the same snapshot; it is given again only to a request that
reads that same version, so it is never stale, and counting thousands of matches happens
once per change to the units instead of once per request.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Executable, ScalarSelect, func, select
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.search.index import count_matches
from units_api.search.normalize import Words
from units_api.search.rank import Tier, count_tiers, relevance_tiers
from units_api.units.tables import unit_counters, units

DEFAULT_SIZE = 4096
# Seconds a size counted to choose a plan serves plans while units change (CountCache.size).
PLAN_SECONDS = 1.0
TOO_SLOW = -1  # stored for a question whose count ran past its budget at that version
QUERY_CANCELED = "57014"
# Builds a count only when one is run: most requests find their total remembered.
Counting = Callable[[], ScalarSelect[Any]]
_AT_LEAST = "at least"  # keys a size counted up to its cap (a lower bound, not a total)


# The change version, as a column any statement can carry.
CHANGE_VERSION = select(func.coalesce(func.sum(unit_counters.c.changes), 0)).scalar_subquery()


def _serves(total: int | None, budget_ms: int | None) -> bool:
    """Whether a remembered total answers a request: one that ran out of time does only for a
    request with a budget (a request asking for the exact total counts, however long)."""
    return total is not None and (total != TOO_SLOW or bool(budget_ms))


class CountCache:
    """Totals by the question asked (filter, policy, search words), for one version each."""

    def __init__(
        self,
        size: int = DEFAULT_SIZE,
        plan_seconds: float = PLAN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()
        # Sizes for plans (`size`) by question: (when counted on `clock`, size).
        self._planned: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()
        self._plan_seconds = plan_seconds
        self._clock = clock
        self._pending: dict[Hashable, asyncio.Future[tuple[int, int] | None]] = {}
        self._seen = -1
        self.hits = 0
        self.counted = 0

    def get(self, key: Hashable, version: int | None) -> int | None:
        entry = self._entries.get(key)
        if entry is None or version is None or entry[0] != version:
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: Hashable, version: int, total: int) -> None:
        if self._size < 1 or version < 0:
            return
        self._entries[key] = (version, total)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    @property
    def seen(self) -> int:
        """The newest change version read so far (-1 before any)."""
        return self._seen

    def saw(self, version: int | None) -> None:
        """Note a change version read: remembered sizes hold until a newer one is seen."""
        if version is not None and version > self._seen:
            self._seen = version

    def remembered(self, key: Hashable) -> int | None:
        """The total of a question at the newest version seen, if counted at it."""
        return self.get(key, self._seen)

    async def size(self, conn: AsyncConnection, key: Hashable, capped: Counting, cap: int) -> int:
        """Roughly how many rows a question matches, to choose how to read them: its total
        (TOO_SLOW if counting it ran out of time), else `capped`, a count that stops at `cap`:
        the exact total below it. Both are remembered at the newest change version seen, so a
        plan may follow a change this process has not read yet; never given as a total.

        A size also serves plans for `plan_seconds` after it was counted, whatever changed
        since: under steady writes the version moves with every request, and each search
        would count its words again (measured on a read replica at 400 creates/s: 246 counts
        in 10 s at 25 searches/s, 37 ms each, most of the replica's CPU). A plan made on a
        size a second old is never a different answer, only a slower one: near
        plan.FEW_MATCHES both ways cost about the same, but for a second after a bulk change
        gives a rare word to thousands of units, its searches read and sort every match."""
        for stored in (key, (_AT_LEAST, key)):
            found = self.remembered(stored)
            if found is not None:
                return found
        planned = self._planned.get(key)
        if planned is not None and self._clock() - planned[0] < self._plan_seconds:
            self._planned.move_to_end(key)
            return planned[1]
        counted_at = self._clock()
        row = (await conn.execute(select(CHANGE_VERSION, capped()))).one()
        version, size = int(row[0]), int(row[1])
        self.saw(version)
        self.put(key if size < cap else (_AT_LEAST, key), version, size)
        self._plan(key, counted_at, size)
        return size

    def _plan(self, key: Hashable, counted_at: float, size: int) -> None:
        if self._size < 1 or self._plan_seconds <= 0:
            return
        self._planned[key] = (counted_at, size)
        self._planned.move_to_end(key)
        while len(self._planned) > self._size:
            self._planned.popitem(last=False)

    async def sizes(
        self,
        conn: AsyncConnection,
        keys: Mapping[int, Hashable],
        counting: Callable[[], Executable],
    ) -> dict[int, int]:
        """Exact sizes of several questions, by label: `counting` gives rows of (change version,
        label, size), a label without a row having none; remembered like `size`'s. Requests
        asking together wait for one count."""
        found = {label: self.remembered(key) for label, key in keys.items()}
        group = tuple(keys.values())
        pending = self._pending.get(group)
        if None in found.values() and pending is not None:
            await asyncio.shield(pending)
            found = {label: self.remembered(key) for label, key in keys.items()}
        if None not in found.values():
            return {label: size for label, size in found.items() if size is not None}
        future: asyncio.Future[tuple[int, int] | None] = asyncio.get_running_loop().create_future()
        self._pending[group] = future
        try:
            rows = (await conn.execute(counting())).all()
        finally:
            if self._pending.get(group) is future:
                del self._pending[group]
            future.set_result(None)
        version = int(rows[0][0])
        counted = {int(label): int(size) for _, label, size in rows if label is not None}
        self.saw(version)
        sizes = {label: counted.get(label, 0) for label in keys}
        for label, key in keys.items():
            self.put(key, version, sizes[label])
        return sizes

    async def total(
        self,
        conn: AsyncConnection,
        key: Hashable,
        version: int | None,
        counting: Counting,
        budget_ms: int | None = None,
    ) -> int | None:
        """The total `counting` gives, from the cache when `version` is still current; None
        when counting it takes longer than `budget_ms` (PostgreSQL; nothing is left running)."""
        found = self.get(key, version)
        pending = self._pending.get(key)
        if not _serves(found, budget_ms) and pending is not None:
            # Requests arriving together with the same question wait for one count.
            answer = await asyncio.shield(pending)
            same = answer is not None and version is not None and answer[0] == version
            found = answer[1] if answer is not None and same else None
        if _serves(found, budget_ms):
            self.hits += 1
            return None if found == TOO_SLOW else found
        return await self._count(conn, key, version, counting, budget_ms)

    async def _count(
        self,
        conn: AsyncConnection,
        key: Hashable,
        version: int | None,
        counting: Counting,
        budget_ms: int | None,
    ) -> int | None:
        # Waiters get None if this count fails, and then count for themselves.
        future: asyncio.Future[tuple[int, int] | None] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        answer = None
        self.counted += 1
        try:
            answer = await _within_budget(conn, version, counting(), budget_ms)
        finally:
            if self._pending.get(key) is future:
                del self._pending[key]
            future.set_result(answer)
        if answer[0] >= 0:
            self.saw(answer[0])
            self.put(key, *answer)
        return None if answer[1] == TOO_SLOW else answer[1]


class SearchCounts:
    """What a search's read plan asks counted (search.plan), run on `conn` and remembered in
    `counts`: how many units have some words, and the sizes of its relevance tiers. A search
    alone is remembered as the question (no filter, no policy, its words)."""

    def __init__(self, conn: AsyncConnection, counts: CountCache) -> None:
        self._conn = conn
        self._counts = counts

    async def words(self, words: Words, cap: int) -> int:
        """How many units have every word, counted up to `cap` (CountCache.size)."""
        capped = partial(count_matches, words, self._conn.dialect.name, cap)
        return await self._counts.size(self._conn, (None, None, words), capped, cap)

    def known(self, words: Words) -> int | None:
        """How many units a search matches, when counted at the newest version seen."""
        return self._counts.remembered((None, None, words))

    async def tiers(self, words: Words) -> list[tuple[Tier, int]]:
        """The relevance tiers of a search that hold matches, best first, with their sizes,
        remembered or counted together."""
        dialect = self._conn.dialect.name
        tiers = relevance_tiers(words, dialect)
        keys = {tier.score: (None, None, words, tier.score) for tier in tiers}
        counting = partial(count_tiers, words, dialect, tiers, CHANGE_VERSION)
        sizes = await self._counts.sizes(self._conn, keys, counting)
        return [(tier, sizes[tier.score]) for tier in tiers if sizes[tier.score]]


async def _within_budget(
    conn: AsyncConnection, version: int | None, counting: ScalarSelect[Any], budget_ms: int | None
) -> tuple[int, int]:
    """(version, total) read in one statement, or (the page's version, TOO_SLOW)."""
    statement = select(CHANGE_VERSION, counting)
    if not budget_ms or conn.dialect.name != "postgresql":
        row = (await conn.execute(statement)).one()
        return int(row[0]), int(row[1] or 0)
    # The service's reads run outside transactions, so the setting is put back by hand.
    await conn.exec_driver_sql(f"SET statement_timeout = {int(budget_ms)}")
    try:
        row = (await conn.execute(statement)).one()
        return int(row[0]), int(row[1] or 0)
    except DBAPIError as error:
        if getattr(error.orig, "sqlstate", None) != QUERY_CANCELED:
            raise
        return (-1 if version is None else version), TOO_SLOW
    finally:
        if not conn.invalidated:  # a broken connection is not reused: nothing to put back
            await conn.exec_driver_sql("RESET statement_timeout")


_COUNT_ALL = select(func.coalesce(func.sum(unit_counters.c.n), 0)).scalar_subquery()


def count_all() -> ScalarSelect[Any]:
    """Every unit, from the counters: exact, and O(1) at any size."""
    return _COUNT_ALL


def count(condition: ColumnElement[bool]) -> ScalarSelect[Any]:
    return select(func.count()).select_from(units).where(condition).scalar_subquery()


# EXPLAIN of the units matching a condition: its SQL and its values in order.
Explain = tuple[str, tuple[Any, ...]]


def explain_statement(condition: ColumnElement[bool], dialect: Dialect) -> Explain:
    """The statement `estimate` runs for `condition` (compiled once and kept by the list's
    statements: compiling it cost a list request a tenth of its time)."""
    # A list of values (`=in=`) is written out as one parameter each: EXPLAIN runs the text
    # as it is, with no expanding of its own.
    postcompile = {"render_postcompile": True}
    compiled = (
        select(units.c.id).where(condition).compile(dialect=dialect, compile_kwargs=postcompile)
    )
    names = compiled.positiontup or []
    return "EXPLAIN (FORMAT JSON) " + compiled.string, tuple(compiled.params[n] for n in names)


async def estimate(conn: AsyncConnection, statement: Explain) -> int:
    """PostgreSQL's planner estimate of the matching rows (fast at any size)."""
    result = await conn.exec_driver_sql(*statement)
    plan = result.scalar_one()
    plan = orjson.loads(plan) if isinstance(plan, str | bytes) else plan
    return int(plan[0]["Plan"]["Plan Rows"])


def exact_count(
    narrowed: bool,
    words: Words,
    condition: ColumnElement[bool],
    first: Words,
    dialect: str,
) -> ScalarSelect[Any]:
    """The cheapest exact count of the units matching `condition`: the counters (every unit),
    the search index alone (a search not `narrowed` by a filter or policy), or the query."""
    if not narrowed:
        if not words:
            return count_all()
        search_count: ScalarSelect[Any] = count_matches(words, dialect, first=first)
        return search_count
    return count(condition)
