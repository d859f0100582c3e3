"""Exports: ask for one (a job), follow it, download its file."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import FileResponse, Response, StreamingResponse

from units_api.auth.access import authorize, job_viewer, owner_filter
from units_api.auth.scopes import UNITS_EXPORT
from units_api.config import DEFAULTS
from units_api.context import app_context
from units_api.errors import FileOnAnotherMachine, Gone
from units_api.exports import service
from units_api.exports.formats import GZIP_MEDIA_TYPE, MEDIA_TYPES, PARQUET_DECIMAL
from units_api.exports.schemas import ExportCreate
from units_api.exports.tasks import JOB
from units_api.http import docs
from units_api.http.body import read_json
from units_api.http.docs import json_body, problems, ref, success
from units_api.http.paths import ID
from units_api.jobs import service as jobs_service
from units_api.jobs.router import JobId, add_job_routes, queued
from units_api.jobs.storage import LocalStorage, Storage, holder
from units_api.units.columns import STATUS_COLUMNS
from units_api.validation import parse_model

_STATUS_COLUMNS = " and ".join(f"`{name}`" for name in STATUS_COLUMNS)

router = APIRouter(prefix="/api/v2/units/exports", tags=["exports"])
IDEMPOTENCY_KEY = docs.idempotency_key(DEFAULTS.idempotency_ttl_seconds)
_ONE = f"/{ID}"


@router.post(
    "",
    status_code=202,
    operation_id="createExport",
    summary="Export units to a file (a job)",
    description="Answers at once with the job; poll it (`Location`) until `status` is "
    "`succeeded`, then download `.../file`. The export is one consistent snapshot of the units "
    "this key may see (its policy applies), oldest first (`createdAt`, then `id`). Formats: "
    "`csv` (UTF-8 with a BOM, nested values as JSON text), `jsonl` (one unit a line, as the "
    "API returns it), `xlsx` (one sheet, text always text, `createdAt` and `updatedAt` as "
    "date cells, the header row frozen with filter buttons), `parquet` (typed columns, money as "
    f"decimal128{PARQUET_DECIMAL}, nested values as JSON columns). csv and xlsx add "
    f"read-only columns after the record's fields, {_STATUS_COLUMNS} (imports ignore them). "
    "`compression: gzip` for csv and jsonl. The job shows the `filter`, `q` and "
    "`fields` asked for. "
    f"Files are kept {DEFAULTS.export_ttl_hours:g} hours (UNITS_API_EXPORT_TTL_HOURS).",
    responses={
        **success(202, "Job", "The queued job", ("Location",)),
        **problems(400, 413, 415, 422),
    },
    openapi_extra={**json_body("ExportCreate"), "parameters": [IDEMPOTENCY_KEY]},
)
async def create_export(request: Request) -> Response:
    principal = await authorize(request, UNITS_EXPORT)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)
    params = service.plan(parse_model(ExportCreate, body.value), principal.policy)

    async def operation(conn: Any) -> Response:
        return await queued(conn, JOB, await service.create(conn, params, principal))

    response = await context.idempotency.run(request, str(principal.key_id), body.raw, operation)
    context.jobs_wake.set()
    return response


add_job_routes(
    router,
    JOB,
    job_viewer(UNITS_EXPORT),
    listed="Newest first; follow `nextCursor` until it is null. A key sees the exports it "
    "asked for; an admin key sees every one.",
)


@router.get(
    f"{_ONE}/file",
    operation_id="downloadExport",
    summary="Download an export's file",
    description="The file, with `Content-Disposition: attachment`, in the media type of its "
    "format (gzip when compressed). 409 while the export has not succeeded (queued, running "
    "or failed), 410 once its file has expired. 503 `/problems/file-on-another-machine` when "
    "the file is kept on the local disk of another machine than the one answering (several "
    "machines with local files, without UNITS_API_STORAGE_URL): `machine` names the one that "
    "holds it.",
    response_class=Response,
    responses={
        200: {
            "description": "The file",
            # Bytes first: a generic client reads every format as bytes.
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}}
                for media in ("application/octet-stream", *MEDIA_TYPES.values(), GZIP_MEDIA_TYPE)
            },
            "headers": {
                "Content-Disposition": {
                    "description": 'attachment; filename="units-<time>.<ext>"',
                    "schema": {"type": "string"},
                }
            },
        },
        **problems(404, 409, 410),
        503: {
            "description": "The file is kept on another machine (`machine`); machines that "
            "share a database need UNITS_API_STORAGE_URL",
            "content": {"application/problem+json": {"schema": ref("Problem")}},
        },
    },
)
async def download_export(request: Request, id: JobId) -> Response:
    principal = await authorize(request, UNITS_EXPORT)
    context = app_context(request)
    async with context.db.read() as conn:
        row = await jobs_service.get(conn, id, owner_filter(principal), "export")
    file = service.ready_file(row)
    storage = context.storage
    if isinstance(storage, LocalStorage):
        path = storage.path(file.key)
        if not path.exists():
            raise _missing(storage, file, context.settings.machine_name)
        return FileResponse(path, media_type=file.media_type, filename=file.name)
    size = await storage.size(file.key)
    if size is None:
        raise _missing(storage, file, context.settings.machine_name)
    return StreamingResponse(
        storage.read(file.key),
        media_type=file.media_type,
        headers={
            "Content-Disposition": f'attachment; filename="{file.name}"',
            "Content-Length": str(size),
        },
    )


def _missing(storage: Storage, file: service.ExportFile, this_machine: str) -> Exception:
    """Why a ready export's file is not in `storage`: kept on another machine, or gone."""
    machine = holder(storage, file.place)
    if machine is None:
        return Gone(service.FILE_EXPIRED)
    return FileOnAnotherMachine("The export's file", machine, this_machine)
