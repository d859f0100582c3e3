"""The export job: its body (run in a job's child process) and how it shows in the API."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

from units_api.clock import utcnow
from units_api.errors import SettingError
from units_api.exports.formats import FORMATS, ExportError, file_extension
from units_api.exports.service import KIND, ExportParams, file_key, write_export
from units_api.jobs.kinds import JobKind
from units_api.jobs.work import JobContext, JobFailed

log = logging.getLogger(__name__)


async def run_export_job(context: JobContext) -> dict[str, Any]:
    """The job's body: write the file, then hand it to storage whole."""
    claim = context.claim
    params = ExportParams.of(claim.params)
    path = context.storage.scratch("." + file_extension(params.format, params.compression))
    # Read on a replica when one is up and caught up now (a job's process lives for one job:
    # checked once, not watched).
    settings = context.settings
    try:
        await context.db.open_replicas(
            settings.replica_urls, settings.replica_max_lag_seconds, pool_size=1, watch=False
        )
    except SettingError as exc:
        # A replica promoted since the server started (or changed under it): the server's
        # own check skips it; the export reads the primary (the others too are passed over,
        # for this one export).
        log.warning(
            "read replicas not usable; the export reads the primary",
            extra={"jobId": str(claim.id), "error": str(exc)},
        )
    try:
        rows, size = await write_export(context.db, params, path, context.progress)
        context.check_parent()
        key = file_key(claim.id, params)
        await context.storage.put(key, path)
    except ExportError as exc:
        raise JobFailed(str(exc)) from None
    finally:
        path.unlink(missing_ok=True)
    expires = utcnow() + timedelta(hours=context.settings.export_ttl_hours)
    return {
        "row_count": rows,
        "bytes": size,
        "expires_at": expires,
        "result": orjson.dumps({"file": key, "place": context.storage.place()}).decode(),
    }


class ExportFields(BaseModel):
    """An export's own fields in its job."""

    compression: Literal["none", "gzip"] | None = Field(
        default=None, description="Exports: the file's compression."
    )
    filter: str | None = Field(
        default=None, description="Exports: the `filter` asked for (null: every unit)."
    )
    q: str | None = Field(default=None, description="Exports: the search text asked for.")
    fields: list[str] | None = Field(
        default=None, description="Exports: the `fields` asked for (null: every field)."
    )


def fields(params: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "compression": params["compression"],
        "filter": params.get("filter"),
        "q": params.get("q"),
        "fields": params.get("fields"),
    }


EXAMPLE = {
    "id": "01a20e2e-5a0b-7464-bfa9-1ee5bc389b7d",
    "kind": "export",
    "status": "succeeded",
    "format": "csv",
    "progress": 1.0,
    "rowCount": 1200,
    "bytes": 7340032,
    "createdAt": "2026-11-24T15:30:48.459Z",
    "startedAt": "2026-11-24T15:30:48.462Z",
    "finishedAt": "2026-11-24T15:30:49.605Z",
    "expiresAt": "2026-12-01T15:30:49.605Z",
    "error": None,
    "compression": "gzip",
    "filter": "city==Cairo;price=le=2000000",
    "q": "villa",
    "fields": ["name", "price", "paymentPlans"],
}
# An export holds no lock, so it takes only CPU time nothing else wants.
JOB = JobKind(KIND, run_export_job, fields, ExportFields, FORMATS, EXAMPLE, idle=True)
