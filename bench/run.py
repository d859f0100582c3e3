"""Benchmark of single-unit operations against one real `units-api serve` process.

Seeds N units into PostgreSQL, starts the server with every feature on (auth, ETag,
request ids, JSON access log), loads it with wrk from the same machine, and prints the
median requests/s, p50 and p99 of several runs per scenario, plus the server's peak RSS.

    make bench                         # 100,000 units, 3 runs x 10 s, 32 connections
    make bench BENCH_ARGS="--units 20000 --runs 1"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy import select
from sqlalchemy.engine import make_url

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.http.json import dumps
from units_api.migrate import upgrade
from units_api.units.seeding import fake_unit, seed_units
from units_api.units.tables import units

HERE = Path(__file__).parent
SCENARIOS = {"GET one unit": "get", "POST create": "create", "PATCH one field": "patch"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--duration", type=int, default=10, help="seconds per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "UNITS_API_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/units_bench"
        ),
    )
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    return parser.parse_args()


async def recreate_database(url: str) -> None:
    parsed = make_url(url).set(drivername="postgresql")
    admin = parsed.set(database="postgres").render_as_string(hide_password=False)
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{parsed.database}"')
    finally:
        await conn.close()


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
        async with db.transaction() as conn:
            key = (
                await create_key(
                    conn, ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
                )
            )["key"]
        async with db.read() as conn:
            ids = [str(row[0]) for row in await conn.execute(select(units.c.id).limit(20_000))]
        return key, ids, rate
    finally:
        await db.dispose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, port: int, workers: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "UNITS_API_DATABASE_URL": url, "UNITS_API_AUTO_MIGRATE": "false"}
    command = [
        sys.executable,
        "-m",
        "units_api",
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    process = subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"server did not start; see {log}")


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of the server and its children (workers)."""
    pids = [pid] + [
        int(p)
        for p in subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True
        ).stdout.split()
    ]
    total = 0
    for each in pids:
        status = Path(f"/proc/{each}/status").read_text()
        total += int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return total / 1024


def seconds(text: str) -> float:
    match = re.match(r"([\d.]+)(us|ms|s|m)", text)
    assert match, text
    return float(match.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[match.group(2)]


def run_wrk(
    args: argparse.Namespace, port: int, key: str, mode: str, data: Path
) -> dict[str, float]:
    command = [
        "wrk",
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{args.duration}s",
        "--latency",
        "-H",
        f"Authorization: Bearer {key}",
        "-s",
        str(HERE / "lua" / "units.lua"),
        f"http://127.0.0.1:{port}",
        "--",
        mode,
        str(data),
    ]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    p50 = seconds(re.search(r"\s50%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    p99 = seconds(re.search(r"\s99%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {
        "rps": rps,
        "p50_ms": p50 * 1000,
        "p99_ms": p99 * 1000,
        "non_2xx": int(errors.group(1)) if errors else 0,
    }


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, ids, seed_rate = asyncio.run(prepare(args.database_url, args.units, args.reuse))
    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    ids_file = results_dir / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n")
    unit_file = results_dir / "unit.json"
    unit_file.write_bytes(dumps(fake_unit(random.Random(7))))
    port = free_port()
    server = start_server(args.database_url, port, args.workers, results_dir / "server.log")
    report: dict[str, Any] = {
        "units": args.units,
        "connections": args.connections,
        "duration_s": args.duration,
        "runs": args.runs,
        "workers": args.workers,
        "seed_units_per_s": seed_rate,
        "scenarios": {},
    }
    try:
        for name, mode in SCENARIOS.items():
            data = unit_file if mode == "create" else ids_file
            runs = [run_wrk(args, port, key, mode, data) for _ in range(args.runs)]
            report["scenarios"][name] = {
                metric: statistics.median(run[metric] for run in runs) for metric in runs[0]
            }
        report["peak_rss_mb"] = peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    (results_dir / "single_unit.json").write_text(json.dumps(report, indent=2))
    print_report(report)


def print_report(report: dict[str, Any]) -> None:
    print(
        f"\n{report['units']:,} units in PostgreSQL; {report['connections']} connections; "
        f"median of {report['runs']} x {report['duration_s']} s; "
        f"{report['workers']} server process(es)"
    )
    if report["seed_units_per_s"]:
        print(f"seeding: {report['seed_units_per_s']:,.0f} units/s")
    print(f"{'scenario':<18}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>10}")
    for name, figures in report["scenarios"].items():
        print(
            f"{name:<18}{figures['rps']:>10,.0f}{figures['p50_ms']:>10.2f}"
            f"{figures['p99_ms']:>10.2f}{figures['non_2xx']:>10,.0f}"
        )
    print(f"server peak RSS: {report['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
