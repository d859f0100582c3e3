"""Benchmark of concurrent writes on the embedded default: `units-api serve` on SQLite.

Seeds --units units into a SQLite file once; every run then starts one server process on a
fresh copy of that file (with every feature on: auth, ETag, request ids, history, events, the
access log) and loads it with wrk: 32 clients creating 6 KB units, PATCHing one field of
random units, and sending atomic bulk updates of --bulk-items random units. wrk gives up on a
request after 2 s, as a client would: those are counted ("over 2 s"). After a create run, the
units stored are counted against the creates answered.

The machine's speed is measured in the same run: a bare FastAPI + asyncpg app
(`bare_app.py`) answering GET one unit from PostgreSQL, between the service's runs (the two
alternate, so both see the same noise); the service's figures are also given at the scale of
the machine the targets were set on (`harness.scale_of`).

--compare SRC runs a second server from another source tree (SRC is its `src` directory, e.g.
an older commit's, from `git archive`) in the same runs, alternating: before and after on the
same machine at the same time. --max-batch N bounds the SQLite writer's batch of this tree's
server (1: a plain queue, each transaction committed alone).

    make bench-write-embedded
    make bench-write-embedded WRITE_EMBEDDED_ARGS="--runs 1 --compare /tmp/before/src"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import (
    HERE,
    REFERENCE,
    RESULTS,
    free_port,
    recreate_database,
    run_wrk,
    server_env,
    wait_ready,
)
from sqlalchemy import select
from write import prepare, start_bare

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.http.json import dumps
from units_api.migrate import upgrade
from units_api.sample_data import fake_unit
from units_api.units.seeding import seed_units
from units_api.units.tables import units

SCENARIOS = {"POST create": "create", "PATCH one field": "patch", "PUT bulk update": "bulk"}
# The issue's targets, at the targets' machine's scale (creates, PATCHes and bulk alike).
TARGET_RPS, TARGET_P99_MS = 1_500.0, 100.0
BARE_DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench_embedded"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=10_000, help="units seeded before each run")
    parser.add_argument("--duration", type=int, default=10, help="seconds per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bulk-items", type=int, default=10, help="units per bulk update")
    parser.add_argument(
        "--bare-database-url",
        default=os.environ.get("UNITS_API_BENCH_BARE_DATABASE_URL", BARE_DATABASE),
        help="PostgreSQL database of the bare app (recreated unless already seeded)",
    )
    parser.add_argument("--compare", type=Path, help="another source tree's src directory")
    parser.add_argument("--max-batch", type=int, help="bound of the SQLite writer's batch")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS.values()))
    return parser.parse_args()


def six_kb_unit() -> bytes:
    """A sample unit grown to about 6 KB with longer descriptions."""
    unit = fake_unit(random.Random(7))
    unit["unitDesc"] = ("A bright unit with a view over the park, near schools and shops. " * 25)[
        :1_600
    ]
    unit["unitDescAr"] = ("وحدة مشرقة تطل على الحديقة، قريبة من المدارس والمحلات. " * 30)[:900]
    return dumps(unit)


async def seed_template(path: Path, count: int) -> tuple[str, list[str]]:
    url = f"sqlite:///{path}"
    db = Database(create_engine(url, pool_size=2))
    try:
        await seed_units(db, count, seed=1)
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            key = (await create_key(conn, spec))["key"]
        async with db.read() as conn:
            ids = [str(row[0]) for row in await conn.execute(select(units.c.id))]
    finally:
        await db.dispose()
    # Every run starts from the same file, its write-ahead log emptied into it.
    with sqlite3.connect(path) as plain:
        plain.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return key, ids


def start_service(
    database: Path, port: int, log: Path, src: Path | None, max_batch: int | None
) -> subprocess.Popen[bytes]:
    env = {
        **server_env(),
        "UNITS_API_DATABASE_URL": f"sqlite:///{database}",
        "UNITS_API_AUTO_MIGRATE": "false",
        "UNITS_API_FILES_DIR": str(database.parent / "files"),
    }
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = [sys.executable, "-m", "units_api"]
    if max_batch is not None and src is None:
        command = [sys.executable, str(HERE / "writer_batch.py")]
        env["WRITER_MAX_BATCH"] = str(max_batch)
    command += ["serve", "--port", str(port), "--workers", "1"]
    process = subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    wait_ready(process, f"http://127.0.0.1:{port}/readyz", log)
    return process


def stored_units(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        return int(conn.execute("SELECT count(*) FROM units").fetchone()[0])


def one_run(
    args: argparse.Namespace,
    mode: str,
    template: Path,
    work: Path,
    key: str,
    files: dict[str, Path],
    src: Path | None,
) -> dict[str, float]:
    """One wrk run on a fresh server over a fresh copy of the seeded database."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    database = work / "units.db"
    shutil.copyfile(template, database)
    port = free_port()
    server = start_service(database, port, work / "server.log", src, args.max_batch)
    try:
        if mode == "bulk":
            script, script_args = "bulk.lua", (str(args.bulk_items), str(files["ids"]))
        else:
            script = "units.lua"
            script_args = (mode, str(files["unit" if mode == "create" else "ids"]))
        figures = run_wrk(
            f"http://127.0.0.1:{port}",
            key,
            connections=args.connections,
            duration=args.duration,
            threads=args.threads,
            script=script,
            script_args=script_args,
            timeout="2s",
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    if mode == "create":
        figures["stored"] = stored_units(database) - args.units
        figures["answered"] = figures["requests"] - figures["non_2xx"]
    return figures


def run_bare(args: argparse.Namespace, port: int, ids: Path) -> dict[str, float]:
    return run_wrk(
        f"http://127.0.0.1:{port}",
        "bare",
        connections=args.connections,
        duration=args.duration,
        threads=args.threads,
        script="units.lua",
        script_args=("get", str(ids)),
    )


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {metric: statistics.median(run[metric] for run in runs) for metric in runs[0]}


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    RESULTS.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-write-embedded-"))
    template = scratch / "template.db"
    upgrade(f"sqlite:///{template}")
    key, ids = asyncio.run(seed_template(template, args.units))
    files = {"ids": RESULTS / "embedded-ids.txt", "unit": RESULTS / "unit-6kb.json"}
    files["ids"].write_text("\n".join(ids) + "\n")
    files["unit"].write_bytes(six_kb_unit())
    # The bare app's database: seeded once, kept for later runs.
    try:
        bare_ids = asyncio.run(prepare(args.bare_database_url, 10_000, reuse=True))[1]
    except Exception:
        asyncio.run(recreate_database(args.bare_database_url))
        upgrade(args.bare_database_url)
        bare_ids = asyncio.run(prepare(args.bare_database_url, 10_000, reuse=True))[1]
    bare_ids_file = RESULTS / "embedded-bare-ids.txt"
    bare_ids_file.write_text("\n".join(bare_ids) + "\n")
    bare_port = free_port()
    bare = start_bare(args.bare_database_url, bare_port, RESULTS / "bare.log")
    versions: dict[str, Path | None] = {"service": None}
    if args.compare is not None:
        versions["compare"] = args.compare.resolve()
    chosen = [(name, mode) for name, mode in SCENARIOS.items() if mode in args.scenarios]
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {version: [] for version in versions} for name, _ in chosen
    }
    bare_runs: list[dict[str, float]] = []
    try:
        for _ in range(args.runs):
            for name, mode in chosen:
                for version, src in versions.items():
                    work = scratch / version
                    runs[name][version].append(one_run(args, mode, template, work, key, files, src))
                bare_runs.append(run_bare(args, bare_port, bare_ids_file))
    finally:
        bare.terminate()
        bare.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)
    report: dict[str, Any] = {
        "units": args.units,
        "connections": args.connections,
        "duration_s": args.duration,
        "runs": args.runs,
        "bulk_items": args.bulk_items,
        "max_batch": args.max_batch,
        "compare": str(args.compare) if args.compare else None,
        "bare_get": median(bare_runs),
        "bare_get_runs": [run["rps"] for run in bare_runs],
        "scenarios": {
            name: {version: median(version_runs) for version, version_runs in by.items()}
            for name, by in runs.items()
        },
        "all_runs": runs,
    }
    (RESULTS / "write-embedded.json").write_text(json.dumps(report, indent=2))
    print_report(report)


