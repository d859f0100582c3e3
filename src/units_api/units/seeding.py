"""Loading many generated units at once, through the one writer of unit changes."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from concurrent.futures import ProcessPoolExecutor

from units_api.db import Database
from units_api.sample_data import fake_unit
from units_api.units import changes
from units_api.units.record import UnitRecord
from units_api.units.validation import validate_unit

SEED_ACTOR = {"type": "system", "id": None, "name": "seed"}


def batch_rows(seed: int | None, index: int, size: int) -> changes.Rows:
    """The rows of batch `index`: reproducible from (seed, index), so batches can be made in
    other processes."""
    rng = random.Random(None if seed is None else seed * 1_000_003 + index)
    batch = []
    for _ in range(size):
        batch.append(changes.created(UnitRecord.new(validate_unit(fake_unit(rng)))))
    return changes.prepare("insert", batch, SEED_ACTOR)


async def _write(db: Database, rows: changes.Rows) -> None:
    async with db.transaction() as conn:
        await changes.write_rows(conn, rows)


async def _seed_postgres(db: Database, sizes: list[int], seed: int | None) -> None:
    """Batches are made in worker processes while the previous ones are written (COPY); at
    most three wait in memory at a time."""
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(max_workers=2) as pool:
        ahead: deque[asyncio.Future[changes.Rows]] = deque()
        for index, size in enumerate(sizes):
            ahead.append(loop.run_in_executor(pool, batch_rows, seed, index, size))
            if len(ahead) == 3 or index == len(sizes) - 1:
                while len(ahead) >= (3 if index < len(sizes) - 1 else 1):
                    await _write(db, await ahead.popleft())


async def seed_units(db: Database, count: int, seed: int | None, batch: int = 2000) -> int:
    """Insert `count` units, each with its history entry, search words and `unit.created`
    event; through COPY on PostgreSQL (a million in minutes)."""
    sizes = [min(batch, count - start) for start in range(0, count, batch)]
    if db.dialect == "postgresql":
        await _seed_postgres(db, sizes, seed)
        return count
    for index, size in enumerate(sizes):
        await _write(db, batch_rows(seed, index, size))
    return count
