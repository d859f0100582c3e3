"""Benchmark of what search engines read: the sitemaps at scale, and IndexNow's latency.

    make bench-sitemaps                                   # 1,000,000 units
    .venv/bin/python bench/sitemaps.py --units 20000 --reuse

Seeds N units into PostgreSQL (COPY) and publishes every one to the `website` channel with
one SQL statement (a benchmark's shortcut: no events), starts one `units-api serve` with an
IndexNow key whose endpoint is a receiver in this process, then:

1. crawls as a search engine does: robots.txt, the sitemap index, every file it names
   (without compression, then with gzip), counting URLs and bytes; reports each crawl's time
   and the server's peak resident memory (VmHWM);
2. publishes new units through the API at a steady rate and reports, for each, the time from
   the publish's answer to the receiver getting its page (p50, p99, max).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import threading
import time
from typing import Any

import httpx
import orjson
from aiohttp import web
from harness import RESULTS, free_port, peak_rss_mb, recreate_database, start_server
from sqlalchemy import func, select

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.migrate import upgrade
from units_api.units.seeding import seed_units
from units_api.units.tables import units

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench_sitemaps"
KEY = "bench-indexnow-key"
READY = {
    "name": "Bench Villa",
    "type": "villa",
    "city": "Cairo",
    "price": 2500000,
    "unitImageUrl": "https://cdn.example.com/u/1.jpg",
}
PUBLISH_ALL = """
UPDATE units SET publishing_status = 'published', published_at = now(), channels = '["website"]',
    doc = jsonb_set(jsonb_set(doc::jsonb, '{publishing,status}', '"published"'),
                    '{publishing,channels}', '["website"]')::text
WHERE publishing_status <> 'published'
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=1_000_000)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument("--rate", type=float, default=100.0, help="publishes a second")
    parser.add_argument("--publishes", type=int, default=1000)
    return parser.parse_args()


async def prepare(url: str, count: int) -> tuple[str, float | None]:
    """Seed up to `count` units, publish them all to the website; an admin key."""
    db = Database(create_engine(url, pool_size=2))
    seconds = None
    try:
        async with db.read() as conn:
            existing = int(
                (await conn.execute(select(func.count()).select_from(units))).scalar_one()
            )
        if existing < count:
            started = time.perf_counter()
            await seed_units(db, count - existing, seed=1)
            seconds = time.perf_counter() - started
        raw = await db.raw_connection()
        await raw.execute(PUBLISH_ALL)
        await raw.execute("VACUUM ANALYZE")  # every table: see bench/channels.py
        await raw.close()
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            key: str = (await create_key(conn, spec))["key"]
        return key, seconds
    finally:
        await db.dispose()


class Receiver:
    """An IndexNow endpoint on loopback, in a thread of its own: when each URL first came."""

    def __init__(self) -> None:
        self.port = free_port()
        self.first: dict[str, float] = {}
        self.requests = 0
        self._ready = threading.Event()

    async def _receive(self, request: web.Request) -> web.Response:
        now = time.time()
        self.requests += 1
        for url in orjson.loads(await request.read())["urlList"]:
            self.first.setdefault(url, now)
        return web.Response(status=202)

    def start(self) -> None:
        threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True).start()
        self._ready.wait(10)

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/indexnow", self._receive)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._ready.set()
        await asyncio.Event().wait()


def crawl(base: str, gzip: bool) -> dict[str, Any]:
    """robots.txt, the index, every file; URLs, bytes (as sent) and seconds."""
    encoding = "gzip" if gzip else "identity"
    started = time.perf_counter()
    urls = sent = files = 0
    with httpx.Client(base_url=base, timeout=120, headers={"Accept-Encoding": encoding}) as client:
        robots = client.get("/robots.txt").text
        index_url = re.search(r"^Sitemap: (\S+)$", robots, re.M)
        assert index_url is not None, robots
        index = client.get(index_url[1].removeprefix(base)).text
        for location in re.findall(r"<loc>([^<]+)</loc>", index):
            files += 1
            with client.stream("GET", location.removeprefix(base)) as response:
                assert response.status_code == 200, response.status_code
                tail = b""
                for chunk in response.iter_bytes():
                    text = tail + chunk
                    urls += text.count(b"<url>")
                    tail = text[-4:]
                sent += response.num_bytes_downloaded
    return {
        "files": files,
        "urls": urls,
        "mb_sent": round(sent / 1e6, 1),
        "seconds": round(time.perf_counter() - started, 2),
    }


async def publish_paced(base: str, key: str, count: int, rate: float) -> dict[str, float]:
    """Create `count` ready drafts, then publish them `rate` a second; when each answered."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        ids = []
        for _ in range(count):
            created = await client.post("/api/v2/units/", json=READY)
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        answered: dict[str, float] = {}

        async def publish(unit_id: str) -> None:
            body = {"action": "publish", "channels": ["website"]}
            done = await client.put(f"/api/v2/units/publishing-actions/{unit_id}", json=body)
            assert done.status_code == 200, done.text
            answered[unit_id] = time.time()

        tasks = []
        started = time.perf_counter()
        for number, unit_id in enumerate(ids):
            await asyncio.sleep(max(0.0, started + number / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(publish(unit_id)))
        await asyncio.gather(*tasks)
    return answered


def latencies(base: str, receiver: Receiver, answered: dict[str, float]) -> dict[str, float]:
    deadline = time.time() + 120
    wanted = {f"{base}/listings/{unit_id}": unit_id for unit_id in answered}
    while time.time() < deadline and not all(url in receiver.first for url in wanted):
        time.sleep(0.2)
    seconds = sorted(
        receiver.first[url] - answered[unit_id]
        for url, unit_id in wanted.items()
        if url in receiver.first
    )
    return {
        "received": len(seconds),
        "sent": len(wanted),
        "requests": receiver.requests,
        "p50_s": round(statistics.median(seconds), 2),
        "p99_s": round(seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))], 2),
        "max_s": round(seconds[-1], 2),
    }


def main() -> None:
    args = parse_args()
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, seeded = asyncio.run(prepare(args.database_url, args.units))
    RESULTS.mkdir(exist_ok=True)
    receiver = Receiver()
    receiver.start()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    extra = {
        "UNITS_API_PUBLIC_BASE_URL": base,
        "UNITS_API_INDEXNOW_KEY": KEY,
        "UNITS_API_INDEXNOW_ENDPOINT": f"http://127.0.0.1:{receiver.port}/indexnow",
        "UNITS_API_ACCESS_LOG": "false",
    }
    server = start_server(args.database_url, port, 1, RESULTS / "sitemaps-server.log", extra)
    try:
        plain = crawl(base, gzip=False)
        packed = crawl(base, gzip=True)
        rss = peak_rss_mb(server.pid)
        answered = asyncio.run(publish_paced(base, key, args.publishes, args.rate))
        indexnow = latencies(base, receiver, answered)
    finally:
        server.terminate()
        server.wait(30)
    report = {
        "units": args.units,
        "seed_seconds": seeded,
        "crawl": plain,
        "crawl_gzip": packed,
        "server_peak_rss_mb": round(rss, 1),
        "indexnow": {"rate_per_s": args.rate, **indexnow},
    }
    (RESULTS / "sitemaps.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
