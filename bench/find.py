"""Benchmark of finding units at scale: the list, filters, search, cursors, aggregates.

    make bench-find                                   # 1,000,000 units, 3 runs x 10 s
    .venv/bin/python bench/find.py --units 100000 --runs 1 --reuse

Seeds N units into PostgreSQL (COPY; reports the rate), starts `units-api serve --workers 2`,
times each scenario's first request, warms it up, loads it with wrk at 32 connections,
times a deep cursor walk and the aggregate with sequential requests, and writes EXPLAIN
ANALYZE of each query to bench/results/explain/. `--no-count-cache` counts every total afresh,
`--no-result-cache` every aggregate.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import asyncpg
import httpx
from harness import (
    REFERENCE,
    RESULTS,
    free_port,
    peak_rss_mb,
    recreate_database,
    run_wrk,
    scale_of,
    start_server,
)
from planted import add_newer, plant
from sqlalchemy import Select, func, select
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine, server_settings
from units_api.filters.parser import parse_filter
from units_api.migrate import upgrade
from units_api.sample_data import CITIES
from units_api.search.index import count_matches, match, newest_matches
from units_api.search.normalize import Words, query_tokens
from units_api.search.plan import FEW_MATCHES, first_words
from units_api.units.counting import count_all
from units_api.units.fields import SortKey
from units_api.units.filtering import unit_filters
from units_api.units.remembering import prune
from units_api.units.repository import hits_query, page_query
from units_api.units.seeding import seed_units
from units_api.units.sorting import by_distance
from units_api.units.tables import units

FILTERED = "city==Cairo;price=ge=2000000;price=le=6000000"
NESTED = "floorsPlan.rooms=ge=3"
# Map search around Cairo's centre, where the seed spreads its Cairo units (within 0.05 degrees
# either way, sample_data): a box of about 2 x 2 km (the 20 newest), a 1 km radius (nearest
# first) and a 5-vertex polygon of about 3 x 3 km (the 20 newest).
CAIRO = next(centre for city, _, centre in CITIES if city == "Cairo")
KM_LAT = 1 / 111.195  # degrees of latitude per km
KM_LNG = KM_LAT / math.cos(math.radians(CAIRO[1]))
BOX_CORNERS = (CAIRO[0] - KM_LNG, CAIRO[1] - KM_LAT, CAIRO[0] + KM_LNG, CAIRO[1] + KM_LAT)
MAP_BOX = "unitLocation=within=({})".format(",".join(f"{v:.6f}" for v in BOX_CORNERS))
MAP_NEAR = f"unitLocation=near=({CAIRO[0]},{CAIRO[1]},1000)"
PENTAGON = [(-1.5, -1.5), (1.5, -1.5), (1.8, 0.4), (0, 1.5), (-1.6, 0.6)]  # km from the centre
MAP_POLYGON = "unitLocation=inside=({})".format(
    ",".join(f"{CAIRO[0] + x * KM_LNG:.6f},{CAIRO[1] + y * KM_LAT:.6f}" for x, y in PENTAGON)
)
DIALECT = asyncpg_dialect()
PG = "postgresql"
# Searches, stemmed, asked in turn by every connection: words the seed gives a tenth of the
# units or more, and words planted in tens, hundreds and thousands of units spread over the
# table (bench/planted.py): "Marina" and "مارينا" in 40, "waterfront" and "واجهة بحرية" in
# 400, "resort" in 4,000.
MIX = [
    "villas",
    "sea view penthouses",
    "garden apartments",
    "new cairo",
    "mivida",
    "Marina",
    "waterfront",
    "resort",
    "فيلا",
    "شقة بحديقة",
    "مارينا",
    "واجهة بحرية",
]
# Arabic city names typed without their article: each finds its city's units.
WITHOUT_ARTICLE = ["قاهرة", "رياض", "شيخ زايد"]
# Count and average price by city and type, asked again while no unit changes: after the
# first request, a remembered answer (units/remembering.py).
BY_CITY_AND_TYPE = {
    "groupBy": ["city", "type"],
    "aggregates": {"n": {"fn": "count"}, "avgPrice": {"fn": "avg", "field": "price"}},
}
QUERY_PATH = "/api/v2/units/query"
SCENARIOS: dict[str, dict[str, Any]] = {
    # The same run's measure of the machine against the one the targets were set on
    # (harness.REFERENCE).
    "GET one unit": {"one": True},
    "default list": {"params": {}},
    "filtered list": {"params": {"p": FILTERED, "sortBy": "price", "order": "asc"}},
    "nested filter": {"params": {"p": NESTED}, "prefer": "count=none"},
    "search English": {"params": {"q": "sea view penthouse"}},
    "search Arabic": {"params": {"q": "بنتهاوس بإطلالة"}},
    "search rare English": {"params": {"q": "Marina"}},  # planted in 40 units
    "search rare Arabic": {"params": {"q": "واجهة بحرية"}},  # planted in 400 units
    # `target`: the rate (req/s where the targets were set), at which a second load
    # measures the latencies (see load).
    "search mix": {"mix": MIX, "target": 500},
    "search mix by relevance": {"mix": MIX, "params": {"sortBy": "relevance"}, "target": 300},
    "Arabic without article": {"mix": WITHOUT_ARTICLE, "target": 500},
    "aggregate asked again": {"body": BY_CITY_AND_TYPE},
    "map box": {"params": {"p": MAP_BOX}, "target": 500},
    "map near": {"params": {"p": MAP_NEAR, "sortBy": "distance", "order": "asc"}, "target": 400},
    "map polygon": {"params": {"p": MAP_POLYGON}, "target": 400},
}
WRK_THREADS = 2


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1_000_000)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="server processes (one per core)")
    parser.add_argument(
        "--warmup",
        type=int,
        default=10,
        help="seconds of load before measuring (each process's first search of each term counts "
        "its matches, 0.5-0.9 s each at 1,000,000 units on a slow day)",
    )
    parser.add_argument(
        "--no-count-cache",
        action="store_true",
        help="count every exact total afresh (UNITS_API_COUNT_CACHE_SIZE=0)",
    )
    parser.add_argument(
        "--no-result-cache",
        action="store_true",
        help="compute every aggregate afresh (UNITS_API_RESULT_CACHE_BYTES=0)",
    )
    parser.add_argument("--walk-pages", type=int, default=100)
    parser.add_argument(
        "--no-paced",
        dest="paced",
        action="store_false",
        help="skip the second load of each scenario with a target, at the target's rate",
    )
    parser.add_argument(
        "--newer",
        type=int,
        default=0,
        help="first create units of one body until there are N, newer than every other and "
        "in none of the searches (as write.py leaves them), so newest-first searches walk "
        "past them",
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "UNITS_API_BENCH_FIND_DATABASE_URL",
            "postgresql://postgres@127.0.0.1:5432/units_bench_1m",
        ),
    )
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=list(SCENARIOS),
        help="run only this scenario (repeatable); the default runs them all",
    )
    return parser.parse_args()


async def prepare(url: str, count: int, reuse: bool) -> tuple[str, float | None]:
    db = Database(create_engine(url, pool_size=2))
    seconds = None
    try:
        async with db.read() as conn:
            existing = int(
                (await conn.execute(select(func.count()).select_from(units))).scalar_one()
            )
        if not reuse or existing < count:
            started = time.perf_counter()
            await seed_units(db, count - existing, seed=1)
            seconds = time.perf_counter() - started
        await prune(db, everything=True)  # each run starts with no remembered answer
        raw = await db.raw_connection()
        await raw.execute("VACUUM ANALYZE")
        await raw.close()
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            key: str = (await create_key(conn, spec))["key"]
        return key, seconds
    finally:
        await db.dispose()


def _compiled(statement: Select[Any]) -> tuple[str, list[Any]]:
    compiled = statement.compile(dialect=DIALECT)
    return str(compiled), [compiled.params[p] for p in compiled.positiontup or []]


async def _fetch(conn: asyncpg.Connection, statement: Select[Any]) -> Any:
    sql, values = _compiled(statement)
    return await conn.fetchval(sql, *values)


async def _first(conn: asyncpg.Connection, words: Words) -> Words:
    """The words the service reads through the index first, once it knows the search's total."""
    cap = FEW_MATCHES + 1
    sizes = [await _fetch(conn, select(count_matches((w,), PG, cap))) for w in words]
    total = await _fetch(conn, select(count_matches(words, PG))) if words else None
    return first_words(words, sizes, total, FEW_MATCHES)


