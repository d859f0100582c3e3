"""The import job: its body (run in a job's child process) and how it shows in the API."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

import anyio
import orjson
from pydantic import BaseModel, Field

from units_api.errors import bound_error, kept_elsewhere
from units_api.imports.readers import FORMATS
from units_api.imports.service import KIND, MAX_LISTED_ERRORS, ImportParams, Report, run_import
from units_api.jobs.kinds import JobKind
from units_api.jobs.storage import holder
from units_api.jobs.work import JobContext, JobFailed

log = logging.getLogger(__name__)
UPLOAD = "The import's uploaded file"


async def run_import_job(context: JobContext) -> dict[str, Any]:
    """The job's body: fetch the uploaded file, import it, report."""
    params = ImportParams.of(context.claim.params)
    path = context.storage.scratch("." + params.format)
    try:
        try:
            await context.storage.fetch(params.file, path)
        except FileNotFoundError as exc:
            claim, machine = context.claim, holder(context.storage, params.place)
            why = _missing(context, params, machine, exc)
            if machine is None or claim.attempt >= claim.max_attempts:
                raise JobFailed(why) from None  # deleted, or the last attempt
            # Received by another machine, whose own runner may take the job next time (and
            # resume it from its checkpoint): tried again, failed with the reason at the last.
            raise FileNotFoundError(why) from None
        size = (await anyio.Path(path).stat()).st_size
        report = await run_import(
            context.db,
            params,
            path,
            context.settings.vocabularies,
            context,
            context.claim.checkpoint,
            context.settings.max_import_expanded_bytes,
        )
    finally:
        await anyio.Path(path).unlink(missing_ok=True)
    return {
        "row_count": report.row,
        "bytes": size,
        "result": orjson.dumps(report.result()).decode(),
    }


def so_far(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """A failed import's counts from its last checkpoint: the rows it had committed (the
    checkpoint is committed with them)."""
    report = Report(**checkpoint)
    return {"row_count": report.row, "result": orjson.dumps(report.result()).decode()}


def _missing(
    context: JobContext, params: ImportParams, machine: str | None, exc: FileNotFoundError
) -> str:
    """Why the upload is not in this machine's storage: received by `machine` (another one),
    or deleted since (or, for a job that recorded no place, missing from the store)."""
    this_machine = context.settings.machine_name
    if machine is not None:
        return kept_elsewhere(UPLOAD, machine, this_machine)
    if not params.place:
        # The store's own words name its directory or bucket: for the log, not the job.
        log.warning(
            "an import's upload is missing",
            extra={"jobId": str(context.claim.id), "error": bound_error(str(exc))},
        )
        return f"{UPLOAD} is missing from the file store. Upload the file again."
    return (
        f"{UPLOAD} is no longer in the files directory of machine '{this_machine}', which "
        "received it: it was deleted before the import read it. Upload the file again."
    )


class RowError(BaseModel):
    row: int = Field(description="The data row, from 1 (a header is not counted).")
    field: str = Field(
        description="The field, nested paths as in 422s: `paymentPlans[0].minPrice`."
    )
    message: str


class ImportFields(BaseModel):
    """An import's own fields in its job: how it was asked for, and its report."""

    mode: Literal["create", "upsert"] | None = Field(default=None, description="Imports.")
    dryRun: bool | None = Field(default=None, description="Imports.")
    atomic: bool | None = Field(default=None, description="Imports.")
    rowsTotal: int | None = Field(default=None, description="Imports: data rows read.")
    rowsOk: int | None = Field(
        default=None,
        description="Imports: rows that are fine: `rowsCreated` + `rowsUpdated` + "
        "`rowsUnchanged` (on a dry run, what they would be).",
    )
    rowsFailed: int | None = Field(default=None, description="Imports: rows refused.")
    rowsCreated: int | None = Field(
        default=None, description="Imports: of `rowsOk`, new units (would be, on a dry run)."
    )
    rowsUpdated: int | None = Field(
        default=None,
        description="Imports: of `rowsOk`, units upserted with a change (would be, on a dry run).",
    )
    rowsUnchanged: int | None = Field(
        default=None,
        description="Imports: of `rowsOk`, upserted rows equal to the stored unit: nothing "
        "written (no version, history entry or event).",
    )
    errors: list[RowError] | None = Field(
        default=None,
        description=f"Imports: the first {MAX_LISTED_ERRORS:,} row errors, in file order.",
    )


def fields(params: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "mode": params["mode"],
        "dryRun": params["dryRun"],
        "atomic": params["atomic"],
        "rowsTotal": result.get("rowsTotal"),
        "rowsOk": result.get("rowsOk"),
        "rowsFailed": result.get("rowsFailed"),
        "rowsCreated": result.get("rowsCreated"),
        "rowsUpdated": result.get("rowsUpdated"),
        "rowsUnchanged": result.get("rowsUnchanged"),
        "errors": _bounded_errors(result.get("errors")),
    }


def _bounded_errors(errors: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not errors:
        return errors
    return [{**error, "message": bound_error(error.get("message"))} for error in errors]


EXAMPLE = {
    "id": "01a20e34-7ee9-74b8-9d8c-2f76fadd9cc1",
    "kind": "import",
    "status": "succeeded",
    "format": "xlsx",
    "progress": 1.0,
    "rowCount": 3,
    "bytes": 10240,
    "createdAt": "2026-11-24T15:37:30.004Z",
    "startedAt": "2026-11-24T15:37:30.010Z",
    "finishedAt": "2026-11-24T15:37:31.269Z",
    "expiresAt": None,
    "error": None,
    "mode": "upsert",
    "dryRun": False,
    "atomic": False,
    "rowsTotal": 3,
    "rowsOk": 2,
    "rowsFailed": 1,
    "rowsCreated": 1,
    "rowsUpdated": 0,
    "rowsUnchanged": 1,
    "errors": [
        {
            "row": 3,
            "field": "paymentPlans[0].minPrice",
            "message": "must be greater than or equal to 0",
        }
    ],
}
# An import holds row locks (on SQLite the only write lock), so it must not stall: it runs at
# a lowered priority, not in the idle class.
JOB = JobKind(
    KIND, run_import_job, fields, ImportFields, FORMATS, EXAMPLE, idle=False, so_far=so_far
)
