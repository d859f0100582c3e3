"""Exports over HTTP on both databases: every format read back field by field, gzip,
policies, the snapshot, the file's 409 and 410, idempotency, the job's event."""

from __future__ import annotations

import asyncio
import csv
import gzip
import io
import json
import random
import uuid
from datetime import UTC, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pyarrow.parquet as pq
import pytest
from sqlalchemy import update

from tests.conftest import Api, claim_first, start_api
from units_api.background import JOBS
from units_api.clock import format_time, utcnow
from units_api.config import Settings
from units_api.db import Database, create_engine
from units_api.exports.formats import XLSX_DATE_FORMAT, XLSX_MAX_WIDTH
from units_api.exports.service import ExportParams, write_export
from units_api.http.json import dumps
from units_api.jobs.execution import run_claimed
from units_api.jobs.housekeeping import expire_files
from units_api.jobs.storage import open_storage
from units_api.jobs.tables import jobs
from units_api.jobs.work import JobContext
from units_api.sample_data import fake_unit
from units_api.units.columns import STATUS_COLUMNS
from units_api.units.schemas import DOCUMENT_ORDER

EXPORTS = "/api/v2/units/exports"
FORMULA = "=1+1"
# What a file format or a COPY stream must carry through: quotes, backslashes, control
# characters, Arabic, an emoji.
TRICKY_TEXT = 'قال "مرحبا" \\ C:\\path\n\tnext\r\x01\x1f \\n 😀'


def exact(raw: str | bytes) -> Any:
    return json.loads(raw, parse_float=Decimal)


