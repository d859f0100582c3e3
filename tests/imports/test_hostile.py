"""Hostile uploads, on both databases: each file that cannot be read fails its job at the first
attempt with a short, specific error (never retried, never a 500); error texts are bounded in
the job, the jobs list and the job's event; an import's memory stays bounded on a zip bomb;
gzip files import, and an export with `compression: gzip` imports back."""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
import uuid
from typing import Any

from bench import hostile_files as hostile
from sqlalchemy import select

from tests.conftest import Api, start_api
from tests.exports.test_exports import download, run_export
from tests.imports.test_imports import IMPORTS, editable, jsonl, project_units, run_import
from units_api.config import Settings
from units_api.errors import MAX_ERROR_TEXT
from units_api.imports.service import Report
from units_api.imports.xlsx import MAX_CELL_CHARS
from units_api.jobs.tables import jobs

EXPANDED_CAP = 8 * 1024 * 1024  # lowered for the tests: the bombs need not be large
LATE_ROW = b'<row r="2"><c r="A2" t="inlineStr"><is><t>Late</t></is></c></row>'


def hostile_files() -> dict[str, tuple[bytes, str, str]]:
    """name: (content, file name, a word of the error the job must end with)."""
    return {
        "truncated xlsx": (hostile.truncated_xlsx(), "cut.xlsx", "zip"),
        "sheet declares entities": (hostile.entity_sheet(), "laughs.xlsx", "DTD"),
        "shared strings declare entities": (hostile.entity_strings(), "strings.xlsx", "DTD"),
        "zip bomb": (hostile.zip_bomb(2 * EXPANDED_CAP, LATE_ROW), "bomb.xlsx", "expands"),
        "huge xlsx cell": (hostile.huge_cell(MAX_CELL_CHARS + 10), "cell.xlsx", "longer than"),
        "huge csv header": (hostile.long_header(10 * hostile.MiB), "header.csv", "longer than"),
        "csv row of many long cells": (
            hostile.csv_row_of_long_cells(MAX_CELL_CHARS - 1000),
            "row.csv",
            "row longer than",
        ),
        "xlsx row of many long cells": (
            hostile.xlsx_row_of_long_cells(MAX_CELL_CHARS - 10),
            "row.xlsx",
            "holds more than",
        ),
        "gzip bomb": (hostile.gzip_bomb(2 * EXPANDED_CAP), "bomb.jsonl.gz", "expands"),
        "non-UTF-8 csv": (hostile.not_utf8_csv(), "latin.csv", "UTF-8"),
        "broken gzip": (hostile.broken_gzip(), "cut.csv.gz", "gzip"),
    }


async def attempts(api: Api, job_id: str) -> int:
    async with api.context.db.read() as conn:
        found = await conn.scalar(select(jobs.c.attempts).where(jobs.c.id == uuid.UUID(job_id)))
    assert found is not None
    return int(found)


async def test_hostile_files_fail_at_once_with_a_specific_error(settings: Settings) -> None:
    capped = settings.model_copy(update={"max_import_expanded_bytes": EXPANDED_CAP})
    async for api in start_api(capped):
        for name, (content, filename, word) in hostile_files().items():
            job = await run_import(api, content, filename)
            assert job["status"] == "failed", (name, job)
            assert word in job["error"], (name, job["error"])
            assert len(job["error"]) <= MAX_ERROR_TEXT, name
            assert await attempts(api, job["id"]) == 1, name


async def test_error_texts_are_bounded_in_job_list_and_event(api: Api) -> None:
    start = (await api.request("GET", "/api/v2/events", params={"types": "import.failed"})).json()
    names = ",".join(f"unknown{n}" for n in range(200_000))  # about 2.5 MB of names
    job = await run_import(api, names.encode() + b"\nx\n", "names.csv")
    assert job["status"] == "failed"
    assert len(job["error"]) == MAX_ERROR_TEXT and job["error"].endswith("…")
    assert job["error"].startswith("The header names 'unknown0'")
    listed = (await api.request("GET", IMPORTS, params={"limit": 100})).json()["data"]
    assert [len(j["error"]) for j in listed if j["id"] == job["id"]] == [MAX_ERROR_TEXT]
    events = (
        await api.request(
            "GET", "/api/v2/events", params={"after": start["nextCursor"], "types": "import.failed"}
        )
    ).json()["data"]
    (event,) = [e for e in events if e["data"]["id"] == job["id"]]
    assert event["data"]["error"] == job["error"]


