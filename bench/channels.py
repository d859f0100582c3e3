"""Benchmark of the website's pages at scale: a listing page, its 304, the listings index
with words and a city, beside GET one unit (the run's scale).

    make bench-channels                                  # 1,000,000 units, 3 runs x 10 s
    .venv/bin/python bench/channels.py --units 100000 --runs 1 --reuse

Seeds N units as bench/find.py does (its own database; `--reuse` keeps it), publishes to `website`
every unit that meets its rules and is not yet on it (once: a direct SQL update, as the bench
needs no history), starts one `units-api serve` process, and loads each scenario with wrk at
32 connections: unpaced (what the process can do), then, for a target with a latency, paced
at the target's rate read at this machine's scale (harness.scale_of). The sitemap's and the
home-listings feed's figures are bench/sitemaps.py's and bench/feeds.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any
from urllib.parse import urlencode

import asyncpg
import httpx
from find import paths_file, prepare, some_ids
from harness import (
    RESULTS,
    free_port,
    peak_rss_mb,
    recreate_database,
    run_wrk,
    scale_of,
    start_server,
)

from units_api.migrate import upgrade

TARGETS = {
    "GET one unit": None,
    "listing page": {"rps": 2_500, "p99_ms": 50},
    "listing page, 304": {"rps": 5_000},
    "listings, words and a city": {"rps": 500},
}
WORDS = ["villa", "garden", "pool", "شقة", "فيلا", "view", "apartment", "قاهرة"]
CITIES = ["Cairo", "New Cairo", "Dubai", "Riyadh", "Alexandria", "Giza"]
WRK_THREADS = 2
PAUSE = 5  # seconds between scenarios

# Every unit that meets the website's rules, published to it (and, so, live): the record's
# publishing and the column the filters read.
PUBLISH = """
UPDATE units SET
  publishing_status = 'published',
  published_at = COALESCE(published_at, updated_at),
  channels = '["website"]',
  doc = jsonb_set(
          jsonb_set(
            jsonb_set(doc::jsonb, '{publishing,status}', '"published"'),
            '{publishing,channels}', '["website"]'),
          '{publishing,publishedAt}',
          to_jsonb(to_char(COALESCE(published_at, updated_at) AT TIME ZONE 'UTC',
                           'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))::text
WHERE NOT (channels::jsonb @> '["website"]' AND publishing_status = 'published')
  AND price > 0 AND city IS NOT NULL AND availability_status <> 'blocked'
  AND (has_unit_image_url OR has_gallery)
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1_000_000)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--database-url", default="postgresql://postgres@127.0.0.1:5432/units_bench_channels"
    )
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument("--no-paced", dest="paced", action="store_false")
    return parser.parse_args()


async def publish_all(url: str) -> tuple[int, int]:
    conn = await asyncpg.connect(url)
    try:
        changed = int((await conn.execute(PUBLISH)).split()[-1])
        # Every table, whatever changed: the events the seed's writes made were numbered by
        # the server after the seed's vacuum, and a database without autovacuum (as this
        # machine's) keeps the planner's old statistics of them (all pending: the sequencer's
        # check then reads the whole table, 2 s, every few seconds).
        await conn.execute("VACUUM ANALYZE")
        live = await conn.fetchval(
            "SELECT count(*) FROM units WHERE publishing_status = 'published' "
            "AND channels::jsonb @> '[\"website\"]'"
        )
    finally:
        await conn.close()
    return changed, int(live)


async def live_ids(url: str, count: int = 2_000) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT id FROM units TABLESAMPLE SYSTEM (2) WHERE publishing_status = 'published' "
            "AND availability_status <> 'blocked' LIMIT $1",
            count,
        )
    finally:
        await conn.close()
    return [str(row["id"]) for row in rows]


def measure(base: str, key: str, args: argparse.Namespace, wrk: dict[str, Any]) -> dict[str, Any]:
    options = {"connections": args.connections, **wrk}
    if args.warmup:
        run_wrk(base, key, duration=args.warmup, **options)
    runs = [run_wrk(base, key, duration=args.duration, **options) for _ in range(args.runs)]
    return {**{m: statistics.median(r[m] for r in runs) for m in runs[0]}, "runs": runs}


def paced(
    base: str, key: str, args: argparse.Namespace, listed: str, rate: float
) -> dict[str, Any]:
    wrk = {
        "connections": args.connections,
        "threads": WRK_THREADS,
        "script": "paths.lua",
        "script_args": (listed, f"{rate / WRK_THREADS:.2f}"),
    }
    runs = [run_wrk(base, key, duration=args.duration, **wrk) for _ in range(args.runs)]
    return {"rate": rate, **{m: statistics.median(r[m] for r in runs) for m in runs[0]}}


