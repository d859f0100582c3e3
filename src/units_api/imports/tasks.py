"""The import job: its body (run in a job's child process) and how it shows in the API."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
import orjson

from units_api.errors import bound_error, kept_elsewhere
from units_api.imports.service import KIND, ImportParams, run_import
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
