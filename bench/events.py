"""Benchmark of the change feed and webhook delivery, on PostgreSQL.

1. feed page: GET /api/v2/events?after=<random>&limit=100 with wrk, at --events events
   (seeded units, their events copied in SQL, then numbered by the product's sequencer);
2. following: one client reading pages of 1,000 from the start, events/s;
3. creates: wrk POSTs against a server with background work off and nothing reading the feed
   (events stay unnumbered: the write path alone) and against one with its worker on and a
   follower polling the feed (numbering, fan-out); runs alternate; the ratio, and the event
   rows the runs with the feed wrote, updated and left dead (pg_stat_user_tables);
4. deliveries/s: --deliveries units written with a webhook subscribed, then one
   `units-api worker` process delivers them to a fast receiver (fan-out included);
5. first attempt after the write's response: an open-loop 200 creates/s to a server with its
   worker on; receiver arrival minus response time, p50/p95/p99;
6. a bulk update of --bulk units by filter: from the request to the last delivery.

    make bench-events                     # 1,000,000 events, 3 runs
    make bench-events EVENTS_ARGS="--units 5000 --events 50000 --deliveries 2000 --runs 1"
    make bench-events EVENTS_ARGS="--reuse --parts creates"   # one measurement
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
from harness import (
    DEFAULT_DATABASE,
    HERE,
    RESULTS,
    free_port,
    recreate_database,
    run_wrk,
    server_env,
    start_server,
)
from sqlalchemy.engine import make_url

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.events.sequencer import sequence
from units_api.http.json import dumps
from units_api.migrate import upgrade
from units_api.sample_data import fake_unit
from units_api.units.seeding import seed_units
from units_api.webhooks import service as webhooks
from units_api.webhooks.schemas import WebhookCreate

# Both servers without the dashboards' copy: its load at each server's start, on threads of
# its own, fell inside the measured runs (10-14 % of the samples of either server) and has
# nothing to do with the feed.
JOBS_OFF = {
    "UNITS_API_RUN_JOBS": "false",
    "UNITS_API_ACCESS_LOG": "false",
    "UNITS_API_DASHBOARDS_COPY": "false",
}
JOBS_ON = {
    "UNITS_API_RUN_JOBS": "true",
    "UNITS_API_ACCESS_LOG": "false",
    "UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true",
    "UNITS_API_DASHBOARDS_COPY": "false",
}


PARTS = ("feed_page", "follow", "creates", "deliveries", "first_attempt", "bulk")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=50_000, help="units seeded first")
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the feed")
    parser.add_argument("--deliveries", type=int, default=20_000)
    parser.add_argument("--bulk", type=int, default=10_000, help="units of the bulk update")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="the measurements to run, a comma list of: " + ", ".join(PARTS),
    )
    parser.add_argument("--connections", type=int, default=32, help="of the create runs")
    parser.add_argument("--feed-connections", type=int, default=2, help="of the feed pages")
    parser.add_argument("--follow-seconds", type=float, default=10)
    parser.add_argument("--latency-seconds", type=float, default=20)
    parser.add_argument("--rate", type=float, default=200, help="creates/s of the latency run")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("UNITS_API_BENCH_DATABASE_URL", DEFAULT_DATABASE + "_events"),
    )
    args = parser.parse_args()
    args.parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    return args


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def fetchval(url: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(dsn(url))
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


# --- data -------------------------------------------------------------------------------


async def seed_feed(url: str, units: int, events: int, reuse: bool) -> tuple[str, int]:
    """Units, then their events copied until the feed holds `events`, numbered by the
    product's sequencer; an admin key; the feed's head."""
    db = Database(create_engine(url, pool_size=2))
    try:
        if not reuse:
            await seed_units(db, units, seed=1)
        conn = await asyncpg.connect(dsn(url))
        try:
            have = await conn.fetchval("SELECT count(*) FROM events")
            while have < events:
                await conn.execute(
                    "INSERT INTO events (id, type, occurred_at, unit_id, version, actor, data) "
                    "SELECT gen_random_uuid(), type, occurred_at, unit_id, version, actor, data "
                    "FROM events ORDER BY seq LIMIT $1",
                    events - have,
                )
                have = await conn.fetchval("SELECT count(*) FROM events")
        finally:
            await conn.close()
        await sequence(db)
        head = int(await fetchval(url, "SELECT pos FROM feed_positions WHERE name = 'head'"))
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            key = str((await create_key(conn, spec))["key"])
        await vacuum(url)
        return key, head
    finally:
        await db.dispose()


async def vacuum(url: str) -> None:
    conn = await asyncpg.connect(dsn(url))
    try:
        # No webhook yet: the fan-out has nothing to do for what is already there.
        await conn.execute(
            "UPDATE feed_positions SET pos = (SELECT pos FROM feed_positions WHERE name = 'head')"
            " WHERE name = 'webhooks'"
        )
        for statement in ("VACUUM ANALYZE", "CHECKPOINT"):
            await conn.execute(statement)
    finally:
        await conn.close()


async def subscribe(url: str, target: str, types: list[str]) -> None:
    db = Database(create_engine(url, pool_size=2))
    try:
        async with db.transaction() as conn:
            await webhooks.create(conn, WebhookCreate(url=target, eventTypes=types), True)
    finally:
        await db.dispose()


async def drop_webhooks(url: str) -> None:
    await fetchval(url, "DELETE FROM webhooks")


# --- processes --------------------------------------------------------------------------


@contextmanager
def server(url: str, env: dict[str, str], log: str) -> Iterator[str]:
    port = free_port()
    process = start_server(url, port, 1, RESULTS / log, env)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def receiver() -> Iterator[str]:
    port = free_port()
    log = (RESULTS / "receiver.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(HERE / "receiver.py"), str(port)], stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"{base}/stats")
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def received(base: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{base}/stats", timeout=30).json()
    return stats


# --- measurements -----------------------------------------------------------------------


def feed_pages(args: argparse.Namespace, url: str, key: str, head: int) -> dict[str, float]:
    runs = []
    with server(url, JOBS_OFF, "events-server.log") as base:
        for _ in range(args.runs):
            runs.append(
                run_wrk(
                    base,
                    key,
                    connections=args.feed_connections,
                    duration=args.duration,
                    script="feed.lua",
                    script_args=(str(head), "100"),
                )
            )
    return {metric: statistics.median(run[metric] for run in runs) for metric in runs[0]}


def follow(args: argparse.Namespace, url: str, key: str) -> float:
    rates = []
    with server(url, JOBS_OFF, "events-server.log") as base:
        for _ in range(args.runs):
            read, after, started = 0, "0", time.perf_counter()
            with httpx.Client(base_url=base, headers=auth(key), timeout=60) as client:
                while time.perf_counter() - started < args.follow_seconds:
                    page = client.get("/api/v2/events", params={"after": after, "limit": 1000})
                    body = orjson.loads(page.content)
                    read += len(body["data"])
                    after = body["nextCursor"]
                    if not body["data"]:
                        break
            rates.append(read / (time.perf_counter() - started))
    return statistics.median(rates)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def poll_feed(base: str, key: str, stop: threading.Event, tally: dict[str, float]) -> None:
    """A follower at the feed's end, as a website would be; its own CPU (which the server's
    machine pays: a tenth of a core) and pages read go in `tally`."""
    started, wall = time.thread_time(), time.perf_counter()
    pages = 0
    with httpx.Client(base_url=base, headers=auth(key), timeout=60) as client:
        after = client.get("/api/v2/events", params={"types": "import.failed"}).json()
        cursor = after["nextCursor"]
        while not stop.is_set():
            body = client.get("/api/v2/events", params={"after": cursor, "limit": 100}).json()
            pages += 1
            cursor = body["nextCursor"]
            if len(body["data"]) < 100:
                time.sleep(0.05)
    wall = time.perf_counter() - wall
    tally["follower_cpu_share"] = (time.thread_time() - started) / wall
    tally["follower_pages_per_s"] = pages / wall


async def event_rows(url: str) -> dict[str, int]:
    """The events table's counts of rows inserted, updated and dead (pg_stat_user_tables),
    once the servers' backends have flushed their counts (at exit)."""
    conn = await asyncpg.connect(dsn(url))
    try:
        row = await conn.fetchrow(
            "SELECT n_tup_ins, n_tup_upd, n_dead_tup FROM pg_stat_user_tables"
            " WHERE relname = 'events'"
        )
        return {"inserted": row[0], "updated": row[1], "dead": row[2]}
    finally:
        await conn.close()


