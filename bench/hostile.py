"""Hostile uploads against a running server (PostgreSQL, one job process): each file is
uploaded as an import and followed to its end. Prints a table: file, upload size, final
status, seconds from upload to end, the job process's peak RSS (as it logs it when
it ends), and the error text (cut).

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
import gzip
import io
import json
import shutil
import time
import zipfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from harness import RESULTS, free_port, recreate_database, start_server

from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.db import Database, create_engine
from units_api.migrate import upgrade

DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench_hostile"
MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
MiB = 1024 * 1024
HEADER_ROW = b'<row r="1"><c r="A1" t="inlineStr"><is><t>name</t></is></c></row>'
LAUGHS = (
    b'<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
)


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


def _opening(prolog: bytes = b"") -> bytes:
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        + prolog
        + f'<worksheet xmlns="{MAIN}"><sheetData>'.encode()
    )


_CLOSING = b"</sheetData></worksheet>"


def xlsx(write_sheet: Callable[[Any], None], strings: bytes | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{MAIN}" xmlns:r="http://schemas.openxmlformats.org/'
            'officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" '
            'r:id="rId1"/></sheets></workbook>',
        )
        book.writestr(
            "xl/_rels/workbook.xml.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            'relationships"><Relationship Id="rId1" Target="worksheets/sheet1.xml"/>'
            "</Relationships>",
        )
        if strings is not None:
            book.writestr("xl/sharedStrings.xml", strings)
        with book.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as member:
            write_sheet(member)
    return buffer.getvalue()


def sheet(rows: bytes, prolog: bytes = b"") -> Callable[[Any], None]:
    return lambda member: member.write(_opening(prolog) + rows + _CLOSING)


def repeated(before: bytes, piece: bytes, count: int, after: bytes) -> Callable[[Any], None]:
    def write(member: Any) -> None:
        member.write(before)
        for _ in range(count):
            member.write(piece)
        member.write(after)

    return write


def gzip_of(piece: bytes, count: int) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9) as out:
        for _ in range(count):
            out.write(piece)
    return buffer.getvalue()


def hostile_files(bomb_mb: int) -> dict[str, tuple[str, bytes]]:
    whole = xlsx(sheet(HEADER_ROW))
    return {
        "truncated xlsx (200 bytes)": ("cut.xlsx", whole[:200]),
        "sheet XML declares entities": (
            "laughs.xlsx",
            xlsx(sheet(HEADER_ROW.replace(b"name", b"&lol3;"), LAUGHS)),
        ),
        "shared strings declare entities": (
            "strings.xlsx",
            xlsx(
                sheet(b'<row r="1"><c r="A1" t="s"><v>0</v></c></row>'),
                b'<?xml version="1.0"?>'
                + LAUGHS
                + f'<sst xmlns="{MAIN}"><si><t>&lol3;</t></si></sst>'.encode(),
            ),
        ),
        f"zip bomb ({bomb_mb} MiB of whitespace)": (
            "bomb.xlsx",
            xlsx(repeated(_opening() + HEADER_ROW, b" " * MiB, bomb_mb, _CLOSING)),
        ),
        f"one xlsx cell of {bomb_mb} MiB": (
            "cell.xlsx",
            xlsx(
                repeated(
                    _opening() + HEADER_ROW + b'<row r="2"><c t="inlineStr"><is><t>',
                    b"x" * MiB,
                    bomb_mb,
                    b"</t></is></c></row>" + _CLOSING,
                )
            ),
        ),
        "csv header of 10 MiB, no newline": ("header.csv", b"n" * (10 * MiB)),
        f"gzip bomb ({bomb_mb} MiB of blank lines)": (
            "bomb.jsonl.gz",
            gzip_of(b" " * (MiB - 1) + b"\n", bomb_mb),
        ),
        "csv not in UTF-8": ("latin.csv", b"name,type\n\xe9t\xe9,villa\n"),
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
            for label, (name, content) in hostile_files(args.bomb_mb).items():
                figures = run(client, name, content, log)
                rows.append({"file": label, "bytes": len(content), **figures})
                print(json.dumps(rows[-1])[:300], flush=True)
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(files, ignore_errors=True)
    (RESULTS / "hostile.json").write_text(json.dumps(rows, indent=2))
    print()
    print(f"{'file':42} {'bytes':>10} {'status':8} {'s':>6} {'RSS MB':>7}  error")
    for row in rows:
        error = (row.get("error") or "").replace("\n", " ")
        print(
            f"{row['file']:42} {row['bytes']:>10,} {row['status']:8} "
            f"{row.get('seconds', ''):>6} {row.get('rss_mb') or '':>7}  {error[:70]}"
        )


if __name__ == "__main__":
    main()
