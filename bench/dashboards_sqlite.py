"""Fresh dashboards on SQLite, in one process: the issue's dashboard (count and average price
by city and type under a new price bound each time) answered by the database and by the
dashboards' copy, medians of 7, with the copy's load time and the process's memory.

    python bench/dashboards_sqlite.py sqlite:////tmp/units.db   # a database seeded before
"""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import time
from pathlib import Path

from units_api.db import Database, create_engine
from units_api.units.dashboards import Dashboards
from units_api.units.query import run_query
from units_api.units.schemas import QueryRequest


def rss_mb() -> float:
    found = re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(found.group(1)) / 1024 if found else 0.0


def question(i: int) -> QueryRequest:
    return QueryRequest.model_validate(
        {
            "groupBy": ["city", "type"],
            "aggregates": {"n": {"fn": "count"}, "a": {"fn": "avg", "field": "price"}},
            "filter": f"price=le={1_000_000 + i * 7919}.{i % 100:02d}",
        }
    )


async def main(url: str) -> None:
    db = Database(create_engine(url, pool_size=4))
    try:
        by_sql = []
        for i in range(7):
            started = time.perf_counter()
            await run_query(db, question(i), None)
            by_sql.append((time.perf_counter() - started) * 1000)
        before = rss_mb()
        copy = Dashboards(db, 0)
        started = time.perf_counter()
        copy.start()
        await copy.wait_ready()
        loaded = time.perf_counter() - started
        by_copy = []
        for i in range(7, 14):
            started = time.perf_counter()
            await run_query(db, question(i), None, None, copy)
            by_copy.append((time.perf_counter() - started) * 1000)
        print(f"the database: median {statistics.median(by_sql):.1f} ms")
        print(f"the copy: median {statistics.median(by_copy):.1f} ms ({copy.answered} of 7)")
        print(f"the copy loaded in {loaded:.1f} s; memory {before:.0f} -> {rss_mb():.0f} MB")
        await copy.close()
    finally:
        await db.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