def _statement(params: dict[str, str], counting: bool, first: Words) -> Select[Any]:
    words = tuple(query_tokens(params.get("q", "")))
    tree = parse_filter(params["p"]) if "p" in params else None
    condition, place = unit_filters(tree, None, PG)
    condition = condition & match(words, PG, units.c.id, first)
    if counting and words and "p" not in params:  # counted in the search table
        return select(count_matches(words, PG, first=first))
    if counting and "p" not in params:  # every unit: the counters
        return select(count_all())
    if counting:
        return select(func.count()).select_from(units).where(condition)
    if words and "p" not in params:  # a search alone: the service's own path
        return hits_query(newest_matches(words, True, 21, 0, first), True)
    sort = (SortKey(params.get("sortBy", "createdAt"), params.get("order", "desc") == "desc"),)
    # As the list reads it: a map search's page through the index, its distance computed.
    return page_query(condition, sort, 21, 0, PG, by_distance(sort, place.near), place.located)


async def explain(url: str, names: list[str]) -> dict[str, float]:
    """EXPLAIN ANALYZE of each scenario's page and count queries; returns their times (ms)."""
    out = RESULTS / "explain"
    out.mkdir(parents=True, exist_ok=True)
    conn = await asyncpg.connect(url, server_settings=server_settings(0))  # as the service
    times = {}
    try:
        for name in names:
            params = SCENARIOS[name].get("params")
            if params is None or "mix" in SCENARIOS[name]:
                continue
            first = await _first(conn, tuple(query_tokens(params.get("q", ""))))
            for counting in (False, True):
                sql, values = _compiled(_statement(params, counting, first))
                plan = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *values)
                plan = json.loads(plan) if isinstance(plan, str) else plan
                label = f"{name} ({'count' if counting else 'page'})"
                times[label] = plan[0]["Execution Time"]
                rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *values)
                slug = label.replace(" ", "_").replace("(", "").replace(")", "")
                lines = "\n".join(row[0] for row in rows)
                (out / f"{slug}.txt").write_text(f"{sql}\n{values}\n\n{lines}")
    finally:
        await conn.close()
    return times


