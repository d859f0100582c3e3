"""Fresh dashboards: query-endpoint aggregates never asked before, at 1,000,000 units.

Each request groups by one or two of the groupable fields with count, sum, avg, min or max of
price or surface, under a filter whose bound is new each time (bench/lua/dashboards.lua), so
no remembered answer can give it. Measured with the database answering (the SQL GROUP BY,
`UNITS_API_DASHBOARDS_COPY=false`) and with the dashboards' copy (units/dashboards.py), at 1
and at 32 connections (wrk's timeout at 2 s: a request past it counts as a timeout), beside a
bare FastAPI + asyncpg GET one unit in the same run (bare_app.py), whose rate against
`harness.REFERENCE` gives the targets' scale. Also timed, on the database alone: the same
GROUP BY plainly, with parallel workers, and with a narrow covering index.

    make bench-dashboards                                  # seeds 1,000,000 units first
    make bench-dashboards DASHBOARDS_ARGS="--reuse"        # keep a seeded database
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from harness import (
    REFERENCE,
    RESULTS,
    free_port,
    read_wrk,
    recreate_database,
    start_server,
    wrk_command,
)
from write import start_bare

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.migrate import upgrade
from units_api.units.seeding import seed_units

DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench_dash"
TARGET_P50_MS = 60.0  # alone, at the targets' scale
TARGET_RPS = 60.0  # at 32 connections, at the targets' scale
# The dashboard as the database runs it (repository.aggregate, less its version).
CITY_TYPE_SQL = (
    "SELECT city, type, count(*), avg(price) FROM units WHERE price <= $1 "
    "GROUP BY city, type ORDER BY city NULLS LAST, type NULLS LAST LIMIT 100"
)
COVERING = "CREATE INDEX IF NOT EXISTS ix_bench_units_city_type_price ON units (city, type) "
COVERING += "INCLUDE (price)"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1_000_000)
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument("--database-url", default=DATABASE)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="server processes")
    parser.add_argument("--shape", default="mix", help="mix, or one of dashboards.lua's shapes")
    parser.add_argument(
        "--modes", default="sql,copy", help="sql (the database answers), copy, or both"
    )
    parser.add_argument("--no-alternatives", action="store_true")
    parser.add_argument(
        "--writers",
        type=int,
        default=2,
        help="connections PATCHing prices beside a last 32-connection run (0: none)",
    )
    return parser.parse_args()


async def prepare(url: str, count: int, reuse: bool) -> tuple[str, float | None]:
    db = Database(create_engine(url, pool_size=2))
    seconds = None
    try:
        raw = await db.raw_connection()
        existing = int(await raw.fetchval("SELECT count(*) FROM units"))
        await raw.close()
        if not reuse or existing < count:
            started = time.perf_counter()
            await seed_units(db, count - existing, seed=1)
            seconds = time.perf_counter() - started
        raw = await db.raw_connection()
        await raw.execute("VACUUM ANALYZE")  # the feed's positions too: read before each answer
        await raw.close()
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            key: str = (await create_key(conn, spec))["key"]
        return key, seconds
    finally:
        await db.dispose()


async def sql(url: str, statement: str, *args: Any) -> Any:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(statement, *args)
    finally:
        await conn.close()


def wait_numbered(url: str, seconds: float = 1800) -> None:
    """Until the server's sequencer has numbered every event (the copy catches up from the
    feed: a million unnumbered events would have it loaded again and again)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pending = asyncio.run(sql(url, "SELECT count(*) FROM events WHERE pos IS NULL"))
        if pending[0][0] == 0:
            return
        time.sleep(2)
    raise SystemExit("the feed's events were not numbered in time")


def wait_loaded(log: Path, workers: int, seconds: float = 600) -> list[float]:
    """Until each server process logged its copy loaded; the seconds each load took."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [
            float(match)
            for line in log.read_text(errors="replace").splitlines()
            if "copy loaded" in line
            for match in re.findall(r'"seconds":\s*([\d.]+)', line)
        ]
        if len(found) >= workers:
            return found
        time.sleep(1)
    raise SystemExit(f"the copy did not load; see {log}")


def rss_mb(pid: int) -> list[float]:
    """Resident memory now of each server process (the workers, or the one server)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    pids = [int(p) for p in children.stdout.split()] or [pid]
    found = []
    for each in pids:
        status = Path(f"/proc/{each}/status").read_text()
        match = re.search(r"VmRSS:\s+(\d+)", status)
        found.append(int(match.group(1)) / 1024 if match else 0.0)
    return found


