"""The export request."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from units_api.filters.parser import MAX_LENGTH as MAX_FILTER_LENGTH
from units_api.units.schemas import MAX_QUERY_LENGTH, ProjectedField


class ExportCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"format": "csv", "filter": "city==Cairo", "compression": "gzip"},
                {"format": "parquet"},
                {"format": "jsonl", "q": "villa", "fields": ["name", "price", "paymentPlans"]},
            ]
        },
    )

    format: Literal["csv", "jsonl", "xlsx", "parquet"]
    filter: Annotated[str, Field(json_schema_extra={"maxLength": MAX_FILTER_LENGTH})] | None = (
        Field(default=None, description="RSQL, as the list's `p` (a bad one is a 400).")
    )
    q: Annotated[str, StringConstraints(max_length=MAX_QUERY_LENGTH)] | None = Field(
        default=None, description="Search text, as the list's `q`."
    )
    fields: list[ProjectedField] | None = Field(
        default=None,
        min_length=1,
        max_length=60,
        description="The columns (`id` always first); every field when absent.",
    )
    compression: Literal["none", "gzip"] = Field(
        default="none", description="gzip: csv and jsonl only (xlsx and parquet are compressed)."
    )
