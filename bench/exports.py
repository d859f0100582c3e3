"""Benchmark of exports and imports, on PostgreSQL: one server running jobs, one job process.

1. exports of --units seeded units (about 6 KB each, every nested list filled) in each format:
   units/s from the job's startedAt to its finishedAt, and the peak RSS of the job process;
2. GET one unit with wrk, idle and while a jsonl export runs: p99 and the ratio;
3. imports of --rows rows (jsonl made from the seeded units): create, upsert (every row an
   existing unit with a new price) and a dry run: rows/s and the job process's peak RSS.

Figures are medians of --runs runs.

    make bench-exports                                  # 1,000,000 units, 100,000 rows, 3 runs
    make bench-exports EXPORTS_ARGS="--units 50000 --rows 10000 --runs 1"
    make bench-exports EXPORTS_ARGS="--reuse --formats xlsx --parts exports --runs 1"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from harness import RESULTS, free_port, recreate_database, run_wrk, start_server
from sqlalchemy.engine import make_url

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.http.json import dumps, load_stored
from units_api.migrate import upgrade
from units_api.units.seeding import seed_units

DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench_exports"
FORMATS = ("jsonl", "csv", "parquet", "xlsx")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=100_000, help="rows of each import")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument(
        "--parts", default="exports,get,imports", help="which of exports, get, imports to run"
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument("--database-url", default=DATABASE)
    return parser.parse_args()


async def prepare(url: str, count: int, reuse: bool) -> str:
    """Seeded units (unless reused) and an admin key."""
    db = Database(create_engine(url, pool_size=2))
    try:
        if not reuse:
            await seed_units(db, count, seed=1)
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            return str((await create_key(conn, spec))["key"])
    finally:
        await db.dispose()


def descendants(pid: int) -> list[int]:
    found = []
    for child in subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True
    ).stdout.split():
        found += [int(child), *descendants(int(child))]
    return found


def rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    match = re.search(r"VmRSS:\s+(\d+)", status)
    return int(match.group(1)) / 1024 if match else 0.0


@contextmanager
def job_memory(server: int) -> Iterator[dict[str, float]]:
    """The peak RSS of the server's job processes (the descendants started after this),
    sampled every 0.1 s."""
    before = set(descendants(server))
    peak = {"rss_mb": 0.0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for pid in set(descendants(server)) - before:
                peak["rss_mb"] = max(peak["rss_mb"], rss_mb(pid))
            time.sleep(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


def wait_job(client: httpx.Client, location: str) -> dict[str, Any]:
    while True:
        job: dict[str, Any] = client.get(location).json()
        if job["status"] in ("succeeded", "failed"):
            if job["status"] == "failed":
                raise SystemExit(f"{location} failed: {job['error']}")
            return job
        time.sleep(0.2)


def seconds(job: dict[str, Any]) -> float:
    started = datetime.fromisoformat(job["startedAt"].replace("Z", "+00:00"))
    finished = datetime.fromisoformat(job["finishedAt"].replace("Z", "+00:00"))
    return (finished - started).total_seconds()


FILES = RESULTS / "files"


def discard(job: dict[str, Any]) -> None:
    """The export's file (gigabytes at a million units) is not needed once measured."""
    for path in (FILES / "exports").glob(f"{job['id']}.*"):
        path.unlink()


def export_once(client: httpx.Client, server: int, fmt: str) -> dict[str, float]:
    with job_memory(server) as peak:
        response = client.post("/api/v2/units/exports", json={"format": fmt})
        assert response.status_code == 202, response.text
        job = wait_job(client, response.headers["location"])
    discard(job)
    took = seconds(job)
    return {
        "units_per_s": job["rowCount"] / took,
        "seconds": took,
        "mb": job["bytes"] / 1e6,
        "rss_mb": peak["rss_mb"],
    }


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {name: round(statistics.median(r[name] for r in runs), 2) for name in runs[0]}


def exports(args: argparse.Namespace, client: httpx.Client, server: int) -> dict[str, Any]:
    return {
        fmt: median([export_once(client, server, fmt) for _ in range(args.runs)])
        for fmt in args.formats.split(",")
    }