def wrk(url: str, key: str, connections: int, args: argparse.Namespace) -> dict[str, float]:
    command = wrk_command(
        url,
        key,
        connections=connections,
        duration=args.duration,
        threads=min(2, connections),
        script="dashboards.lua",
        script_args=(args.shape,),
    )
    command[command.index("30s")] = "2s"  # a request past 2 s is a timeout
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return read_wrk(done.stdout)


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {name: statistics.median(run[name] for run in runs) for name in runs[0]}


def measure(base: str, key: str, args: argparse.Namespace) -> dict[str, Any]:
    """Medians of alternating runs at 1 and at 32 connections, after a warm-up."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
        body = {
            "groupBy": ["city", "type"],
            "aggregates": {"n": {"fn": "count"}, "avg": {"fn": "avg", "field": "price"}},
            "filter": "price=le=1234567.89",
        }
        assert client.post("/api/v2/units/query", json=body, timeout=60).status_code == 200
    alone, many = [], []
    for _ in range(args.runs):
        alone.append(wrk(base + "/api/v2/units/query", key, 1, args))
        many.append(wrk(base + "/api/v2/units/query", key, 32, args))
    found = {"alone": median_of(alone), "32": median_of(many), "runs": {"1": alone, "32": many}}
    if args.writers:
        found["with_writes"] = with_writes(base, key, args)
    return found


def with_writes(base: str, key: str, args: argparse.Namespace) -> dict[str, Any]:
    """32 connections of dashboards while `args.writers` connections PATCH prices of random
    units: every answer catches up with the writes before it."""
    writes = wrk_command(
        base + "/api/v2/units/",
        key,
        connections=args.writers,
        duration=args.duration,
        threads=1,
        script="units.lua",
        script_args=("patch", str(RESULTS / "dashboards-ids.txt")),
    )
    writer = subprocess.Popen(writes, stdout=subprocess.PIPE, text=True)
    read = wrk(base + "/api/v2/units/query", key, 32, args)
    out, _ = writer.communicate(timeout=args.duration + 60)
    return {"dashboards": read, "patches": read_wrk(out)}


def bare_get(url: str, args: argparse.Namespace) -> float:
    """The bare app's GET one unit at 32 connections: the machine's measure in this run."""
    ids = asyncio.run(sql(url, "SELECT id FROM units TABLESAMPLE SYSTEM (1) LIMIT 2000"))
    data = RESULTS / "dashboards-ids.txt"
    data.write_text("".join(f"{row['id']}\n" for row in ids))
    port = free_port()
    bare = start_bare(url, port, RESULTS / "dashboards-bare.log")
    try:
        runs = []
        for _ in range(args.runs):
            command = wrk_command(
                f"http://127.0.0.1:{port}/api/v2/units/",
                "none",
                connections=32,
                duration=args.duration,
                script="units.lua",
                script_args=("get", str(data)),
            )
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            runs.append(read_wrk(done.stdout)["rps"])
        return statistics.median(runs)
    finally:
        bare.terminate()
        bare.wait(timeout=30)


async def time_statement(url: str, setup: list[str], times: int = 5) -> float:
    """The median ms of CITY_TYPE_SQL under `setup`, each with a bound of its own."""
    conn = await asyncpg.connect(url)
    try:
        for statement in setup:
            await conn.execute(statement)
        await conn.fetch(CITY_TYPE_SQL, 1_000_000)  # warm
        found = []
        for i in range(times):
            started = time.perf_counter()
            await conn.fetch(CITY_TYPE_SQL, 2_000_000 + i * 1_000_003)
            found.append((time.perf_counter() - started) * 1000)
        return statistics.median(found)
    finally:
        await conn.close()


def alternatives(url: str) -> dict[str, float]:
    """The issue's dashboard on the database alone, ways that need no copy."""
    serial = ["SET max_parallel_workers_per_gather = 0"]
    parallel = ["SET max_parallel_workers_per_gather = 2", "SET parallel_setup_cost = 0"]
    found = {
        "plain, serial": asyncio.run(time_statement(url, serial)),
        "plain, 2 parallel workers": asyncio.run(time_statement(url, parallel)),
    }
    asyncio.run(sql(url, COVERING))
    try:
        asyncio.run(sql(url, "VACUUM ANALYZE units"))  # index-only scans need the map
        only = ["SET enable_seqscan = off"]
        found["covering index (city, type) INCLUDE (price), serial"] = asyncio.run(
            time_statement(url, [*serial, *only])
        )
        found["covering index, 2 parallel workers"] = asyncio.run(
            time_statement(url, [*parallel, *only])
        )
    finally:
        asyncio.run(sql(url, "DROP INDEX IF EXISTS ix_bench_units_city_type_price"))
    return found