async def some_ids(url: str, count: int = 2_000) -> list[str]:
    """Ids of units spread over the table, for GET one unit."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        rows = await conn.fetch("SELECT id FROM units TABLESAMPLE SYSTEM (1) LIMIT $1", count)
    finally:
        await conn.close()
    return [str(row["id"]) for row in rows]


def first_request_ms(url: str, key: str, headers: tuple[str, ...], body: Any = None) -> float:
    """The first request of a scenario: nothing of it remembered yet (its total, its plan, its
    answer); a POST of `body` when there is one."""
    extra = {"Authorization": f"Bearer {key}", **dict(h.split(": ", 1) for h in headers)}
    started = time.perf_counter()
    if body is None:
        response = httpx.get(url, headers=extra, timeout=120)
    else:
        response = httpx.post(url, headers=extra, json=body, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.text
    return elapsed


def load(
    base: str, key: str, scenario: dict[str, Any], args: argparse.Namespace, scale: float | None
) -> dict[str, Any]:
    """A scenario's first request (the slowest first one, for a mix), then its wrk runs.

    A scenario with a `target` rate is then loaded again at that rate here (divided by the
    run's `scale`): as many requests as 32 connections can send fill both cores, and each
    waits behind all the others, so the latencies of that first load are those of a machine
    past its capacity; the target's p99 is that of its rate.
    """
    headers = (f"Prefer: {scenario['prefer']}",) if "prefer" in scenario else ()
    wrk: dict[str, Any] = {"connections": args.connections, "headers": headers}
    listed = None
    if "mix" in scenario or "one" in scenario:
        extra = scenario.get("params", {})
        paths = (
            [f"/api/v2/units/{unit_id}" for unit_id in args.ids]
            if "one" in scenario
            else [f"/api/v2/units/?{urlencode({'q': q, **extra})}" for q in scenario["mix"]]
        )
        listed = paths_file(paths)
        first = max(first_request_ms(base + path, key, headers) for path in paths[:20])
        wrk.update(script="paths.lua", script_args=(str(listed),))
        url = base
    elif "body" in scenario:
        posted = RESULTS / "query_body.json"
        posted.write_text(json.dumps(scenario["body"]))
        first = first_request_ms(base + QUERY_PATH, key, headers, scenario["body"])
        wrk.update(script="post.lua", script_args=(QUERY_PATH, str(posted)))
        url = base
    else:
        path = f"/api/v2/units/?{urlencode(scenario['params'])}"
        listed = paths_file([path])
        url = base + path
        first = first_request_ms(url, key, headers)
    if args.warmup:
        run_wrk(url, key, duration=args.warmup, **wrk)
    runs = [run_wrk(url, key, duration=args.duration, **wrk) for _ in range(args.runs)]
    figures = {m: statistics.median(r[m] for r in runs) for m in runs[0]}
    result = {**figures, "first_ms": first, "runs": runs}
    if "target" in scenario and listed is not None and args.paced:
        rate = scenario["target"] / (scale or 1.0)
        wrk.update(
            threads=WRK_THREADS,  # paths.lua's rate is per thread
            script="paths.lua",
            script_args=(str(listed), f"{rate / WRK_THREADS:.2f}"),
        )
        paced = [run_wrk(base, key, duration=args.duration, **wrk) for _ in range(args.runs)]
        result["paced"] = {
            "rate": rate,
            **{m: statistics.median(r[m] for r in paced) for m in paced[0]},
            "runs": paced,
        }
    return result


def paths_file(paths: list[str]) -> Path:
    listed = RESULTS / f"paths_{hashlib.sha256(chr(10).join(paths).encode()).hexdigest()[:12]}.txt"
    listed.write_text("\n".join(paths) + "\n")
    return listed


def timed(client: httpx.Client, requests: list[tuple[str, str, Any]]) -> list[float]:
    latencies = []
    for method, path, body in requests:
        started = time.perf_counter()
        response = client.request(method, path, json=body)
        latencies.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
    return latencies


def cursor_walk(client: httpx.Client, pages: int) -> dict[str, float]:
    latencies, cursor, seen = [], None, 0
    for _ in range(pages):
        body: dict[str, Any] = {"limit": 1000, "fields": ["name", "price"]}
        if cursor:
            body["cursor"] = cursor
        started = time.perf_counter()
        page = client.post("/api/v2/units/query", json=body).json()
        latencies.append((time.perf_counter() - started) * 1000)
        seen += len(page["data"])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    return {
        "pages": len(latencies),
        "units": seen,
        "p50_ms": statistics.median(latencies),
        "p99_ms": sorted(latencies)[int(len(latencies) * 0.99) - 1],
        "units_per_s": seen / (sum(latencies) / 1000),
    }


def main() -> None:
    args = parse_args()
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, seed_seconds = asyncio.run(prepare(args.database_url, args.units, args.reuse))
    args.ids = asyncio.run(some_ids(args.database_url))
    RESULTS.mkdir(exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    extra = {"UNITS_API_COUNT_CACHE_SIZE": "0"} if args.no_count_cache else {}
    if args.no_result_cache:
        extra["UNITS_API_RESULT_CACHE_BYTES"] = "0"
    log = RESULTS / "find-server.log"
    server = start_server(args.database_url, port, args.workers, log, extra)
    report: dict[str, Any] = {
        "units": args.units,
        "seed_seconds": seed_seconds,
        "connections": args.connections,
        "runs": args.runs,
        "duration_s": args.duration,
        "workers": args.workers,
        "count_cache": not args.no_count_cache,
        "result_cache": not args.no_result_cache,
        "scenarios": {},
    }
    try:
        report["planted"] = asyncio.run(plant(base, key, args.database_url))
        if args.newer:
            report["newer"] = asyncio.run(add_newer(base, key, args.newer))
        report["rss_start_mb"] = peak_rss_mb(server.pid)
        scale = None
        for name in args.scenario or SCENARIOS:
            report["scenarios"][name] = load(base, key, SCENARIOS[name], args, scale)
            if name == "GET one unit":
                scale = scale_of(name, report["scenarios"][name]["rps"])
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
        ) as client:
            report["cursor walk"] = cursor_walk(client, args.walk_pages)
            body = {
                "groupBy": ["city"],
                "aggregates": {"n": {"fn": "count"}, "avgPrice": {"fn": "avg", "field": "price"}},
            }
            latencies = timed(client, [("POST", QUERY_PATH, body)] * 7)
            report["aggregate by city ms"] = {
                "first": latencies[0],
                "median": statistics.median(latencies[1:]),
                "max": max(latencies[1:]),
            }
        report["rss_end_mb"] = peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    names = args.scenario or list(SCENARIOS)
    report["explain_ms"] = asyncio.run(explain(args.database_url.replace("+asyncpg", ""), names))
    (RESULTS / "find.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print_report(report)


def print_report(report: dict[str, Any]) -> None:
    seeded = report["seed_seconds"]
    print(
        f"\n{report['units']:,} units in PostgreSQL"
        + (f"; seeded in {seeded:.0f} s ({report['units'] / seeded:,.0f}/s)" if seeded else "")
        + f"; {report['connections']} connections; median of {report['runs']} x "
        f"{report['duration_s']} s"
    )
    print(f"planted words (units holding each): {report['planted']}")
    if "newer" in report:
        print(f"units of one body newer than every other, in no search: {report['newer']:,}")
    print(
        f"{report['workers']} server processes; exact totals "
        + ("remembered per change version" if report["count_cache"] else "counted every time")
        + "; aggregates "
        + ("remembered per change version" if report["result_cache"] else "computed every time")
    )
    print(
        f"{'scenario':<22}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>10}{'first ms':>10}"
    )
    for name, figures in report["scenarios"].items():
        print(
            f"{name:<22}{figures['rps']:>10,.0f}{figures['p50_ms']:>10.2f}"
            f"{figures['p99_ms']:>10.2f}{figures['non_2xx']:>10,.0f}{figures['first_ms']:>10.1f}"
        )
    one = report["scenarios"].get("GET one unit")
    scale = scale_of("GET one unit", one["rps"]) if one else 1.0
    if one:
        print(
            f"this machine: GET one unit {one['rps']:,.0f}/s against "
            f"{REFERENCE['GET one unit']:,.0f} where the targets were set; at that scale "
            f"({scale:.2f}: req/s times it, p99 divided by it):"
        )
        for name, figures in report["scenarios"].items():
            print(
                f"  {name:<20}{figures['rps'] * scale:>10,.0f}/s"
                f"{figures['p99_ms'] / scale:>10.2f} ms p99"
            )
    paced = {name: f["paced"] for name, f in report["scenarios"].items() if "paced" in f}
    if paced:
        print("at each target's rate here (the target divided by that scale), wrk paced:")
        print(
            f"  {'scenario':<24}{'asked/s':>9}{'got/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'scaled':>9}"
        )
        for name, figures in paced.items():
            print(
                f"  {name:<24}{figures['rate']:>9,.0f}{figures['rps']:>9,.0f}"
                f"{figures['p50_ms']:>9.2f}{figures['p99_ms']:>9.2f}"
                f"{figures['p99_ms'] / scale:>9.2f}"
            )
    walk = report["cursor walk"]
    print(
        f"cursor walk: {walk['pages']} pages of 1,000, {walk['units_per_s']:,.0f} units/s, "
        f"page p50 {walk['p50_ms']:.1f} ms, p99 {walk['p99_ms']:.1f} ms"
    )
    aggregate = report["aggregate by city ms"]
    print(
        f"aggregate (count, avg price by city): first {aggregate['first']:.0f} ms; asked again "
        f"median {aggregate['median']:.1f} ms, max {aggregate['max']:.1f} ms"
    )
    print(
        f"server RSS: {report['rss_start_mb']:.0f} MB at start, "
        f"{report['rss_end_mb']:.0f} MB peak at the end"
    )
    print("EXPLAIN ANALYZE execution times (ms):")
    for label, ms in sorted(report["explain_ms"].items(), key=lambda item: -item[1]):
        print(f"  {label:<32}{ms:>10.1f}")


if __name__ == "__main__":
    main()
