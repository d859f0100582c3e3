"""Single requests of the map and search scenarios on the embedded default, SQLite.

    make bench-find-embedded                           # 100,000 units
    .venv/bin/python bench/find_embedded.py --units 20000 --repeat 5

Seeds N units into a SQLite file (kept beside the results, reused when it holds enough),
starts one `units-api serve` on it, plants the rare words (bench/planted.py), and times each
request of `find.py`'s map and search scenarios alone: after one warm-up request, `--repeat`
sequential requests each; prints the median and the slowest.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any
from urllib.parse import unquote_plus, urlencode

import httpx
from find import SCENARIOS
from harness import RESULTS, free_port, start_server
from planted import plant
from sqlalchemy import func, select

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.migrate import upgrade
from units_api.units.seeding import seed_units
from units_api.units.tables import units

NAMES = [
    name
    for name, scenario in SCENARIOS.items()
    if name.startswith(("map", "search", "Arabic")) and "body" not in scenario
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--path", default=str(RESULTS / "find_embedded.db"))
    return parser.parse_args()


async def prepare(url: str, count: int) -> str:
    db = Database(create_engine(url, pool_size=1))
    try:
        async with db.read() as conn:
            existing = int(
                (await conn.execute(select(func.count()).select_from(units))).scalar_one()
            )
        if existing < count:
            await seed_units(db, count - existing, seed=1)
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            key: str = (await create_key(conn, spec))["key"]
        return key
    finally:
        await db.dispose()


def paths(scenario: dict[str, Any]) -> list[str]:
    if "mix" in scenario:
        extra = scenario.get("params", {})
        return [f"/api/v2/units/?{urlencode({'q': q, **extra})}" for q in scenario["mix"]]
    return [f"/api/v2/units/?{urlencode(scenario['params'])}"]


def timed(client: httpx.Client, path: str, repeat: int) -> list[float]:
    client.get(path).raise_for_status()  # warm-up: plans, remembered sizes
    latencies = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(path)
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return latencies


def main() -> None:
    args = parse_args()
    RESULTS.mkdir(exist_ok=True)
    url = f"sqlite:///{args.path}"
    upgrade(url)
    key = asyncio.run(prepare(url, args.units))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(url, port, 1, RESULTS / "find-embedded-server.log")
    try:
        planted = asyncio.run(plant(base, key, url))
        print(f"{args.units:,} units in SQLite; planted words: {planted}")
        print(f"{'request':<64}{'median ms':>10}{'max ms':>10}")
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            for name in NAMES:
                for path in paths(SCENARIOS[name]):
                    latencies = timed(client, path, args.repeat)
                    query = unquote_plus(path[len("/api/v2/units/?") :])
                    label = f"{name}: {query}"[:62]
                    print(
                        f"{label:<64}{statistics.median(latencies):>10.1f}{max(latencies):>10.1f}"
                    )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
