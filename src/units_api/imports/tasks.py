"""The import job: its body (run in a job's child process) and how it shows in the API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import orjson

from units_api.errors import bound_error, kept_elsewhere
from units_api.imports.service import KIND, ImportParams, run_import
from units_api.jobs.kinds import JobKind
from units_api.jobs.storage import holder
from units_api.jobs.work import JobContext, JobFailed

UPLOAD = "The import's uploaded file"


async def run_import_job(context: JobContext) -> dict[str, Any]:
    """The job's body: fetch the uploaded file, import it, report."""
    params = ImportParams.of(context.claim.params)
    path = context.storage.scratch("." + params.format)
    try:
        try:
            await context.storage.fetch(params.file, path)
        except FileNotFoundError as exc:
            # Not there now, not there on a retry either.
            raise JobFailed(_missing(context, params, exc)) from None
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


def _missing(context: JobContext, params: ImportParams, exc: FileNotFoundError) -> str:
    """Why the upload is not in this machine's storage: received by another machine, or
    deleted since (or, for a job that recorded no place, what the storage says)."""
    this_machine = context.settings.machine_name
    machine = holder(context.storage, params.place)
    if machine is not None:
        return kept_elsewhere(UPLOAD, machine, this_machine)
    if not params.place:
        return f"{UPLOAD} is missing: {exc}"
    return (
        f"{UPLOAD} is no longer in the files directory of machine '{this_machine}', which "
        "received it: it was deleted before the import read it. Upload the file again."
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


# An import holds row locks (on SQLite the only write lock), so it must not stall: it runs at
# a lowered priority, not in the idle class.
JOB = JobKind(KIND, run_import_job, fields, idle=False)
