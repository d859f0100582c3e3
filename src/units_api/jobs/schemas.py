"""The job record as the API returns it (exports and imports)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from units_api.exports.formats import FORMATS
from units_api.imports.service import MAX_LISTED_ERRORS

JobStatus = Literal["queued", "running", "succeeded", "failed", "expired"]


class RowError(BaseModel):
    row: int = Field(description="The data row, from 1 (a header is not counted).")
    field: str = Field(
        description="The field, nested paths as in 422s: `paymentPlans[0].minPrice`."
    )
    message: str


class Job(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
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
                },
                {
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
                },
            ]
        }
    )

    id: str
    kind: Literal["export", "import"]
    status: JobStatus
    format: Literal[FORMATS]  # type: ignore[valid-type]
    progress: float = Field(ge=0, le=1)
    rowCount: int | None = Field(
        description="Units written to the file (export) or rows read (import)."
    )
    bytes: int | None = Field(description="The file's size.")
    createdAt: datetime
    startedAt: datetime | None
    finishedAt: datetime | None
    expiresAt: datetime | None = Field(description="When an export's file is deleted.")
    error: str | None = Field(description="Why the job failed.")
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


class JobPage(BaseModel):
    data: list[Job]
    nextCursor: str | None