def main() -> None:
    args = parse_args()
    RESULTS.mkdir(exist_ok=True)
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, _ = asyncio.run(prepare(args.database_url, args.units, args.reuse))
    changed, live = asyncio.run(publish_all(args.database_url))
    ids = asyncio.run(live_ids(args.database_url))
    any_ids = asyncio.run(some_ids(args.database_url))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = RESULTS / "channels_server.log"
    extra = {"UNITS_API_PUBLIC_RATE_LIMIT": "100000000/minute", "UNITS_API_ACCESS_LOG": "false"}
    server = start_server(args.database_url, port, 1, log, extra)
    report: dict[str, Any] = {"units": args.units, "live": live, "published_now": changed}
    try:
        pages = [f"/listings/{unit_id}" for unit_id in ids]
        with httpx.Client(base_url=base, timeout=60) as client:
            tags = []
            for path in pages:
                answer = client.get(path)
                assert answer.status_code == 200, (path, answer.status_code)
                tags.append(f"{path}\t{answer.headers['etag']}")
            for city in CITIES:
                assert client.get("/listings/", params={"city": city}).status_code == 200
            searches = [
                "/listings/?" + urlencode({"q": word, "city": city})
                for word in WORDS
                for city in CITIES
            ]
            # Each search made once, alone: what a search costs before its page is kept (the
            # load below then reads kept pages while no unit changes).
            cold = []
            for path in searches:
                started = time.perf_counter()
                assert client.get(path).status_code == 200, path
                cold.append(time.perf_counter() - started)
            report["cold_search_s"] = {
                "median": statistics.median(cold),
                "max": max(cold),
                "searches": len(cold),
            }
        conditional = RESULTS / "conditional_pages.txt"
        conditional.write_text("\n".join(tags) + "\n")
        scenarios = {
            "GET one unit": {
                "script": "paths.lua",
                "script_args": (str(paths_file([f"/api/v2/units/{i}" for i in any_ids])),),
            },
            "listing page": {"script": "paths.lua", "script_args": (str(paths_file(pages)),)},
            "listing page, 304": {"script": "conditional.lua", "script_args": (str(conditional),)},
            "listings, words and a city": {
                "script": "paths.lua",
                "script_args": (str(paths_file(searches)),),
            },
        }
        figures: dict[str, Any] = {}
        scale = 1.0
        for name, wrk in scenarios.items():
            figures[name] = measure(base, key, args, wrk)
            if name == "GET one unit":
                scale = scale_of(name, figures[name]["rps"])
            target = TARGETS[name]
            if target and "p99_ms" in target and args.paced:
                # at once, before a heavier scenario leaves work behind
                listed = wrk["script_args"][0]
                figures[name]["paced"] = paced(base, key, args, listed, target["rps"] / scale)
            time.sleep(PAUSE)  # what a scenario left in flight ends before the next
        report["scale"] = scale
        report["scenarios"] = figures
        report["server_peak_rss_mb"] = peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    (RESULTS / "channels.json").write_text(json.dumps(report, indent=2))
    print_report(report)


def print_report(report: dict[str, Any]) -> None:
    scale = report["scale"]
    print(f"{report['units']:,} units, {report['live']:,} live on the website; scale {scale:.2f}")
    print(f"{'scenario':<30}{'req/s':>10}{'at target scale':>17}{'target':>9}{'p99 ms':>9}")
    for name, figures in report["scenarios"].items():
        target = TARGETS[name]
        scaled = figures["rps"] * scale
        print(
            f"{name:<30}{figures['rps']:>10,.0f}{scaled:>17,.0f}"
            f"{(target or {}).get('rps', 0):>9,}{figures['p99_ms']:>9.1f}"
            f"{figures['non_2xx']:>9,} non-2xx"
        )
        if "paced" in figures:
            paced_at = figures["paced"]
            print(
                f"{'  paced at ' + format(paced_at['rate'], ',.0f') + '/s':<30}"
                f"{paced_at['rps']:>10,.0f}{'':>17}{'':>9}{paced_at['p99_ms']:>9.1f}"
                f"  (p99 at target scale {paced_at['p99_ms'] / scale:.1f} ms)"
            )
    if "cold_search_s" in report:
        cold = report["cold_search_s"]
        print(
            f"each of {cold['searches']} searches made once, alone, before: median"
            f" {cold['median']:.2f} s, slowest {cold['max']:.2f} s"
        )
    print(f"server peak RSS {report['server_peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
