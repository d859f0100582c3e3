"""Benchmark of single-unit writes and reads: one `units-api serve` process beside a bare
FastAPI + asyncpg app (`bare_app.py`) on the same documents, measured in the same run.

Seeds N units into PostgreSQL, starts the server with every feature on (auth, ETag,
request ids, JSON access log) and the bare app, loads each with wrk from the same machine
(runs alternate between the two, so both see the same noise), and prints the median
requests/s, p50 and p99 per scenario, the ratio to the bare app, and both peak RSS.

    make bench-write                              # 100,000 units, 3 runs x 10 s, 32 connections
    make bench-write WRITE_ARGS="--units 20000 --runs 1"
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
import time
from pathlib import Path
from typing import Any

from harness import (
    DEFAULT_DATABASE,
    HERE,
    RESULTS,
    cpu_seconds,
    free_port,
    peak_rss_mb,
    postgres_cpu_seconds,
    recreate_database,
    run_wrk,
    start_server,
    wait_ready,
)
from sqlalchemy import select

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.events.sequencer import sequence
from units_api.http.json import dumps
from units_api.migrate import upgrade
from units_api.sample_data import fake_unit
from units_api.units.seeding import seed_units
from units_api.units.tables import units
from units_api.webhooks.worker import fan_out

SCENARIOS = {"GET one unit": "get", "POST create": "create", "PATCH one field": "patch"}


def parse_args(description: str | None = __doc__, runs: int = 3) -> argparse.Namespace:
    """The options of a benchmark of single-unit requests (this one's, and ops.py's)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--duration", type=int, default=10, help="seconds per run")
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("UNITS_API_BENCH_DATABASE_URL", DEFAULT_DATABASE),
    )
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    return parser.parse_args()


async def prepare(url: str, count: int, reuse: bool) -> tuple[str, list[str], float | None]:
    db = Database(create_engine(url, pool_size=2))
    rate = None
    try:
        async with db.read() as conn:
            existing = len((await conn.execute(select(units.c.id).limit(count))).all())
        if not reuse or existing < count:
            started = time.perf_counter()
            await seed_units(db, count - (existing if reuse else 0), seed=1)
            rate = count / (time.perf_counter() - started)
        # The seeded units' events take their feed positions (and the webhooks' fan-out
        # passes them) now, as a running server does as they are written: otherwise the
        # server's event worker would catch up on them during the first measured run.
        await sequence(db)
        await fan_out(db)
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            key = (await create_key(conn, spec))["key"]
        async with db.read() as conn:
            ids = [str(row[0]) for row in await conn.execute(select(units.c.id).limit(20_000))]
            # Start every run from the same state: statistics fresh, dirty pages on disk (a
            # checkpoint left to run during the load would be measured instead of the server).
            for statement in ("VACUUM ANALYZE", "CHECKPOINT"):
                await conn.exec_driver_sql(statement)
        return key, ids, rate
    finally:
        await db.dispose()


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, ids, seed_rate = asyncio.run(prepare(args.database_url, args.units, args.reuse))
    results_dir = RESULTS
    results_dir.mkdir(exist_ok=True)
    ids_file = results_dir / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n")
    unit_file = results_dir / "unit.json"
    unit_file.write_bytes(dumps(fake_unit(random.Random(7))))
    port = free_port()
    server = start_server(args.database_url, port, args.workers, results_dir / "server.log")
    bare_port = free_port()
    bare = start_bare(args.database_url, bare_port, results_dir / "bare.log")
    report: dict[str, Any] = {
        "units": args.units,
        "connections": args.connections,
        "duration_s": args.duration,
        "runs": args.runs,
        "workers": args.workers,
        "seed_units_per_s": seed_rate,
        "scenarios": {},
        "bare": {},
    }
    try:
        for name, mode in SCENARIOS.items():
            data = unit_file if mode == "create" else ids_file
            runs: dict[str, list[dict[str, float]]] = {"service": [], "bare": []}
            for _ in range(args.runs):
                for which, where, pid in (
                    ("service", port, server.pid),
                    ("bare", bare_port, bare.pid),
                ):
                    cpu, pg_cpu = cpu_seconds(pid), postgres_cpu_seconds()
                    figures = run_wrk(
                        f"http://127.0.0.1:{where}",
                        key,
                        connections=args.connections,
                        duration=args.duration,
                        threads=args.threads,
                        script="units.lua",
                        script_args=(mode, str(data)),
                    )
                    # CPU per request: steadier than rates on a shared machine.
                    served = figures["rps"] * args.duration
                    figures["cpu_us"] = (cpu_seconds(pid) - cpu) / served * 1e6
                    pg_after = postgres_cpu_seconds()
                    if pg_cpu is not None and pg_after is not None:
                        figures["pg_cpu_us"] = (pg_after - pg_cpu) / served * 1e6
                    runs[which].append(figures)
            for which, target in (("service", "scenarios"), ("bare", "bare")):
                report[target][name] = {
                    metric: statistics.median(run[metric] for run in runs[which])
                    for metric in runs[which][0]
                    if all(metric in run for run in runs[which])
                }
        report["peak_rss_mb"] = peak_rss_mb(server.pid)
        report["bare_peak_rss_mb"] = peak_rss_mb(bare.pid)
    finally:
        for process in (server, bare):
            process.terminate()
            process.wait(timeout=30)
    (results_dir / "write.json").write_text(json.dumps(report, indent=2))
    print_report(report)


def start_bare(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "BARE_DATABASE_URL": url}
    command = [sys.executable, "-m", "uvicorn", "bare_app:app", "--port", str(port)]
    command += ["--no-access-log", "--loop", "uvloop", "--http", "httptools"]
    process = subprocess.Popen(
        command, cwd=HERE, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    wait_ready(process, f"http://127.0.0.1:{port}/docs", log)
    return process


def print_report(report: dict[str, Any]) -> None:
    print(
        f"\n{report['units']:,} units in PostgreSQL; {report['connections']} connections; "
        f"median of {report['runs']} x {report['duration_s']} s; "
        f"{report['workers']} server process(es); bare = FastAPI + asyncpg, same documents"
    )
    if report["seed_units_per_s"]:
        print(f"seeding: {report['seed_units_per_s']:,.0f} units/s")
    print(
        f"{'scenario':<18}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}"
        f"{'bare/s':>9}{'bare p99':>10}{'ratio':>8}"
    )
    for name, figures in report["scenarios"].items():
        bare = report["bare"][name]
        print(
            f"{name:<18}{figures['rps']:>9,.0f}{figures['p50_ms']:>9.2f}"
            f"{figures['p99_ms']:>9.2f}{figures['non_2xx']:>9,.0f}"
            f"{bare['rps']:>9,.0f}{bare['p99_ms']:>10.2f}{figures['rps'] / bare['rps']:>8.2f}"
        )
    print("CPU per request, us (server process; PostgreSQL's processes):")
    for name, figures in report["scenarios"].items():
        bare = report["bare"][name]
        pg = (
            f"; PostgreSQL {figures['pg_cpu_us']:,.0f} (bare {bare['pg_cpu_us']:,.0f})"
            if "pg_cpu_us" in figures and "pg_cpu_us" in bare
            else ""
        )
        print(f"  {name:<18} server {figures['cpu_us']:,.0f} (bare {bare['cpu_us']:,.0f}){pg}")
    print(
        f"peak RSS: server {report['peak_rss_mb']:.0f} MB, bare {report['bare_peak_rss_mb']:.0f} MB"
    )


if __name__ == "__main__":
    main()
