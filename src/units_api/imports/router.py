"""Imports: upload a file (a job), follow it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import APIRouter, Request
from starlette.datastructures import UploadFile
from starlette.responses import Response

from units_api.auth.access import authorize, job_viewer
from units_api.auth.scopes import UNITS_WRITE
from units_api.config import DEFAULTS
from units_api.context import app_context
from units_api.errors import ValidationFailed
from units_api.http import docs
from units_api.http.body import MULTIPART, read_form
from units_api.http.docs import problems, success
from units_api.http.idempotency import REPLAYED
from units_api.ids import uuid7
from units_api.imports import service
from units_api.imports.schemas import FIELDS, IMPORT_FORM, ImportForm
from units_api.imports.service import MAX_LISTED_ERRORS
from units_api.imports.tasks import JOB
from units_api.jobs.router import add_job_routes, queued
from units_api.jobs.storage import store_faults

router = APIRouter(prefix="/api/v2/units/imports", tags=["imports"])
IDEMPOTENCY_KEY = docs.idempotency_key(DEFAULTS.idempotency_ttl_seconds)


def _copy(upload: UploadFile, target: Path, fields: bytes) -> tuple[bytes, bytes]:
    """Copy the upload to `target`; its first bytes and the request's fingerprint (the
    file's digest and the fields)."""
    digest = hashlib.sha256(fields)
    upload.file.seek(0)
    head = upload.file.read(4)
    upload.file.seek(0)
    with target.open("wb") as out:
        while chunk := upload.file.read(1024 * 1024):
            digest.update(chunk)
            out.write(chunk)
    return head, digest.hexdigest().encode()


@contextmanager
def _unless_stored(scratch: Path) -> Iterator[None]:
    """The upload's scratch file is deleted at once when it cannot be stored (the disk full
    or failing: a 507), never left for the sweep."""
    try:
        with store_faults():
            yield
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise


@router.post(
    "",
    status_code=202,
    operation_id="createImport",
    summary="Import units from a file (a job)",
    description="multipart/form-data with `file` (csv, jsonl or xlsx, by its extension or the "
    f"`format` field; at most {DEFAULTS.max_import_bytes:,} bytes, "
    "UNITS_API_MAX_IMPORT_BYTES, else 413), and optional fields `mode` (`create`: every row "
    "a new unit; `upsert`: by `id`, replacing the unit or creating it with that id), `dryRun` "
    "and `atomic` (true or false). Each row is validated exactly like a create (or a PUT) "
    "and each unit written gets its version, history entry and event. The job reports "
    "`rowsTotal`, `rowsOk`, `rowsFailed` and the first "
    f"{MAX_LISTED_ERRORS:,} `errors` (`row` counts data rows from 1), and of the rows that "
    "are fine `rowsCreated`, `rowsUpdated` and `rowsUnchanged` (an upserted row equal to the "
    "stored unit writes nothing: no version, history entry or event; a dry run counts what it "
    "would do). Without `atomic`, "
    "failing rows are listed and the others written; with it, any failure fails the job "
    "with nothing written. A file exported as csv, jsonl or xlsx imports back unchanged. "
    "A gzip-compressed csv or jsonl (`.csv.gz`, `.jsonl.gz`, or gzip's magic bytes) is read "
    "as the file it holds. What a file expands to (gzip, an xlsx's parts) is at most "
    f"{DEFAULTS.max_import_expanded_bytes:,} bytes (UNITS_API_MAX_IMPORT_EXPANDED_BYTES); a "
    "file that cannot be read (truncated, XML declaring a DTD or entities, not UTF-8, past "
    "a cap) fails its job at once with an `error` saying why, and is not retried. An empty "
    "file is a 422.",
    responses={
        **success(202, "Job", "The queued job", ("Location",)),
        **problems(400, 413, 415, 422, 507),
    },
    openapi_extra={
        "parameters": [IDEMPOTENCY_KEY],
        "requestBody": {"required": True, "content": {MULTIPART: {"schema": IMPORT_FORM}}},
    },
)
async def create_import(request: Request) -> Response:
    principal = await authorize(request, UNITS_WRITE)
    context = app_context(request)
    form = await read_form(request, context.settings.max_import_bytes, len(FIELDS))
    try:
        upload = ImportForm.read(form)
        job_id = uuid7()
        key = f"imports/{job_id}.{upload.format}"
        scratch = context.storage.scratch("." + upload.format)
        options = upload.options()
        with _unless_stored(scratch):
            head, fingerprint = await anyio.to_thread.run_sync(_copy, upload.file, scratch, options)
    finally:
        await form.close()
    if (fault := upload.fault(head)) is not None:
        await anyio.Path(scratch).unlink(missing_ok=True)
        raise ValidationFailed([("file", fault)])
    params = upload.params(key, principal, context.storage.place())
    with _unless_stored(scratch):
        await context.storage.put(key, scratch)

    async def operation(conn: Any) -> Response:
        await service.create(conn, job_id, params, principal)
        return await queued(conn, JOB, job_id)

    try:
        response = await context.idempotency.run(
            request, str(principal.key_id), fingerprint, operation
        )
    except BaseException:
        await context.storage.delete(key)
        raise
    if response.headers.get(REPLAYED):
        await context.storage.delete(key)
    context.jobs_wake.set()
    return response


add_job_routes(
    router,
    JOB,
    job_viewer(UNITS_WRITE),
    listed="Newest first; follow `nextCursor` until it is null. A key sees the imports it "
    "started; an admin key sees every one.",
    shown="With its report: `rowsTotal`, `rowsOk`, `rowsFailed`, `rowsCreated`, "
    "`rowsUpdated`, `rowsUnchanged` and `errors` "
    "(`{row, field, message}`, nested fields named as in 422s: `paymentPlans[0].minPrice`).",
)
