"""Exact totals that are not recounted while nothing has changed.

Every statement that writes units bumps `unit_counters.changes` (a trigger, migration 0004),
so their sum is a version of the whole unit set. A total is stored with the version read in
the same statement, hence from the same snapshot; it is given again only to a request that
reads that same version, so it is never stale, and counting thousands of matches happens
once per change to the units instead of once per request.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from sqlalchemy import ScalarSelect, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.units.tables import unit_counters

DEFAULT_SIZE = 4096


_VERSION = select(func.coalesce(func.sum(unit_counters.c.changes), 0)).scalar_subquery()


def version_column() -> ScalarSelect[Any]:
    """The change version, as a column any statement can carry (built once: it never varies)."""
    return _VERSION


class CountCache:
    """Totals by the question asked (filter, policy, search words), for one version each."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()
        self._pending: dict[Hashable, asyncio.Future[tuple[int, int] | None]] = {}
        self.hits = 0
        self.misses = 0
        self.counted = 0

    def get(self, key: Hashable, version: int | None) -> int | None:
        entry = self._entries.get(key)
        if entry is None or version is None or entry[0] != version:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[1]

    def put(self, key: Hashable, version: int, total: int) -> None:
        if self._size < 1:
            return
        self._entries[key] = (version, total)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    async def total(
        self,
        conn: AsyncConnection,
        key: Hashable,
        version: int | None,
        counting: ScalarSelect[Any],
    ) -> int:
        """The total `counting` gives, from the cache when `version` is still current."""
        cached = self.get(key, version)
        if cached is not None:
            return cached
        # Requests arriving together with the same question wait for one count, not one each.
        pending = self._pending.get(key)
        if pending is not None:
            answer = await asyncio.shield(pending)
            if answer is not None and version is not None and answer[0] == version:
                return answer[1]
        return await self._count(conn, key, counting)

    async def _count(
        self, conn: AsyncConnection, key: Hashable, counting: ScalarSelect[Any]
    ) -> int:
        # Waiters get None if this count fails, and then count for themselves.
        future: asyncio.Future[tuple[int, int] | None] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        answer = None
        self.counted += 1
        try:
            row = (await conn.execute(select(version_column(), counting))).one()
            answer = (int(row[0]), int(row[1] or 0))
        finally:
            if self._pending.get(key) is future:
                del self._pending[key]
            future.set_result(answer)
        self.put(key, *answer)
        return answer[1]