def get_while_exporting(
    args: argparse.Namespace,
    client: httpx.Client,
    base: str,
    key: str,
    ids: Path,
    connections: int,
) -> dict[str, Any]:
    """GET one unit's p99 with `connections` wrk connections, idle then while a jsonl export
    runs, alternating."""
    idle, busy = [], []
    for _ in range(args.runs):
        idle.append(
            run_wrk(
                f"{base}/",
                key,
                connections=connections,
                duration=args.duration,
                script="units.lua",
                script_args=("get", str(ids)),
            )
        )
        response = client.post("/api/v2/units/exports", json={"format": "jsonl"})
        location = response.headers["location"]
        while client.get(location).json()["status"] == "queued":
            time.sleep(0.05)
        busy.append(
            run_wrk(
                f"{base}/",
                key,
                connections=connections,
                duration=args.duration,
                script="units.lua",
                script_args=("get", str(ids)),
            )
        )
        job = wait_job(client, location)
        discard(job)
        if seconds(job) < args.duration:
            print(f"note: the export ended before wrk ({seconds(job):.1f}s)", flush=True)
    p99_idle = statistics.median(r["p99_ms"] for r in idle)
    p99_busy = statistics.median(r["p99_ms"] for r in busy)
    return {
        "idle": median(idle),
        "exporting": median(busy),
        "p99_ratio": round(p99_busy / p99_idle, 3),
    }


async def oldest_documents(url: str, rows: int) -> list[str]:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        found = await conn.fetch("SELECT doc FROM units ORDER BY created_at, id LIMIT $1", rows)
        return [row[0] for row in found]
    finally:
        await conn.close()


def import_files(url: str, rows: int, folder: Path, runs: int) -> tuple[Path, list[Path]]:
    """A create file (the oldest `rows` units, each line as the API returns it, as a jsonl
    export writes it) and an upsert file per run (the same units, each with a new price, so
    every row of every run changes its unit)."""
    documents = asyncio.run(oldest_documents(url, rows))
    assert len(documents) == rows, "seed at least --rows units"
    create = folder / "create.jsonl"
    upserts = [folder / f"upsert-{run}.jsonl" for run in range(runs)]
    with create.open("wb") as out:
        for doc in documents:
            out.write(doc.encode() + b"\n")
    for run, path in enumerate(upserts, start=1):
        with path.open("wb") as out:
            for doc in documents:
                unit = load_stored(doc)
                unit["price"] = (unit["price"] or Decimal(0)) + run
                out.write(dumps(unit) + b"\n")
    return create, upserts


def import_once(
    client: httpx.Client, server: int, path: Path, fields: dict[str, str]
) -> dict[str, float]:
    with job_memory(server) as peak, path.open("rb") as file:
        response = client.post(
            "/api/v2/units/imports", files={"file": (path.name, file)}, data=fields
        )
        assert response.status_code == 202, response.text
        job = wait_job(client, response.headers["location"])
    assert job["rowsFailed"] == 0, job["errors"][:3]
    took = seconds(job)
    return {"rows_per_s": job["rowsTotal"] / took, "seconds": took, "rss_mb": peak["rss_mb"]}


def imports(args: argparse.Namespace, client: httpx.Client, server: int) -> dict[str, Any]:
    folder = RESULTS / "imports"
    folder.mkdir(exist_ok=True)
    create, upserts = import_files(args.database_url, args.rows, folder, args.runs)
    try:
        return {
            "dry_run": median(
                [import_once(client, server, create, {"dryRun": "true"}) for _ in range(args.runs)]
            ),
            "create": median([import_once(client, server, create, {}) for _ in range(args.runs)]),
            "upsert": median(
                [import_once(client, server, path, {"mode": "upsert"}) for path in upserts]
            ),
        }
    finally:
        shutil.rmtree(folder)


def sample_ids(client: httpx.Client, path: Path) -> None:
    response = client.post("/api/v2/units/query", json={"fields": ["id"], "limit": 1000})
    path.write_text("\n".join(unit["id"] for unit in response.json()["data"]) + "\n")


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    RESULTS.mkdir(exist_ok=True)
    url = args.database_url
    if not args.reuse:
        asyncio.run(recreate_database(url))
    upgrade(url)
    key = asyncio.run(prepare(url, args.units, args.reuse))
    report: dict[str, Any] = {"units": args.units, "rows": args.rows, "runs": args.runs}

    def keep(name: str, figures: Any) -> None:
        report[name] = figures
        (RESULTS / "exports.json").write_text(json.dumps(report, indent=2, default=str))
        print(name, json.dumps(figures), flush=True)

    port = free_port()
    files = FILES
    env = {
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_RUN_JOBS": "true",
        "UNITS_API_JOB_PROCESSES": "1",
        "UNITS_API_FILES_DIR": str(files),
        "UNITS_API_JOB_POLL_SECONDS": "0.2",
    }
    server = start_server(url, port, 1, RESULTS / "exports-server.log", env)
    base = f"http://127.0.0.1:{port}"
    try:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
            ids = RESULTS / "export-ids.txt"
            sample_ids(client, ids)
            parts = args.parts.split(",")
            if "exports" in parts:
                keep("exports", exports(args, client, server.pid))
            if "get" in parts:
                for connections in (32, 4):
                    figures = get_while_exporting(args, client, base, key, ids, connections)
                    keep(f"get_one_{connections}", figures)
            if "imports" in parts:
                keep("imports", imports(args, client, server.pid))
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(files, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
