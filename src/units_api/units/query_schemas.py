"""The query endpoint's request body."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from units_api.filters.parser import MAX_LENGTH as MAX_FILTER_LENGTH
from units_api.http.paging import CURSOR_PATTERN, Limit
from units_api.units.listing import MAX_QUERY_LENGTH, PROJECTABLE, PROJECTABLE_ORDER, SORTABLE
from units_api.units.tables import FIELD_COLUMNS

# Columns a query may group by or aggregate: the unit's typed columns.
_TEXT = ("name", "type", "location", "city", "subProjectId", "priceBase")
GROUPABLE = {
    **{field: FIELD_COLUMNS[field] for field in _TEXT},
    "status": "publishing_status",
    "availability": "availability_status",
}
NUMERIC = {
    **{field: column for field, column in FIELD_COLUMNS.items() if field not in _TEXT},
    "version": "version",
}
TIMES = {"createdAt": "created_at", "updatedAt": "updated_at"}
AGGREGATABLE = {**GROUPABLE, **NUMERIC, **TIMES, "id": "id"}

SortField = Literal[tuple(SORTABLE)]  # type: ignore[valid-type]
GroupField = Literal[tuple(GROUPABLE)]  # type: ignore[valid-type]
Alias = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")]
QUERY_LIMIT = Limit(default=100, maximum=1000)
# Checked by hand so a bad one is named as today (a 422, a 400 for the filter and cursor);
# the document says what the checks accept.
ProjectedField = Annotated[str, Field(json_schema_extra={"enum": list(PROJECTABLE_ORDER)})]


class SortSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: SortField  # type: ignore[valid-type]
    order: Literal["asc", "desc"] = "asc"


class Aggregate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fn: Literal["count", "sum", "avg", "min", "max", "countDistinct"]
    field: Annotated[str, Field(json_schema_extra={"enum": list(AGGREGATABLE)})] | None = Field(
        default=None, description="A column; `count` without one counts units."
    )


class QueryRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "filter": "city==Cairo;price=le=5000000",
                    "q": "villa",
                    "sort": [{"field": "price", "order": "asc"}],
                    "fields": ["name", "price"],
                    "limit": 100,
                },
                {
                    "filter": "status==published",
                    "groupBy": ["city", "availability"],
                    "aggregates": {
                        "n": {"fn": "count"},
                        "avgPrice": {"fn": "avg", "field": "price"},
                    },
                },
            ]
        },
    )

    filter: Annotated[str, Field(json_schema_extra={"maxLength": MAX_FILTER_LENGTH})] | None = (
        Field(default=None, description="RSQL, as the list's `p` (a bad one is a 400).")
    )
    q: Annotated[str, StringConstraints(max_length=MAX_QUERY_LENGTH)] | None = None
    fields: list[ProjectedField] | None = Field(default=None, max_length=60)
    sort: list[SortSpec] = Field(default_factory=list, max_length=5)
    limit: int = QUERY_LIMIT.field()
    cursor: (
        Annotated[str, Field(json_schema_extra={"minLength": 1, "pattern": CURSOR_PATTERN})] | None
    ) = Field(default=None, description="`nextCursor` of the previous page (a bad one is a 400).")
    groupBy: list[GroupField] = Field(default_factory=list, max_length=5)  # type: ignore[valid-type]
    aggregates: dict[Alias, Aggregate] = Field(default_factory=dict, max_length=20)

    @field_validator("fields")
    @classmethod
    def _known_fields(cls, value: list[str] | None) -> list[str] | None:
        unknown = [name for name in value or [] if name not in PROJECTABLE]
        if unknown:
            raise ValueError(f"unknown field(s): {', '.join(unknown)}")
        return value

    @field_validator("sort")
    @classmethod
    def _distinct_sort(cls, value: list[SortSpec]) -> list[SortSpec]:
        names = [spec.field for spec in value]
        if len(set(names)) != len(names):
            raise ValueError("names a field twice")
        return value