def creates(args: argparse.Namespace, url: str, key: str, unit_file: Path) -> dict[str, Any]:
    """The two servers' create runs, alternating; for the runs with the feed, the event rows
    each wrote, updated and left dead (before the vacuum that follows each run)."""
    runs: dict[str, list[dict[str, float]]] = {"write path": [], "with feed": []}
    for _ in range(args.runs):
        for name, env in (("write path", JOBS_OFF), ("with feed", JOBS_ON)):
            if name == "with feed":
                time.sleep(1)  # the last run's backends have exited and flushed their counts
                rows_before = asyncio.run(event_rows(url))
            with server(url, env, "events-server.log") as base:
                stop = threading.Event()
                tally: dict[str, float] = {}
                follower = threading.Thread(target=poll_feed, args=(base, key, stop, tally))
                if name == "with feed":
                    follower.start()
                try:
                    runs[name].append(
                        run_wrk(
                            base,
                            key,
                            connections=args.connections,
                            duration=args.duration,
                            script="units.lua",
                            script_args=("create", str(unit_file)),
                        )
                    )
                finally:
                    stop.set()
                    if follower.is_alive():
                        follower.join()
                runs[name][-1].update(tally)
            if name == "with feed":
                time.sleep(1)
                rows_after = asyncio.run(event_rows(url))
                runs[name][-1].update(
                    {
                        "events_written": rows_after["inserted"] - rows_before["inserted"],
                        "events_updated": rows_after["updated"] - rows_before["updated"],
                        "events_dead": rows_after["dead"],
                    }
                )
            # Number what the write path left, so the next run starts alike.
            asyncio.run(number(url))
    medians = {
        name: {metric: statistics.median(run[metric] for run in found) for metric in found[0]}
        for name, found in runs.items()
    }
    medians["ratio"] = {"rps": medians["with feed"]["rps"] / medians["write path"]["rps"]}
    # Each run's pair, for the ratio of runs side by side on a machine shared with other work.
    medians["pairs"] = {
        "ratio": [
            fed["rps"] / alone["rps"]
            for alone, fed in zip(runs["write path"], runs["with feed"], strict=True)
        ]
    }
    return medians


