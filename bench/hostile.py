"""Hostile uploads against a running server (PostgreSQL, one job process): each file is
uploaded as an import and followed to its end. Prints a table: file, upload size, final
status, seconds from upload to end, the job process's peak RSS (as it logs it when
it ends), and the error text (cut).

Meanwhile wrk reads single units (8 connections): its p99 during the uploads beside its p99
idle, before them, says what a hostile file costs everyone else.

Every file here must end `failed` at the first attempt (seconds, not the half minute of a
retry), with a specific error, and no job process may grow past 300 MB. The bombs fail only
past the expanded cap: under it they are read to their end (an empty import that succeeds),
still in bounded memory.

    make bench-hostile                                          # bombs of 1 GiB, cap 512 MiB
    make bench-hostile HOSTILE_ARGS="--bomb-mb 3072 --expanded-mb 2048"   # the real cap
    make bench-hostile HOSTILE_ARGS="--bomb-mb 8 --expanded-mb 4"         # a quick smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from harness import (
    RESULTS,
    free_port,
    read_wrk,
    recreate_database,
    run_wrk,
    start_server,
    wrk_command,
)
from hostile_files import (
    MiB,
    entity_sheet,
    entity_strings,
    gzip_bomb,
    huge_cell,
    long_header,
    not_utf8_csv,
    truncated_xlsx,
    zip_bomb,
)

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.migrate import upgrade

DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench_hostile"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--bomb-mb", type=int, default=1024, help="what the bombs and the huge cell expand to"
    )
    parser.add_argument(
        "--expanded-mb",
        type=int,
        default=512,
        help="the server's UNITS_API_MAX_IMPORT_EXPANDED_BYTES in MiB (default 512 MiB;"
        " below --bomb-mb the bombs fail at the cap, above it they are read to their end)",
    )
    parser.add_argument("--database-url", default=DATABASE)
    return parser.parse_args()


def uploads(bomb_mb: int) -> dict[str, tuple[str, bytes]]:
    bomb = bomb_mb * MiB
    return {
        "truncated xlsx (200 bytes)": ("cut.xlsx", truncated_xlsx(200)),
        "sheet XML declares entities": ("laughs.xlsx", entity_sheet()),
        "shared strings declare entities": ("strings.xlsx", entity_strings()),
        f"zip bomb ({bomb_mb} MiB of whitespace)": ("bomb.xlsx", zip_bomb(bomb)),
        f"one xlsx cell of {bomb_mb} MiB": ("cell.xlsx", huge_cell(bomb)),
        "csv header of 10 MiB, no newline": ("header.csv", long_header(10 * MiB)),
        f"gzip bomb ({bomb_mb} MiB of blank lines)": ("bomb.jsonl.gz", gzip_bomb(bomb)),
        "csv not in UTF-8": ("latin.csv", not_utf8_csv()),
    }


async def prepare(url: str) -> str:
    db = Database(create_engine(url, pool_size=2))
    try:
        async with db.transaction() as conn:
            spec = ApiKeyCreate(name="bench", scopes=["admin"], rateLimit="100000000/minute")
            return str((await create_key(conn, spec))["key"])
    finally:
        await db.dispose()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def peak_rss_mb(log: Path, job_id: str) -> float | None:
    """The job process's peak RSS, from its "job process ended" log line."""
    for line in log.read_text(errors="replace").splitlines():
        if job_id in line and "job process ended" in line:
            peak = json.loads(line).get("peakRssKiB")
            if peak is not None:
                return round(float(peak) / 1024, 1)
    return None


def run(client: httpx.Client, name: str, content: bytes, log: Path) -> dict[str, Any]:
    response = client.post("/api/v2/units/imports", files={"file": (name, content)})
    if response.status_code != 202:
        return {"status": f"HTTP {response.status_code}", "error": response.text}
    job = response.json()
    while job["status"] not in ("succeeded", "failed"):
        time.sleep(0.2)
        job = client.get(response.headers["location"]).json()
    peak = None
    for _ in range(25):  # the line is written as the process ends
        peak = peak_rss_mb(log, job["id"])
        if peak is not None:
            break
        time.sleep(0.2)
    return {
        "status": job["status"],
        "seconds": round((_time(job["finishedAt"]) - _time(job["createdAt"])).total_seconds(), 2),
        "rss_mb": peak,
        "error": job["error"],
    }


