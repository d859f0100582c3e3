"""Benchmark of a meta-catalog channel's home-listings feed, on PostgreSQL.

Seeds --units units (about 4 KB each, every nested list filled), publishes every one to a
meta-catalog channel (one SQL UPDATE), starts `units-api serve` (one process), and downloads
the whole feed as XML, as CSV and as gzip-compressed XML through it: seconds, units/s,
megabytes, the server's CPU seconds, and its peak RSS (VmHWM) after each. Target: 1,000,000
units as XML in 60 s or less, the server's RSS at most 250 MB.

    make bench-feeds                                    # 1,000,000 units
    make bench-feeds FEEDS_ARGS="--units 20000"
    make bench-feeds FEEDS_ARGS="--reuse"               # keep the seeded, published units
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import zlib
from typing import Any

import asyncpg
import httpx
from harness import (
    RESULTS,
    cpu_seconds,
    free_port,
    peak_rss_mb,
    recreate_database,
    start_server,
)
from sqlalchemy.engine import make_url

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.clock import format_time, utcnow
from units_api.db import Database, create_engine
from units_api.migrate import upgrade
from units_api.units.seeding import seed_units

DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench_feeds"
CHANNEL = "bench-meta"
TARGET_SECONDS = 60.0
TARGET_RSS_MB = 250.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1_000_000)
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument("--database-url", default=DATABASE)
    return parser.parse_args()


async def seed(url: str, count: int) -> None:
    db = Database(create_engine(url, pool_size=2))
    try:
        await seed_units(db, count, seed=1)
    finally:
        await db.dispose()


async def admin_key(url: str) -> str:
    db = Database(create_engine(url, pool_size=1))
    try:
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            return str((await create_key(conn, spec))["key"])
    finally:
        await db.dispose()


async def publish_all(url: str) -> int:
    """Every unit published to the website and the channel, in one statement (the documents'
    `publishing` rewritten in place, the columns beside them), then the table vacuumed."""
    publishing = json.dumps(
        {
            "status": "published",
            "channels": ["website", CHANNEL],
            "publishedAt": format_time(utcnow()),
            "scheduledAt": None,
        },
        separators=(",", ":"),
    )
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        # jsonb_set, not a text edit: a record another benchmark rewrote through JSONB is
        # spaced differently.
        status = await conn.execute(
            "UPDATE units SET publishing_status = 'published', published_at = now(), "
            "channels = $2, doc = jsonb_set(doc::jsonb, '{publishing}', $1::jsonb)::text",
            publishing,
            json.dumps(["website", CHANNEL]),
        )
        # As autovacuum would after such a change: the planner's statistics, the visibility map.
        await conn.execute("VACUUM ANALYZE")  # every table: see bench/channels.py
        return int(status.split()[-1])
    finally:
        await conn.close()


def download(client: httpx.Client, path: str, auth: tuple[str, str], gzip: bool) -> dict[str, Any]:
    """One whole feed, read as it streams: seconds, bytes and listings."""
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    listings, size, carry = 0, 0, b""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None
    started = time.perf_counter()
    with client.stream("GET", path, auth=auth, headers=headers) as response:
        assert response.status_code == 200, response.read()[:500]
        for chunk in response.iter_raw():
            size += len(chunk)
            text = carry + (inflate.decompress(chunk) if inflate else chunk)
            if path.endswith(".xml"):
                # A tag cut between two chunks is counted once: what is carried over is
                # shorter than the tag.
                listings += text.count(b"</listing>")
                carry = text[-len(b"</listing>") + 1 :]
            else:
                listings += text.count(b"\n")  # the seeded texts have no line breaks
    seconds = time.perf_counter() - started
    if path.endswith(".csv"):
        listings -= 1  # the header row
    return {"seconds": round(seconds, 2), "mb": round(size / 2**20, 1), "listings": listings}


def main() -> None:
    args = parse_args()
    RESULTS.mkdir(exist_ok=True)
    url = args.database_url
    if not args.reuse:
        asyncio.run(recreate_database(url))
    upgrade(url)  # a kept database too: the server does not migrate it
    if not args.reuse:
        started = time.perf_counter()
        asyncio.run(seed(url, args.units))
        print(f"seeded {args.units:,} units in {time.perf_counter() - started:.0f}s", flush=True)
        print(f"published {asyncio.run(publish_all(url)):,} units", flush=True)
    key = asyncio.run(admin_key(url))
    port = free_port()
    server = start_server(url, port, 1, RESULTS / "feeds-server.log")
    report: dict[str, Any] = {"units": args.units}
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=600) as client:
            channel = client.put(
                f"/api/v2/channels/{CHANNEL}",
                json={"kind": "meta-catalog", "settings": {"propertyTypes": {"villa": "house"}}},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert channel.status_code in (200, 201), channel.text
            token = channel.json()["feedToken"]
            if token is None:  # kept from an earlier run: a new one
                rotated = client.post(
                    f"/api/v2/channels/{CHANNEL}/rotate-token",
                    headers={"Authorization": f"Bearer {key}"},
                )
                token = rotated.json()["feedToken"]
            auth = (CHANNEL, token)
            report["rss_mb_before"] = round(peak_rss_mb(server.pid), 1)
            for name, extension, gzip in (
                ("xml", "xml", False),
                ("csv", "csv", False),
                ("xml gzip", "xml", True),
            ):
                cpu = cpu_seconds(server.pid)
                figures = download(client, f"/feeds/{CHANNEL}.{extension}", auth, gzip)
                figures["server_cpu_s"] = round(cpu_seconds(server.pid) - cpu, 2)
                figures["units_per_s"] = round(figures["listings"] / figures["seconds"])
                figures["peak_rss_mb"] = round(peak_rss_mb(server.pid), 1)
                report[name] = figures
                print(name, json.dumps(figures), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    xml = report["xml"]
    scaled = xml["seconds"] * 1_000_000 / max(xml["listings"], 1)
    report["xml_seconds_at_1m_units"] = round(scaled, 1)
    report["targets"] = {
        "xml_seconds": TARGET_SECONDS,
        "rss_mb": TARGET_RSS_MB,
        "met": scaled <= TARGET_SECONDS and report["xml gzip"]["peak_rss_mb"] <= TARGET_RSS_MB,
    }
    (RESULTS / "feeds.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
