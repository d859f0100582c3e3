"""Benchmark of lifecycle operations on the 1,000,000-unit database of find.py.

    make bench-lifecycle                  # after make bench-find (it reuses that database)

Against one `units-api serve` (scheduled work in process): a 1,000-item atomic bulk update
(median of 3), a by-filter patch touching 10,000 units, and 1,000 scheduled publications
falling due at once, timed from their due time until the last is published.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
from harness import RESULTS, free_port, start_server

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.clock import format_time
from units_api.db import Database, create_engine


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "UNITS_API_BENCH_FIND_DATABASE_URL",
            "postgresql://postgres@127.0.0.1:5432/units_bench_1m",
        ),
    )
    return parser.parse_args()


async def prepare(url: str) -> tuple[str, list[str], str]:
    db = Database(create_engine(url, pool_size=2))
    async with db.transaction() as conn:
        spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
        key: str = (await create_key(conn, spec))["key"]
    await db.dispose()
    raw = await asyncpg.connect(url)
    ids = [
        str(r[0])
        for r in await raw.fetch(
            "SELECT id FROM units WHERE publishing_status = 'draft' ORDER BY id LIMIT 4000"
        )
    ]
    cut = await raw.fetchval(
        "SELECT created_at FROM units ORDER BY created_at DESC, id DESC OFFSET 10000 LIMIT 1"
    )
    await raw.close()
    return key, ids, format_time(cut) or ""


def bulk_items(client: httpx.Client, ids: list[str]) -> list[float]:
    times = []
    for run in range(3):
        chunk = ids[run * 1000 : (run + 1) * 1000]
        body = {
            "units": [{"id": i, "price": random.randrange(1_000_000, 9_000_000)} for i in chunk]
        }
        started = time.perf_counter()
        response = client.put("/api/v2/units/bulk/update", json=body)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200 and response.json()["failed"] == 0, response.text[:300]
    return times


def by_filter(client: httpx.Client, cut: str) -> dict[str, Any]:
    body = {"filter": f"createdAt=gt={cut}", "patch": {"guaranty": random.randrange(1, 9)}}
    started = time.perf_counter()
    dry = client.put("/api/v2/units/bulk/update", json={**body, "dryRun": True}).json()
    dry_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    response = client.put("/api/v2/units/bulk/update", json=body)
    assert response.status_code == 200, response.text[:300]
    return {
        "matched": dry["matched"],
        "dry_run_ms": dry_ms,
        "ms": (time.perf_counter() - started) * 1000,
        "updated": response.json()["updated"],
    }


async def scheduled(base: str, key: str, ids: list[str]) -> dict[str, float]:
    due = datetime.now(UTC) + timedelta(seconds=20)
    at = due.isoformat().replace("+00:00", "Z")
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        gate = asyncio.Semaphore(16)

        async def schedule(unit_id: str) -> None:
            async with gate:
                response = await client.put(
                    f"/api/v2/units/publishing-actions/{unit_id}",
                    json={"action": "schedule", "at": at},
                )
                assert response.status_code == 200, response.text[:300]

        await asyncio.gather(*(schedule(i) for i in ids))
        query = {"filter": "status==scheduled", "aggregates": {"n": {"fn": "count"}}}
        await asyncio.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()))
        while True:
            left = (await client.post("/api/v2/units/query", json=query)).json()["data"][0]["n"]
            if left == 0:
                break
            await asyncio.sleep(0.1)
    return {"units": len(ids), "seconds_after_due": (datetime.now(UTC) - due).total_seconds()}


def main() -> None:
    args = parse_args()
    key, ids, cut = asyncio.run(prepare(args.database_url))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(args.database_url, port, 1, RESULTS / "lifecycle-server.log")
    report: dict[str, Any] = {}
    try:
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120
        ) as client:
            times = bulk_items(client, ids[:3000])
            report["bulk 1,000 items atomic ms"] = {
                "median": statistics.median(times),
                "runs": times,
            }
            report["by filter"] = by_filter(client, cut)
        report["scheduled"] = asyncio.run(scheduled(base, key, ids[3000:4000]))
    finally:
        server.terminate()
        server.wait(timeout=30)
    (RESULTS / "lifecycle.json").write_text(json.dumps(report, indent=2))
    bulk = report["bulk 1,000 items atomic ms"]
    print(
        f"bulk update, 1,000 items, atomic: median {bulk['median']:.0f} ms "
        f"(runs: {', '.join(f'{t:.0f}' for t in bulk['runs'])})"
    )
    flt = report["by filter"]
    print(
        f"by-filter patch: {flt['matched']:,} matched, {flt['updated']:,} updated in "
        f"{flt['ms']:.0f} ms (dry run {flt['dry_run_ms']:.0f} ms)"
    )
    sched = report["scheduled"]
    print(
        f"scheduled publications: {sched['units']:,} all published "
        f"{sched['seconds_after_due']:.1f} s after their time"
    )


if __name__ == "__main__":
    main()