READERS = 8  # wrk's connections reading single units
IDLE_SECONDS = 10
UNITS = 200


def unit_ids(client: httpx.Client) -> Path:
    """A few units for the readers, their ids in a file (lua/units.lua reads it)."""
    ids = []
    for number in range(UNITS):
        body = {"name": f"Reader {number}", "type": "villa", "city": "Cairo", "price": 1000}
        response = client.post("/api/v2/units/", json=body)
        response.raise_for_status()
        ids.append(response.json()["id"])
    path = RESULTS / "hostile-ids.txt"
    path.write_text("\n".join(ids) + "\n")
    return path


def reading(ids: Path, seconds: int) -> dict[str, Any]:
    """The readers' wrk options (`harness.wrk_command`'s): GET one unit by a random id."""
    return {
        "connections": READERS,
        "duration": seconds,
        "script": "units.lua",
        "script_args": ("get", str(ids)),
    }


def main() -> None:
    args = parse_args()
    RESULTS.mkdir(exist_ok=True)
    url = args.database_url
    asyncio.run(recreate_database(url))
    upgrade(url)
    key = asyncio.run(prepare(url))
    files = RESULTS / "hostile-files"
    log = RESULTS / "hostile-server.log"
    env = {
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_RUN_JOBS": "true",
        "UNITS_API_JOB_PROCESSES": "1",
        "UNITS_API_FILES_DIR": str(files),
        "UNITS_API_JOB_POLL_SECONDS": "0.2",
    }
    if args.expanded_mb is not None:
        env["UNITS_API_MAX_IMPORT_EXPANDED_BYTES"] = str(args.expanded_mb * MiB)
    port = free_port()
    server = start_server(url, port, 1, log, env)
    rows = []
    try:
        headers = {"Authorization": f"Bearer {key}"}
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
            ids = unit_ids(client)
            idle = run_wrk(base, key, **reading(ids, IDLE_SECONDS))
            files_to_send = uploads(args.bomb_mb)
            # wrk stops at SIGINT and reports what it measured until then.
            readers = subprocess.Popen(
                wrk_command(base, key, **reading(ids, 3600)), stdout=subprocess.PIPE, text=True
            )
            for label, (name, content) in files_to_send.items():
                figures = run(client, name, content, log)
                rows.append({"file": label, "bytes": len(content), **figures})
                print(json.dumps(rows[-1])[:300], flush=True)
            readers.send_signal(signal.SIGINT)
            during = read_wrk(readers.communicate(timeout=60)[0])
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(files, ignore_errors=True)
    report = {"uploads": rows, "get_idle": idle, "get_during": during}
    (RESULTS / "hostile.json").write_text(json.dumps(report, indent=2))
    print()
    print(f"{'file':42} {'bytes':>10} {'status':8} {'s':>6} {'RSS MB':>7}  error")
    for row in rows:
        error = (row.get("error") or "").replace("\n", " ")
        print(
            f"{row['file']:42} {row['bytes']:>10,} {row['status']:8} "
            f"{row.get('seconds', ''):>6} {row.get('rss_mb') or '':>7}  {error[:70]}"
        )
    print(
        f"\nGET one unit, {READERS} connections: idle p99 {idle['p99_ms']:.1f} ms "
        f"({idle['rps']:,.0f}/s); during the uploads p99 {during['p99_ms']:.1f} ms "
        f"({during['rps']:,.0f}/s, {during['non_2xx']:.0f} non-2xx): "
        f"{during['p99_ms'] / idle['p99_ms']:.2f}x idle"
    )


if __name__ == "__main__":
    main()
