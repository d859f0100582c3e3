"""What one unit's create costs PostgreSQL, by how many units share its statement.

The create statement of `units/changes.py`, run with its own arguments for N sample units, one
statement after another on one connection, each committed alone (as a create is): one unit a
statement, then 8, then 32, in turn, three times. Prints the median PostgreSQL backend CPU
(from /proc: the database must run on this machine), the client's CPU and the WAL written, per
unit. Inserts into the database it is given (units_bench by default, as write.py seeds it).

    .venv/bin/python bench/statements.py --units 1600
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from typing import Any

import asyncpg
from harness import DEFAULT_DATABASE

from units_api.dburls import driver_dsn
from units_api.sample_data import fake_unit
from units_api.units import changes
from units_api.units.record import UnitRecord
from units_api.units.validation import validate_unit

ACTOR = {"type": "apiKey", "id": "bench"}
SIZES = (1, 8, 32)


def backend_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_way(
    conn: asyncpg.Connection, pid: int, rng: random.Random, count: int, size: int
) -> tuple[float, float, float]:
    made = [changes.created(UnitRecord.new(validate_unit(fake_unit(rng)))) for _ in range(count)]
    calls: list[tuple[str, list[Any]]] = []
    for start in range(0, count, size):
        rows = changes.prepare("insert", made[start : start + size], ACTOR)
        arguments = changes._pg_arguments(rows)
        if size == 1:
            arguments = [arguments[0], *(column[0] for column in arguments[1:])]
        calls.append((changes._PG_STATEMENTS["insert", size == 1], arguments))
    wal = await conn.fetchval("SELECT pg_current_wal_insert_lsn()::text")
    backend, client = backend_cpu(pid), time.process_time()
    for statement, arguments in calls:
        await conn.fetchval(statement, *arguments)
    backend, client = backend_cpu(pid) - backend, time.process_time() - client
    written = await conn.fetchval(
        "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)", wal
    )
    return backend / count * 1e6, client / count * 1e6, float(written) / count


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--units", type=int, default=1600, help="units per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--database-url", default=os.environ.get("UNITS_API_BENCH_DATABASE_URL", DEFAULT_DATABASE)
    )
    args = parser.parse_args()
    conn = await asyncpg.connect(driver_dsn(args.database_url))
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        rng = random.Random(2)
        found: dict[int, list[tuple[float, float, float]]] = {size: [] for size in SIZES}
        for _ in range(args.rounds):
            for size in SIZES:
                found[size].append(await one_way(conn, pid, rng, args.units, size))
    finally:
        await conn.close()
    print("units a statement   backend CPU a unit   client CPU a unit   WAL a unit")
    for size, runs in found.items():
        backend, client, wal = (statistics.median(run[i] for run in runs) for i in range(3))
        print(f"{size:>17}   {backend:>15.0f} us   {client:>14.0f} us   {wal / 1000:>7.1f} kB")


if __name__ == "__main__":
    asyncio.run(main())