def print_report(report: dict[str, Any]) -> None:
    bare = report["bare_get"]
    scale = REFERENCE["GET one unit"] / bare["rps"]
    print(
        f"\nSQLite, {report['units']:,} units seeded, a fresh server per run; "
        f"{report['connections']} connections; median of {report['runs']} x "
        f"{report['duration_s']} s; bulk: {report['bulk_items']} units per request"
        + (f"; writer batch <= {report['max_batch']}" if report["max_batch"] else "")
    )
    print(
        f"bare FastAPI + asyncpg GET one unit: {bare['rps']:,.0f}/s (runs "
        + ", ".join(f"{rps:,.0f}" for rps in report["bare_get_runs"])
        + f"); the targets' machine {scale:.2f}x this one"
    )
    print(
        f"{'scenario':<18}{'version':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'>2 s':>6}"
        f"{'non-2xx':>9}{'at scale/s':>12}{'p99 at scale':>14}"
    )
    for name, by in report["scenarios"].items():
        for version, figures in by.items():
            print(
                f"{name:<18}{version:>9}{figures['rps']:>9,.0f}{figures['p50_ms']:>9.1f}"
                f"{figures['p99_ms']:>9.1f}{figures['timeouts']:>6,.0f}"
                f"{figures['non_2xx']:>9,.0f}{figures['rps'] * scale:>12,.0f}"
                f"{figures['p99_ms'] / scale:>14.1f}"
            )
            if "stored" in figures:
                print(
                    f"{'':<18}{'':>9}  stored {figures['stored']:,.0f} units for "
                    f"{figures['answered']:,.0f} creates answered (medians)"
                )
    print(
        f"targets at that scale: >= {TARGET_RPS:,.0f}/s, p99 <= {TARGET_P99_MS:.0f} ms, none "
        "over 2 s"
    )


if __name__ == "__main__":
    main()
