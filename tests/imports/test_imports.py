"""Imports over HTTP on both databases: exported files import back unchanged, row errors with
nested paths, dry runs and atomic imports write nothing, policies, limits, idempotency."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from sqlalchemy import func, select

from tests.conftest import Api, start_api
from tests.exports.test_exports import download, exact, make_units, run_export
from units_api.config import Settings
from units_api.http.json import dumps
from units_api.imports.readers import open_reader
from units_api.units.columns import STATUS_COLUMNS
from units_api.units.schemas import EDITABLE_FIELDS
from units_api.units.tables import unit_history, units

IMPORTS = "/api/v2/units/imports"


async def start_import(
    api: Api,
    content: bytes,
    name: str,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    **fields: str,
) -> Any:
    return await api.request(
        "POST",
        IMPORTS,
        key=key,
        headers=headers,
        files={"file": (name, content)},
        data=fields,
    )


async def run_import(
    api: Api, content: bytes, name: str, key: str | None = None, **fields: str
) -> dict[str, Any]:
    response = await start_import(api, content, name, key, **fields)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["kind"] == "import" and job["status"] == "queued"
    assert response.headers["location"] == f"{IMPORTS}/{job['id']}"
    for _ in range(600):
        job = (await api.request("GET", f"{IMPORTS}/{job['id']}", key=key)).json()
        if job["status"] in ("succeeded", "failed"):
            return job  # type: ignore[no-any-return]
        await asyncio.sleep(0.1)
    raise AssertionError("the import did not finish")


async def project_units(api: Api, project: str) -> list[dict[str, Any]]:
    response = await api.request(
        "POST",
        "/api/v2/units/query",
        json={
            "filter": f"subProjectId=={project}",
            "limit": 1000,
            "sort": [{"field": "createdAt", "order": "asc"}],
        },
    )
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = exact(response.content)["data"]
    return found


def editable(unit: dict[str, Any]) -> bytes:
    """The editable fields as exact JSON text (so 1250000.50 and 1250000.5 differ)."""
    return dumps({name: unit[name] for name in EDITABLE_FIELDS})


def jsonl(*bodies: dict[str, Any]) -> bytes:
    return b"".join(dumps(body) + b"\n" for body in bodies)


# Every format an import reads (parquet is written, not read): csv and xlsx carry the
# read-only status columns and xlsx its date cells, which an import drops.
@pytest.mark.parametrize(
    ("fmt", "compression"),
    [("csv", "none"), ("jsonl", "none"), ("xlsx", "none"), ("csv", "gzip"), ("jsonl", "gzip")],
)
async def test_an_exported_file_imports_back_unchanged(
    api: Api, fmt: str, compression: str
) -> None:
    project, made = await make_units(api, 3)
    assert all(unit["currency"] and unit["completionStatus"] for unit in made)  # listing fields
    spec = {"format": fmt, "filter": f"subProjectId=={project}", "compression": compression}
    job = await run_export(api, spec)
    content = await download(api, job)
    name = f"units.{fmt}" + (".gz" if compression == "gzip" else "")
    cursor = await feed_head(api)

    upserted = await run_import(api, content, name, mode="upsert")
    assert upserted["status"] == "succeeded", upserted
    assert upserted["rowsTotal"] == 3 and counts(upserted) == (3, 0, 0, 0, 3)
    assert await project_units(api, project) == made  # same versions: nothing changed
    ids = {unit["id"] for unit in made}
    assert [e for e in await events_after(api, cursor, "unit.updated") if e["unitId"] in ids] == []

    created = await run_import(api, content, name)
    assert (created["rowsOk"], created["errors"]) == (3, [])
    assert counts(created) == (3, 0, 3, 0, 0)
    now = await project_units(api, project)
    copies = [unit for unit in now if unit["id"] not in {u["id"] for u in made}]
    assert len(copies) == 3 and all(copy["version"] == 1 for copy in copies)
    assert sorted(editable(c) for c in copies) == sorted(editable(u) for u in made)
    assert any(b'"price":1250000.50' in editable(c) for c in copies)


async def test_an_exported_xlsx_reads_back_as_the_api_wrote_its_units(
    api: Api, tmp_path: Path
) -> None:
    """Its date cells (`createdAt`, `updatedAt`) too: as RFC 3339 UTC with milliseconds and
    `Z`, the text the API writes."""
    project, made = await make_units(api, 3)
    job = await run_export(api, {"format": "xlsx", "filter": f"subProjectId=={project}"})
    path = tmp_path / "units.xlsx"
    path.write_bytes(await download(api, job))
    rows = list(open_reader("xlsx", path).rows())
    assert all(not row.errors for row in rows)
    read = [
        {name: value for name, value in (row.body or {}).items() if name not in STATUS_COLUMNS}
        for row in rows
    ]
    assert read == [{name: value for name, value in u.items() if value is not None} for u in made]
    times = [(body["createdAt"], body["updatedAt"]) for body in read]
    assert times == [(unit["createdAt"], unit["updatedAt"]) for unit in made]
    assert all(text.endswith("Z") for pair in times for text in pair)


async def history_count(api: Api, ids: list[str]) -> int:
    async with api.context.db.read() as conn:
        count = await conn.scalar(
            select(func.count())
            .select_from(unit_history)
            .where(unit_history.c.unit_id.in_([uuid.UUID(i) for i in ids]))
        )
    return int(count or 0)


async def feed_head(api: Api) -> str:
    response = await api.request("GET", "/api/v2/events", params={"types": "export.failed"})
    return str(response.json()["nextCursor"])


async def events_after(api: Api, cursor: str, types: str) -> list[dict[str, Any]]:
    response = await api.request("GET", "/api/v2/events", params={"after": cursor, "types": types})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


def counts(job: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """rowsOk, rowsFailed, rowsCreated, rowsUpdated, rowsUnchanged."""
    return (
        job["rowsOk"],
        job["rowsFailed"],
        job["rowsCreated"],
        job["rowsUpdated"],
        job["rowsUnchanged"],
    )


async def test_an_import_says_what_it_created_updated_and_left_unchanged(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    body = {"type": "villa", "subProjectId": project, "price": Decimal("10.50")}
    bodies = [{"name": f"Counted {i}", **body} for i in range(3)]
    created = await run_import(api, jsonl(*bodies), "new.jsonl")
    assert counts(created) == (3, 0, 3, 0, 0)
    export = await run_export(api, {"format": "jsonl", "filter": f"subProjectId=={project}"})
    content = await download(api, export)
    before = await project_units(api, project)
    ids = [unit["id"] for unit in before]
    history = await history_count(api, ids)
    cursor = await feed_head(api)

    same = await run_import(api, content, "same.jsonl", mode="upsert")
    assert counts(same) == (3, 0, 0, 0, 3)
    assert await project_units(api, project) == before
    assert await history_count(api, ids) == history
    found = await events_after(api, cursor, "unit.created,unit.updated,import.succeeded")
    assert [e for e in found if e["unitId"] in ids] == []
    (ended,) = [e for e in found if e["type"] == "import.succeeded"]
    assert ended["data"]["id"] == same["id"]
    assert counts(ended["data"]) == (3, 0, 0, 0, 3)

    lines = [exact(line) for line in content.splitlines()]
    lines[1]["name"] = "Counted, renamed"
    changed = jsonl(*lines, {"name": "Counted new", "type": "villa", "subProjectId": project})
    dry = await run_import(api, changed, "changed.jsonl", mode="upsert", dryRun="true")
    assert dry["status"] == "succeeded" and counts(dry) == (4, 0, 1, 1, 2)
    assert await project_units(api, project) == before
    assert await history_count(api, ids) == history

    done = await run_import(api, changed, "changed.jsonl", mode="upsert")
    assert counts(done) == (4, 0, 1, 1, 2)
    after = await project_units(api, project)
    assert [unit["version"] for unit in after[:3]] == [1, 2, 1]
    assert after[1]["name"] == "Counted, renamed" and after[3]["name"] == "Counted new"
    assert await history_count(api, ids) == history + 1
    found = await events_after(api, cursor, "unit.updated")
    assert [e["unitId"] for e in found if e["unitId"] in ids] == [ids[1]]


async def test_row_errors_name_rows_and_nested_fields(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    good = {"name": "Sea View", "type": "apartment", "subProjectId": project}
    bad_plan = {**good, "paymentPlans": [{"minPrice": -1}]}
    nameless = {"type": "villa", "subProjectId": project}
    job = await run_import(api, jsonl(good, bad_plan, nameless) + b"[1]\n", "rows.jsonl")
    assert job["status"] == "succeeded"
    assert (job["rowsTotal"], job["rowsOk"], job["rowsFailed"]) == (4, 1, 3)
    assert {(e["row"], e["field"]) for e in job["errors"]} == {
        (2, "paymentPlans[0].minPrice"),
        (3, "name"),
        (4, ""),
    }
    assert len(await project_units(api, project)) == 1


async def test_csv_cells_read_as_their_fields_types(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    rows = [
        "name,type,price,subProjectId,paymentPlans,unitDesc",
        f'Villa 1,villa,1200000.50,{project},"[{{""planName"":""Cash"",""minPrice"":10}}]",=1+1',
        f"Villa 2,villa,cheap,{project},,",
        f"Villa 3,villa,,{project},[not json,",
    ]
    content = ("\ufeff" + "\r\n".join(rows) + "\r\n").encode()
    job = await run_import(api, content, "units.csv")
    assert (job["rowsOk"], job["rowsFailed"]) == (1, 2)
    assert [(e["row"], e["field"]) for e in job["errors"]] == [(2, "price"), (3, "paymentPlans")]
    (unit,) = await project_units(api, project)
    assert unit["price"] == Decimal("1200000.50") and unit["unitDesc"] == "=1+1"
    assert unit["paymentPlans"][0]["planName"] == "Cash"


async def test_a_header_naming_no_field_fails_the_job(api: Api) -> None:
    job = await run_import(api, b"name,type,colour\nA,villa,red\n", "units.csv")
    assert job["status"] == "failed" and "colour" in job["error"]


async def test_xlsx_rows_import(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["name", "type", "price", "surface", "subProjectId", "unitNameAr"])
    sheet.append(["فيلا", "villa", 950000.25, 180, project, "فيلا على البحر"])
    sheet.append(["Flat", "apartment", "n/a", None, project, None])
    buffer = io.BytesIO()
    book.save(buffer)
    job = await run_import(api, buffer.getvalue(), "sheet.xlsx")
    assert (job["rowsOk"], job["rowsFailed"]) == (1, 1)
    assert job["errors"][0]["row"] == 2 and job["errors"][0]["field"] == "price"
    (unit,) = await project_units(api, project)
    assert unit["price"] == Decimal("950000.25") and unit["surface"] == 180
    assert unit["unitNameAr"] == "فيلا على البحر"


async def test_a_dry_run_writes_nothing(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    body = {"name": "Dry", "type": "villa", "subProjectId": project}
    job = await run_import(api, jsonl(body, {"type": "villa"}), "dry.jsonl", dryRun="true")
    assert job["status"] == "succeeded" and job["dryRun"] is True
    assert (job["rowsOk"], job["rowsFailed"]) == (1, 1)
    assert await project_units(api, project) == []


async def test_an_atomic_import_writes_all_or_nothing(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    good = [{"name": f"Unit {i}", "type": "villa", "subProjectId": project} for i in range(5)]
    failed = await run_import(
        api, jsonl(*good, {"name": " ", "type": "villa"}), "all.jsonl", atomic="true"
    )
    assert failed["status"] == "failed" and failed["rowsFailed"] == 1
    assert failed["errors"] == [
        {"row": 6, "field": "name", "message": failed["errors"][0]["message"]}
    ]
    assert await project_units(api, project) == []
    done = await run_import(api, jsonl(*good), "all.jsonl", atomic="true")
    assert done["status"] == "succeeded" and done["rowsOk"] == 5
    assert len(await project_units(api, project)) == 5


async def test_imported_units_get_history_and_events(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    start = (await api.request("GET", "/api/v2/events", params={"types": "export.failed"})).json()
    job = await run_import(
        api, jsonl({"name": "Evented", "type": "villa", "subProjectId": project}), "e.jsonl"
    )
    (unit,) = await project_units(api, project)
    found = (
        await api.request(
            "GET",
            "/api/v2/events",
            params={"after": start["nextCursor"], "types": "unit.created,import.succeeded"},
        )
    ).json()["data"]
    assert [e["type"] for e in found if e["unitId"] == unit["id"]] == ["unit.created"]
    (finished,) = [
        e for e in found if e["type"] == "import.succeeded" and e["data"]["id"] == job["id"]
    ]
    assert finished["data"]["rowsOk"] == 1
    async with api.context.db.read() as conn:
        actions = (
            await conn.execute(
                select(unit_history.c.action).where(unit_history.c.unit_id == uuid.UUID(unit["id"]))
            )
        ).scalars()
        assert list(actions) == ["import"]


async def test_a_keys_policy_bounds_what_it_imports(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    outside = await api.create_unit(city="Luxor", subProjectId=project)
    key = await api.create_key("units:write", "units:read", policy="city==Aswan")
    rows = jsonl(
        {"name": "In", "type": "villa", "city": "Aswan", "subProjectId": project},
        {"name": "Out", "type": "villa", "city": "Luxor", "subProjectId": project},
        {"id": outside["id"], "name": "Hidden", "type": "villa", "city": "Aswan"},
    )
    job = await run_import(api, rows, "p.jsonl", key, mode="upsert")
    assert (job["rowsOk"], job["rowsFailed"]) == (1, 2)
    assert [(e["row"], e["field"]) for e in job["errors"]] == [(2, ""), (3, "id")]
    names = sorted(u["name"] for u in await project_units(api, project))
    assert names == [outside["name"], "In"]


async def test_bad_uploads_are_refused(api: Api) -> None:
    assert (await api.request("POST", IMPORTS, json={"file": "x"})).status_code == 415
    response = await api.request(
        "POST", IMPORTS, data={"mode": "create"}, files={"other": ("a.csv", b"x")}
    )
    assert response.status_code == 422
    assert {e["field"] for e in response.json()["errors"]} >= {"file", "other"}
    bad = await start_import(api, b"x", "units.txt", mode="merge", dryRun="maybe")
    assert bad.status_code == 422
    assert {e["field"] for e in bad.json()["errors"]} == {"format", "mode", "dryRun"}
    fake = await start_import(api, b"name,type\n", "units.xlsx")
    assert fake.status_code == 422 and fake.json()["errors"][0]["field"] == "file"
    reader = await api.create_key("units:read")
    assert (await start_import(api, b"{}", "a.jsonl", key=reader)).status_code == 403


async def test_a_file_over_the_limit_is_a_413(settings: Settings) -> None:
    small = settings.model_copy(update={"max_import_bytes": 2048})
    async for api in start_api(small):
        response = await start_import(api, b"x" * 200_000, "big.jsonl")
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/problem+json"


async def test_an_idempotency_key_starts_one_import(api: Api) -> None:
    project = f"imp-{uuid.uuid4().hex[:8]}"
    content = jsonl({"name": "Once", "type": "villa", "subProjectId": project})
    headers = {"Idempotency-Key": f"import-{uuid.uuid4()}"}
    first = await start_import(api, content, "once.jsonl", headers=headers)
    again = await start_import(api, content, "once.jsonl", headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    for _ in range(300):
        job = (await api.request("GET", first.headers["location"])).json()
        if job["status"] == "succeeded":
            break
        await asyncio.sleep(0.1)
    assert len(await project_units(api, project)) == 1
    async with api.context.db.read() as conn:
        count = await conn.scalar(
            select(func.count()).select_from(units).where(units.c.sub_project_id == project)
        )
    assert count == 1
    assert (
        json.loads((await api.request("GET", IMPORTS)).content)["data"][0]["id"]
        == first.json()["id"]
    )