def run_mode(url: str, key: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    log = RESULTS / f"dashboards-{mode}-server.log"
    extra = {"UNITS_API_DASHBOARDS_COPY": "true" if mode == "copy" else "false"}
    server = start_server(url, port, args.workers, log, extra)
    report: dict[str, Any] = {}
    try:
        wait_numbered(url)
        if mode == "copy":
            report["load_s"] = wait_loaded(log, args.workers)
        report["rss_mb"] = rss_mb(server.pid)
        report.update(measure(f"http://127.0.0.1:{port}", key, args))
        report["rss_end_mb"] = rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
    return report


def main() -> None:
    args = parse_args()
    RESULTS.mkdir(exist_ok=True)
    url = args.database_url
    if not args.reuse:
        asyncio.run(recreate_database(url))
    upgrade(url)
    key, seeded = asyncio.run(prepare(url, args.units, args.reuse))
    report: dict[str, Any] = {
        "units": args.units,
        "seed_s": seeded,
        "workers": args.workers,
        "shape": args.shape,
        "runs": args.runs,
        "duration_s": args.duration,
    }
    report["bare_get_rps"] = bare_get(url, args)
    report["scale"] = REFERENCE["GET one unit"] / report["bare_get_rps"]
    for mode in args.modes.split(","):
        report[mode] = run_mode(url, key, mode, args)
    if not args.no_alternatives:
        report["alternatives_ms"] = alternatives(url)
    (RESULTS / "dashboards.json").write_text(json.dumps(report, indent=2))
    print_report(report)


def print_report(report: dict[str, Any]) -> None:
    scale = report["scale"]
    print(
        f"\n{report['units']:,} units in PostgreSQL; {report['workers']} server processes; "
        f"questions: {report['shape']}; median of {report['runs']} x {report['duration_s']} s"
    )
    print(
        f"bare FastAPI + asyncpg GET one unit: {report['bare_get_rps']:,.0f}/s against "
        f"{REFERENCE['GET one unit']:,.0f} where the targets were set: scale {scale:.2f} "
        "(req/s times it, latencies divided by it)"
    )
    print(
        f"{'answered by':<12}{'alone p50':>10}{'32: req/s':>10}{'p50':>8}{'p99':>8}"
        f"{'>2 s':>6}{'scaled p50':>11}{'scaled/s':>9}{'RSS MB':>16}"
    )
    for mode in ("sql", "copy"):
        if mode not in report:
            continue
        found = report[mode]
        alone, many = found["alone"], found["32"]
        late = many["socket_errors"]
        rss = "+".join(f"{mb:.0f}" for mb in found["rss_end_mb"])
        print(
            f"{mode:<12}{alone['p50_ms']:>10.1f}{many['rps']:>10.1f}{many['p50_ms']:>8.0f}"
            f"{many['p99_ms']:>8.0f}{late:>6.0f}{alone['p50_ms'] / scale:>11.1f}"
            f"{many['rps'] * scale:>9.0f}{rss:>16}"
        )
        if "with_writes" in found:
            read, patches = found["with_writes"]["dashboards"], found["with_writes"]["patches"]
            print(
                f"  beside {patches['rps']:.0f} PATCHes/s (p99 {patches['p99_ms']:.0f} ms): "
                f"{read['rps']:.1f} dashboards/s, p50 {read['p50_ms']:.0f} ms, "
                f"p99 {read['p99_ms']:.0f} ms, {read['socket_errors']:.0f} past 2 s"
            )
        if "load_s" in found:
            loads = ", ".join(f"{s:.1f}" for s in found["load_s"])
            print(f"  the copy loaded in {loads} s (each process)")
    print(f"targets at that scale: p50 alone <= {TARGET_P50_MS:.0f} ms, >= {TARGET_RPS:.0f}/s")
    for name, ms in report.get("alternatives_ms", {}).items():
        print(f"  database alone, {name}: {ms:.0f} ms")


if __name__ == "__main__":
    main()
