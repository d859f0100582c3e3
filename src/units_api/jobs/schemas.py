"""The job as the API returns it: the fields every job has, then each kind's own (declared
with the kind, `JobKind.schema`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from units_api.jobs.kinds import JobKind

JobStatus = Literal["queued", "running", "succeeded", "failed", "expired"]


class JobFields(BaseModel):
    """The fields every job has; `kind` and `format` take their values from the kinds."""

    id: str
    kind: str
    status: JobStatus
    format: str
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


def job_schemas(kinds: Sequence[JobKind]) -> tuple[type[BaseModel], type[BaseModel]]:
    """The `Job` and `JobPage` models of these kinds: the fields every job has, then each
    kind's own, in the order of `kinds`, with an example job of each."""
    formats = tuple(dict.fromkeys(fmt for kind in kinds for fmt in kind.formats))
    fields: dict[str, Any] = _fields(JobFields)
    fields["kind"] = (Literal[tuple(kind.name for kind in kinds)], ...)
    fields["format"] = (Literal[formats], ...)
    for kind in kinds:
        fields.update(_fields(kind.schema))
    examples: list[Any] = [dict(kind.example) for kind in kinds]
    config = ConfigDict(json_schema_extra={"examples": examples})
    job = create_model("Job", __config__=config, **fields)
    page = create_model("JobPage", data=(list[job], ...), nextCursor=(str | None, ...))
    return job, page


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    return {name: (info.annotation, info) for name, info in model.model_fields.items()}