def test_a_row_error_message_is_bounded() -> None:
    report = Report()
    report.fail(1, [("name", "x" * 5000)])
    (error,) = report.errors
    assert len(error["message"]) == MAX_ERROR_TEXT and error["message"].endswith("…")


async def test_a_sheet_with_a_dtd_but_no_entities_is_refused_too(api: Api) -> None:
    content = hostile.xlsx(hostile.sheet_xml(hostile.HEADER_ROW, b"<!DOCTYPE worksheet>"))
    job = await run_import(api, content, "doctype.xlsx")
    assert job["status"] == "failed" and "DTD" in job["error"]


async def test_empty_and_misnamed_uploads_are_4xx(api: Api) -> None:
    empty = await api.request("POST", IMPORTS, files={"file": ("units.csv", b"")})
    assert empty.status_code == 422
    assert empty.json()["errors"] == [{"field": "file", "message": "is empty"}]
    wrong = await api.request("POST", IMPORTS, files={"file": ("units.xlsx.gz", b"\x1f\x8b")})
    assert wrong.status_code == 422 and wrong.json()["errors"][0]["field"] == "format"


async def test_gzip_uploads_import(api: Api) -> None:
    project = f"gz-{uuid.uuid4().hex[:8]}"
    body = {"name": "Zipped", "type": "villa", "subProjectId": project}
    csv_body = f"name,type,subProjectId\nZipped CSV,villa,{project}\n".encode()
    assert (await run_import(api, gzip.compress(jsonl(body)), "a.jsonl.gz"))["rowsOk"] == 1
    assert (await run_import(api, gzip.compress(csv_body), "b.csv.gz"))["rowsOk"] == 1
    # gzip's magic bytes under a plain name
    assert (await run_import(api, gzip.compress(csv_body), "c.csv"))["rowsOk"] == 1
    assert len(await project_units(api, project)) == 3


async def test_a_gzip_export_imports_back(api: Api) -> None:
    project = f"gzr-{uuid.uuid4().hex[:8]}"
    for n in range(3):
        body = {"name": f"Round {n}", "type": "villa", "subProjectId": project, "price": 1000.5}
        assert (await api.request("POST", "/api/v2/units/", json=body)).status_code == 201
    made = await project_units(api, project)
    for fmt in ("csv", "jsonl"):
        job = await run_export(
            api, {"format": fmt, "compression": "gzip", "filter": f"subProjectId=={project}"}
        )
        content = await download(api, job)
        assert content[:2] == b"\x1f\x8b"
        imported = await run_import(api, content, f"back.{fmt}.gz", mode="upsert")
        assert imported["status"] == "succeeded" and imported["rowsOk"] == 3, imported
    assert [editable(u) for u in await project_units(api, project)] == [editable(u) for u in made]


def test_reading_a_zip_bomb_keeps_memory_bounded(tmp_path: Any) -> None:
    """A sheet of 200 MB of whitespace read in a process of its own (under the default cap, so
    it is read to its end): its peak RSS stays under 300 MB."""
    bomb = tmp_path / "bomb.xlsx"
    bomb.write_bytes(hostile.zip_bomb(200 * hostile.MiB, LATE_ROW))
    script = textwrap.dedent(
        f"""
        import re, sys
        from pathlib import Path
        from units_api.imports.readers import open_reader
        rows = list(open_reader("xlsx", Path({str(bomb)!r})).rows())
        assert [r.body for r in rows] == [{{"name": "Late"}}], rows
        # The peak of this process's own memory: getrusage's ru_maxrss would also count the
        # parent's memory, kept across the exec that started this process.
        status = Path("/proc/self/status").read_text()
        print(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    peak_kib = int(out.stdout.split()[-1])
    assert peak_kib < 300 * 1024, peak_kib