async def make_units(api: Api, count: int, **fields: Any) -> tuple[str, list[dict[str, Any]]]:
    """`count` realistic units (every nested list filled, Arabic text) of a project of their
    own, so an export filtered on it holds exactly them; returned as the API reads them."""
    project = f"exp-{uuid.uuid4().hex[:10]}"
    rng = random.Random(project)
    made = []
    for index in range(count):
        body = {**fake_unit(rng), "subProjectId": project, **fields}
        if index == 0:
            body["unitDesc"] = FORMULA
            body["unitShortDesc"] = "https://example.com/not-a-link"
            body["price"] = Decimal("1250000.50")
        if index == 1:
            body["unitDescAr"] = TRICKY_TEXT
        response = await api.request(
            "POST",
            "/api/v2/units/",
            content=dumps(body),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 201, response.text
        made.append(exact(response.content))
    return project, made


async def run_export(api: Api, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    response = await api.request("POST", EXPORTS, json=body, key=key)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["status"] == "queued" and job["kind"] == "export"
    assert response.headers["location"] == f"{EXPORTS}/{job['id']}"
    return await finished(api, job["id"], key)


async def finished(api: Api, job_id: str, key: str | None = None) -> dict[str, Any]:
    for _ in range(300):
        job: dict[str, Any] = (await api.request("GET", f"{EXPORTS}/{job_id}", key=key)).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"export {job_id} did not finish")


async def download(api: Api, job: dict[str, Any], key: str | None = None) -> bytes:
    response = await api.request("GET", f"{EXPORTS}/{job['id']}/file", key=key)
    assert response.status_code == 200, response.text
    assert response.headers["content-disposition"].startswith("attachment; filename=")
    return response.content


def cell(value: Any) -> str:
    """What a CSV cell holds for a field's value."""
    if value is None:
        return ""
    return value if isinstance(value, str) else dumps(value).decode()


def statuses(unit: dict[str, Any]) -> list[str]:
    """The read-only status columns of csv and xlsx."""
    return [unit[source]["status"] for source in STATUS_COLUMNS.values()]


async def test_jsonl_holds_each_unit_exactly_as_the_api_returns_it(api: Api) -> None:
    project, made = await make_units(api, 4)
    job = await run_export(api, {"format": "jsonl", "filter": f"subProjectId=={project}"})
    assert job["status"] == "succeeded", job
    assert job["rowCount"] == 4 and job["progress"] == 1.0
    content = await download(api, job)
    assert job["bytes"] == len(content)
    lines = content.decode().splitlines()
    assert [exact(line) for line in lines] == made  # oldest first
    first = await api.request("GET", f"/api/v2/units/{made[0]['id']}/")
    assert lines[0].encode() == first.content
    assert '"price":1250000.50' in lines[0]


async def test_csv_has_a_bom_a_header_and_every_field_exact(api: Api) -> None:
    project, made = await make_units(api, 3)
    job = await run_export(api, {"format": "csv", "filter": f"subProjectId=={project}"})
    content = await download(api, job)
    assert content.startswith(b"\xef\xbb\xbf")
    rows = list(csv.reader(io.StringIO(content.decode("utf-8-sig"), newline="")))
    assert rows[0] == [*DOCUMENT_ORDER, "publishingStatus", "availabilityStatus"]
    assert [row for row in rows[1:]] == [
        [*(cell(u[name]) for name in DOCUMENT_ORDER), *statuses(u)] for u in made
    ]
    first = dict(zip(rows[0], rows[1], strict=True))
    assert first["price"] == "1250000.50" and first["unitDesc"] == FORMULA
    assert exact(first["paymentPlans"]) == made[0]["paymentPlans"]
    assert first["unitNameAr"] == made[0]["unitNameAr"] and first["unitNameAr"].isascii() is False


async def test_gzip_applies_to_csv_and_jsonl_only(api: Api) -> None:
    project, made = await make_units(api, 2)
    job = await run_export(
        api, {"format": "jsonl", "filter": f"subProjectId=={project}", "compression": "gzip"}
    )
    response = await api.request("GET", f"{EXPORTS}/{job['id']}/file")
    assert response.headers["content-type"] == "application/gzip"
    assert ".jsonl.gz" in response.headers["content-disposition"]
    lines = gzip.decompress(response.content).decode().splitlines()
    assert [exact(line) for line in lines] == made
    for fmt in ("xlsx", "parquet"):
        refused = await api.request("POST", EXPORTS, json={"format": fmt, "compression": "gzip"})
        assert refused.status_code == 422
        assert refused.json()["errors"][0]["field"] == "compression"


async def test_xlsx_text_stays_text_and_numbers_stay_exact(api: Api) -> None:
    project, made = await make_units(api, 3)
    job = await run_export(api, {"format": "xlsx", "filter": f"subProjectId=={project}"})
    book = openpyxl.load_workbook(io.BytesIO(await download(api, job)), read_only=False)
    sheet = book.active
    assert sheet is not None
    rows = list(sheet.iter_rows())
    header = [c.value for c in rows[0]]
    assert header == [*DOCUMENT_ORDER, "publishingStatus", "availabilityStatus"]
    assert sheet.freeze_panes == "A2"
    assert sheet.auto_filter.ref == f"A1:{rows[0][-1].column_letter}4"
    widths = {
        number: dimension.width
        for dimension in sheet.column_dimensions.values()
        for number in range(dimension.min, dimension.max + 1)
    }
    for number, name in enumerate(header, start=1):
        assert len(name) < widths[number] <= XLSX_MAX_WIDTH + 1  # (+ the cell's padding)
    first = {name: c for name, c in zip(header, rows[1], strict=True)}
    assert first["unitDesc"].value == FORMULA and first["unitDesc"].data_type == "s"
    assert first["unitShortDesc"].hyperlink is None
    assert first["price"].value == "1250000.50"  # a float cell would lose the trailing zero
    for unit, row in zip(made, rows[1:], strict=True):
        values = {name: c.value for name, c in zip(header, row, strict=True)}
        assert values["name"] == unit["name"] and values["unitNameAr"] == unit["unitNameAr"]
        assert exact(values["floorsPlan"]) == unit["floorsPlan"]
        assert [values[name] for name in STATUS_COLUMNS] == statuses(unit)
        for name in ("createdAt", "updatedAt"):
            cell_ = row[header.index(name)]
            assert cell_.is_date and cell_.number_format == XLSX_DATE_FORMAT
            assert format_time(cell_.value.replace(tzinfo=UTC)) == unit[name]
        reading = unit["readings"][0]["readingDate"] if unit["readings"] else None
        if reading is not None:
            assert f'"readingDate":"{reading}"' in values["readings"]  # stays text
        if isinstance(values["surface"], float):
            assert Decimal(repr(values["surface"])) == unit["surface"]


async def test_parquet_columns_are_typed_and_exact(api: Api) -> None:
    project, made = await make_units(api, 3)
    job = await run_export(
        api,
        {
            "format": "parquet",
            "filter": f"subProjectId=={project}",
            "fields": ["price", "createdAt", "paymentPlans", "unitNameAr", "floorsPlan"],
        },
    )
    assert (job["filter"], job["q"]) == (f"subProjectId=={project}", None)
    assert job["fields"] == ["price", "createdAt", "paymentPlans", "unitNameAr", "floorsPlan"]
    table = pq.read_table(io.BytesIO(await download(api, job)))
    assert table.column_names == [
        "id",
        "price",
        "createdAt",
        "paymentPlans",
        "unitNameAr",
        "floorsPlan",
    ]
    assert str(table.schema.field("price").type) == "decimal128(38, 20)"
    assert str(table.schema.field("createdAt").type) == "timestamp[us, tz=UTC]"
    assert "json" in str(table.schema.field("paymentPlans").type)
    for unit, row in zip(made, table.to_pylist(), strict=True):
        assert row["id"] == unit["id"]
        assert row["price"] == unit["price"]
        assert format_time(row["createdAt"]) == unit["createdAt"]
        assert exact(row["paymentPlans"]) == unit["paymentPlans"]
        assert exact(row["floorsPlan"]) == unit["floorsPlan"]
        assert row["unitNameAr"] == unit["unitNameAr"]


async def test_a_keys_policy_and_search_narrow_the_export(api: Api) -> None:
    project, made = await make_units(api, 4, city="Giza")
    await make_units(api, 1, city="Alexandria", subProjectId=project)
    key = await api.create_key("units:export", policy="city==Alexandria")
    job = await run_export(api, {"format": "jsonl", "filter": f"subProjectId=={project}"}, key)
    lines = (await download(api, job, key)).decode().splitlines()
    assert {exact(line)["city"] for line in lines} == {"Alexandria"} and len(lines) == 1
    word = made[1]["name"].split()[-1]
    job = await run_export(
        api, {"format": "jsonl", "filter": f"subProjectId=={project}", "q": word}
    )
    found = [exact(line)["id"] for line in (await download(api, job)).decode().splitlines()]
    assert made[1]["id"] in found


async def test_an_export_is_one_snapshot_while_units_change(api: Api, files_dir: str) -> None:
    project, made = await make_units(api, 3)
    seen: list[tuple[int, int | None]] = []

    async def change_units(done: int, total: int | None) -> None:
        seen.append((done, total))
        if done == 0:  # counted, nothing read yet: change what it will read
            await make_units(api, 1, subProjectId=project)
            patched = await api.request(
                "PATCH",
                f"/api/v2/units/{made[0]['id']}/",
                json={"name": "Changed meanwhile"},
                headers={"content-type": "application/merge-patch+json"},
            )
            assert patched.status_code == 200, patched.text

    path = Path(files_dir) / f"{project}.jsonl"
    params = ExportParams("jsonl", f"subProjectId=={project}", None, None, "none", None)
    rows, size = await write_export(api.context.db, params, path, change_units)
    assert seen[0] == (0, 3) and rows == 3
    assert [exact(line) for line in path.read_text().splitlines()] == made
    assert size == path.stat().st_size


async def test_the_file_is_a_409_before_success_and_a_410_after_expiry(
    settings: Settings,
) -> None:
    idle = settings.model_copy(update={"run_jobs": False})
    async for api in start_api(idle):
        response = await api.request(
            "POST", EXPORTS, json={"format": "csv", "filter": "city==None"}
        )
        job_id = response.json()["id"]
        early = await api.request("GET", f"{EXPORTS}/{job_id}/file")
        assert early.status_code == 409
        assert early.headers["content-type"] == "application/problem+json"
    async for api in start_api(settings):
        job = await finished(api, job_id)
        assert job["status"] == "succeeded" and job["rowCount"] == 0
        assert (await api.request("GET", f"{EXPORTS}/{job_id}/file")).status_code == 200
        async with api.context.db.transaction() as conn:
            await conn.execute(
                update(jobs)
                .where(jobs.c.id == uuid.UUID(job_id))
                .values(expires_at=utcnow() - timedelta(seconds=1))
            )
        assert (await api.request("GET", f"{EXPORTS}/{job_id}/file")).status_code == 410
        # expired at read, before the sweep deletes the file
        job = (await api.request("GET", f"{EXPORTS}/{job_id}")).json()
        assert job["status"] == "expired"
        listed = (await api.request("GET", EXPORTS, params={"limit": 100})).json()["data"]
        assert [j["status"] for j in listed if j["id"] == job_id] == ["expired"]
        assert await expire_files(api.context.db, api.context.storage) >= 1
        job = (await api.request("GET", f"{EXPORTS}/{job_id}")).json()
        assert job["status"] == "expired"
        assert (await api.request("GET", f"{EXPORTS}/{job_id}/file")).status_code == 410


@pytest.mark.parametrize(
    ("body", "status", "where"),
    [
        ({"format": "pdf"}, 422, "format"),
        ({"format": "csv", "fields": ["nope"]}, 422, "fields[0]"),
        ({"format": "csv", "surprise": 1}, 422, "surprise"),
        ({"format": "csv", "filter": "price=gt="}, 400, "filter"),
        ({"format": "csv", "filter": "nope==1"}, 400, "filter"),
    ],
)
async def test_bad_export_requests_are_refused(
    api: Api, body: dict[str, Any], status: int, where: str
) -> None:
    response = await api.request("POST", EXPORTS, json=body)
    assert response.status_code == status, response.text
    problem = response.json()
    named = problem.get("parameter") or problem["errors"][0]["field"]
    assert named == where


async def test_jobs_are_seen_by_their_key_and_by_admins(api: Api) -> None:
    own = await api.create_key("units:export")
    other = await api.create_key("units:export")
    job = await run_export(api, {"format": "csv", "filter": "city==Nowhere"}, own)
    assert (await api.request("GET", f"{EXPORTS}/{job['id']}", key=other)).status_code == 404
    assert (await api.request("GET", f"{EXPORTS}/{job['id']}")).status_code == 200
    listed = (await api.request("GET", EXPORTS, key=own)).json()
    assert [item["id"] for item in listed["data"]] == [job["id"]]
    reader = await api.create_key("units:read")
    assert (
        await api.request("POST", EXPORTS, json={"format": "csv"}, key=reader)
    ).status_code == 403


async def test_an_idempotency_key_replays_the_same_job(api: Api) -> None:
    headers = {"Idempotency-Key": f"export-{uuid.uuid4()}"}
    body = {"format": "jsonl", "filter": "city==Nowhere"}
    first = await api.request("POST", EXPORTS, json=body, headers=headers)
    again = await api.request("POST", EXPORTS, json=body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.headers["idempotent-replayed"] == "true"
    assert first.json()["id"] == again.json()["id"]


async def test_a_finished_export_is_an_event_in_the_feed(api: Api) -> None:
    start = (await api.request("GET", "/api/v2/events", params={"types": "import.failed"})).json()
    job = await run_export(api, {"format": "csv", "filter": "city==Nowhere"})
    found = (
        await api.request(
            "GET",
            "/api/v2/events",
            params={"after": start["nextCursor"], "types": "export.succeeded"},
        )
    ).json()["data"]
    (event,) = [e for e in found if e["data"]["id"] == job["id"]]
    assert event["unitId"] is None and event["data"]["status"] == "succeeded"
    assert event["actor"]["type"] == "apiKey"


async def test_an_export_reads_the_primary_when_a_replica_was_promoted(
    postgres_url: str, files_dir: str
) -> None:
    """A replica URL that now names a primary (promoted since the server started): the
    export is written from the primary, with a warning, not failed."""
    settings = Settings(
        database_url=postgres_url, access_log=False, files_dir=files_dir, run_jobs=False
    )
    async for api in start_api(settings):
        project, _ = await make_units(api, 2)
        asked = await api.request(
            "POST", EXPORTS, json={"format": "jsonl", "filter": f"subProjectId=={project}"}
        )
        assert asked.status_code == 202, asked.text
        job_id = uuid.UUID(asked.json()["id"])
        claim = await claim_first(api, job_id, "export")
        promoted = settings.model_copy(update={"database_replica_urls": postgres_url})
        job_db = Database(create_engine(postgres_url, pool_size=2))
        storage = open_storage(settings.storage_url, settings.files_dir, settings.machine_name)
        try:
            context = JobContext(job_db, promoted, storage, claim, timedelta(seconds=60))
            await run_claimed(context, JOBS)
        finally:
            await job_db.dispose()
        assert job_db.replicas is None  # nothing read on the promoted server as a replica
        job = (await api.request("GET", f"{EXPORTS}/{job_id}")).json()
        assert (job["status"], job["rowCount"]) == ("succeeded", 2), job