async def seed(url: str, count: int) -> None:
    db = Database(create_engine(url, pool_size=2))
    try:
        await seed_units(db, count, seed=2)
    finally:
        await db.dispose()


async def number(url: str) -> None:
    db = Database(create_engine(url, pool_size=2))
    try:
        await sequence(db)
    finally:
        await db.dispose()
    await vacuum(url)


def deliveries(args: argparse.Namespace, url: str, target: str) -> float:
    asyncio.run(drop_webhooks(url))
    asyncio.run(subscribe(url, f"{target}/hook", ["unit.created"]))
    asyncio.run(seed(url, args.deliveries))
    env = {**server_env(), "UNITS_API_DATABASE_URL": url, **JOBS_ON}
    log = (RESULTS / "events-worker.log").open("wb")
    started = time.perf_counter()
    worker = subprocess.Popen(
        [sys.executable, "-m", "units_api", "worker"], env=env, stdout=log, stderr=log
    )
    try:
        sql = "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'"
        while asyncio.run(fetchval(url, sql)) < args.deliveries:
            if worker.poll() is not None:
                raise SystemExit("the worker stopped; see bench/results/events-worker.log")
            time.sleep(0.2)
        return args.deliveries / (time.perf_counter() - started)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        asyncio.run(drop_webhooks(url))


async def open_loop(
    base: str, key: str, body: bytes, rate: float, seconds: float
) -> dict[str, float]:
    """Creates at a fixed rate; when each response returned (wall clock), by unit id."""
    done: dict[str, float] = {}
    headers = {**auth(key), "content-type": "application/json"}
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits) as client:

        async def one() -> None:
            response = await client.post("/api/v2/units/", content=body)
            if response.status_code == 201:
                done[response.json()["id"]] = time.time()

        tasks = []
        started = time.perf_counter()
        for i in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, started + i / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(one()))
        await asyncio.gather(*tasks)
    return done


def first_attempts(args: argparse.Namespace, url: str, key: str, target: str) -> dict[str, Any]:
    asyncio.run(subscribe(url, f"{target}/hook", ["unit.created"]))
    body = dumps(fake_unit(random.Random(7)))
    try:
        with server(url, JOBS_ON, "events-server.log") as base:
            httpx.post(f"{target}/reset")
            done = asyncio.run(open_loop(base, key, body, args.rate, args.latency_seconds))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                arrived = received(target)["first"].get("unit.created", {})
                if all(unit in arrived for unit in done):
                    break
                time.sleep(0.5)
        lags = sorted(arrived[unit] - at for unit, at in done.items() if unit in arrived)
        return {
            "writes": len(done),
            "delivered": len(lags),
            "p50_ms": 1000 * lags[len(lags) // 2],
            "p95_ms": 1000 * lags[int(len(lags) * 0.95)],
            "p99_ms": 1000 * lags[int(len(lags) * 0.99)],
        }
    finally:
        asyncio.run(drop_webhooks(url))


def bulk(args: argparse.Namespace, url: str, key: str, target: str) -> dict[str, Any]:
    """A bulk update by filter over the oldest units (at most --bulk: those created before
    the next one's time), delivered to one endpoint."""
    asyncio.run(subscribe(url, f"{target}/hook", ["unit.updated"]))
    last = asyncio.run(
        fetchval(
            url,
            "SELECT created_at FROM units ORDER BY created_at, id OFFSET $1 LIMIT 1",
            args.bulk,
        )
    )
    since = last.isoformat().replace("+00:00", "Z")
    matching = asyncio.run(fetchval(url, "SELECT count(*) FROM units WHERE created_at < $1", last))
    try:
        with server(url, JOBS_ON, "events-server.log") as base:
            httpx.post(f"{target}/reset")
            started = time.perf_counter()
            response = httpx.put(
                f"{base}/api/v2/units/bulk/update",
                headers=auth(key),
                json={"filter": f"createdAt=lt={since}", "patch": {"guaranty": 3}},
                timeout=300,
            )
            answered = time.perf_counter() - started
            if response.status_code != 200:
                raise SystemExit(f"bulk update: {response.status_code} {response.text[:300]}")
            updated = response.json()["updated"]
            while received(target)["count"] < updated:
                if time.perf_counter() - started > 300:
                    break
                time.sleep(0.1)
            delivered = time.perf_counter() - started
        return {
            "matched": matching,
            "updated": updated,
            "answered_s": answered,
            "delivered_s": delivered,
        }
    finally:
        asyncio.run(drop_webhooks(url))


# --- report -----------------------------------------------------------------------------


def print_report(report: dict[str, Any]) -> None:
    """The measurements that were run, one line each."""
    print(f"\n{report['events']:,} events in the feed; median of {report['runs']} runs")
    rows = []
    if "feed_page" in report:
        page = report["feed_page"]
        figure = f"{page['p99_ms']:.1f} ms ({page['rps']:,.0f} req/s)"
        rows.append(("feed page of 100, p99", figure, "<= 20 ms"))
    if "follow_events_per_s" in report:
        figure = f"{report['follow_events_per_s']:,.0f} events/s"
        rows.append(("following, pages of 1,000", figure, ">= 20,000/s"))
    if "creates" in report:
        created = report["creates"]
        fed = created["with feed"]
        rows += [
            ("creates, write path alone", f"{created['write path']['rps']:,.0f}/s", ""),
            (
                "creates, worker + follower",
                f"{fed['rps']:,.0f}/s (ratio {created['ratio']['rps']:.2f})",
                ">= 0.9x",
            ),
            (
                "the follower's own CPU",
                f"{fed['follower_cpu_share']:.0%} of a core, "
                f"{fed['follower_pages_per_s']:,.0f} pages/s",
                "",
            ),
            (
                "event rows, worker + follower",
                f"{fed['events_written']:,.0f} written, {fed['events_updated']:,.0f} updated, "
                f"{fed['events_dead']:,.0f} dead",
                "0 updated",
            ),
        ]
    if "deliveries_per_s" in report:
        figure = f"{report['deliveries_per_s']:,.0f}/s"
        rows.append(("deliveries, one worker", figure, ">= 1,000/s"))
    if "first_attempt" in report:
        lat = report["first_attempt"]
        rows.append(
            (
                f"first attempt at {report['rate']:.0f} writes/s",
                f"p50 {lat['p50_ms']:.0f} ms, "
                f"p99 {lat['p99_ms']:.0f} ms ({lat['delivered']}/{lat['writes']})",
                "p99 <= 1 s",
            )
        )
    if "bulk" in report:
        big = report["bulk"]
        rows.append(
            (
                f"bulk of {big['updated']:,} delivered",
                f"{big['delivered_s']:.1f} s (answered in {big['answered_s']:.1f} s)",
                "<= 15 s",
            )
        )
    for name, figure, target in rows:
        print(f"{name:<32}{figure:<44}{target}")


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    RESULTS.mkdir(exist_ok=True)
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, head = asyncio.run(seed_feed(args.database_url, args.units, args.events, args.reuse))
    unit_file = RESULTS / "unit.json"
    unit_file.write_bytes(dumps(fake_unit(random.Random(7))))
    report: dict[str, Any] = {"events": head, "runs": args.runs, "rate": args.rate}
    url = args.database_url

    def keep(name: str, figures: Any) -> None:
        report[name] = figures
        (RESULTS / "events.json").write_text(json.dumps(report, indent=2, default=str))
        print(name, figures, flush=True)

    if "feed_page" in args.parts:
        keep("feed_page", feed_pages(args, url, key, head))
    if "follow" in args.parts:
        keep("follow_events_per_s", follow(args, url, key))
    if "creates" in args.parts:
        keep("creates", creates(args, url, key, unit_file))
    if set(args.parts).isdisjoint(("deliveries", "first_attempt", "bulk")):
        print_report(report)
        return
    with receiver() as target:
        if "deliveries" in args.parts:
            keep("deliveries_per_s", deliveries(args, url, target))
        if "first_attempt" in args.parts:
            keep("first_attempt", first_attempts(args, url, key, target))
        if "bulk" in args.parts:
            keep("bulk", bulk(args, url, key, target))
    print_report(report)


if __name__ == "__main__":
    main()
