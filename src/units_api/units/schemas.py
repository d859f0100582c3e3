"""Schemas of the unit: what a client may write, and what the API returns.

One model per shape: `UnitWrite` validates create and replace bodies (and the result of a
merge patch); `UnitPatch` documents PATCH; `UnitRead` documents the returned record.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model

from units_api.units.types import (
    Amount,
    Coordinate,
    Label,
    LongText,
    Name,
    NullAsEmpty,
    ReadingDate,
    Text,
    Url,
    Whole,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=False)


class UnitLocation(_Strict):
    """A GeoJSON Point."""

    type: Literal["Point"]
    coordinates: Annotated[list[Coordinate], Field(min_length=2, max_length=2)] = Field(
        description="[longitude, latitude], longitude within [-180, 180], latitude [-90, 90]",
        examples=[[31.4913, 30.0074]],
    )


class Expense(_Strict):
    name: Text | None = None
    value: Amount | None = None


class Spec(_Strict):
    featureNumber: Whole | None = None
    featureType: Text | None = None
    featureImage: Url | None = None
    featureDesc: LongText | None = None
    featureDescAr: LongText | None = None
    featureTag: Text | None = None
    active: StrictBool | None = None


class Option(_Strict):
    optionNumber: Whole | None = None
    optionName: Text | None = None
    optionNameAr: Text | None = None
    area: Amount | None = None
    uom: Text | None = None
    price: Amount | None = None
    active: StrictBool | None = None


class PaymentPlan(_Strict):
    planNumber: Whole | None = None
    planName: Text | None = None
    planNameAr: Text | None = None
    planDesc: LongText | None = None
    planDescAr: LongText | None = None
    minPrice: Amount | None = None
    maxPrice: Amount | None = None
    default: StrictBool | None = None
    downPayment: Amount | None = None
    installmentsValue: Amount | None = None
    paymentDetails: LongText | None = None
    active: StrictBool | None = None


class Floor(_Strict):
    floorsNumber: Whole | None = None
    floorName: Text | None = None
    floorNameAr: Text | None = None
    floorDesc: LongText | None = None
    floorDescAr: LongText | None = None
    rooms: Whole | None = None
    baths: Whole | None = None
    view: Text | None = None
    area: Amount | None = None
    uom: Text | None = None
    price: Amount | None = None
    extras: LongText | None = None
    floorImage: Url | None = None


class Reading(_Strict):
    service: Text | None = None
    currentReading: Amount | None = None
    previousReading: Amount | None = None
    cost: Amount | None = None
    readingDate: ReadingDate | None = None
    Notes: LongText | None = None


def _array(item: Any, max_items: int) -> Any:
    return Annotated[list[item], Field(max_length=max_items), NullAsEmpty]


class UnitFields(_Strict):
    """The editable fields of a unit, in the order the API has always listed them."""

    name: Name = Field(description="Required, non-blank.", examples=["Palm Hills Villa A-12"])
    type: Label = Field(description="Required, non-blank.", examples=["villa"])
    location: Text | None = None
    price: Amount | None = Field(default=None, examples=[4250000.5])
    surface: Amount | None = None
    guaranty: Amount | None = None
    city: Text | None = Field(default=None, examples=["New Cairo"])
    subProjectId: Text | None = None
    priceBase: Text | None = None
    unitImageUrl: Url | None = None
    unitNameAr: Text | None = Field(default=None, examples=["فيلا بالم هيلز أ-١٢"])
    unitLocation: UnitLocation | None = None
    expense: Expense | None = None
    startingPrice: Amount | None = None
    maxPrice: Amount | None = None
    unitDesc: LongText | None = None
    unitDescAr: LongText | None = None
    unitShortDesc: LongText | None = None
    unitShortDescAr: LongText | None = None
    gallery: _array(Url, 100) = Field(default_factory=list)  # type: ignore[valid-type]
    specs: _array(Spec, 200) = Field(default_factory=list)  # type: ignore[valid-type]
    options: _array(Option, 200) = Field(default_factory=list)  # type: ignore[valid-type]
    paymentPlans: _array(PaymentPlan, 200) = Field(default_factory=list)  # type: ignore[valid-type]
    floorsPlan: _array(Floor, 200) = Field(default_factory=list)  # type: ignore[valid-type]
    readings: _array(Reading, 1000) = Field(default_factory=list)  # type: ignore[valid-type]


EDITABLE_FIELDS: tuple[str, ...] = tuple(UnitFields.model_fields)
SERVER_FIELDS: tuple[str, ...] = (
    "id",
    "createdAt",
    "updatedAt",
    "version",
    "publishing",
    "availability",
)
OBJECT_FIELDS: dict[str, type[BaseModel]] = {"unitLocation": UnitLocation, "expense": Expense}


class UnitWrite(UnitFields):
    """Body of create and replace. Server fields may be sent back and are ignored."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "Palm Hills Villa A-12",
                    "type": "villa",
                    "city": "New Cairo",
                    "price": 4250000.5,
                    "unitNameAr": "فيلا بالم هيلز أ-١٢",
                    "unitLocation": {"type": "Point", "coordinates": [31.4913, 30.0074]},
                    "paymentPlans": [
                        {
                            "planName": "10% down",
                            "downPayment": 425000,
                            "minPrice": 4000000,
                            "maxPrice": 4500000,
                            "default": True,
                        }
                    ],
                }
            ]
        },
    )

    id: str | None = Field(
        default=None, description="Ignored on create; must match the path on PUT."
    )
    createdAt: Any = Field(default=None, description="Server field; ignored.")
    updatedAt: Any = Field(default=None, description="Server field; ignored.")
    version: Any = Field(default=None, description="Server field; ignored (use If-Match).")
    publishing: Any = Field(default=None, description="Server field; ignored.")
    availability: Any = Field(default=None, description="Server field; ignored.")


UnitPatch = create_model(  # type: ignore[call-overload]
    "UnitPatch",
    __config__=ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": "JSON Merge Patch (RFC 7396): a key sets, null clears, "
            "unitLocation and expense merge key by key, arrays are replaced whole.",
            "examples": [{"price": 4100000, "unitDesc": None}],
        },
    ),
    **{
        name: (Any, Field(default=None, description=info.description))
        for name, info in UnitWrite.model_fields.items()
    },
)


class Publishing(BaseModel):
    status: Literal["draft", "scheduled", "published", "unpublished", "archived"]
    publishedAt: str | None
    scheduledAt: str | None
    channels: list[str]


class Availability(BaseModel):
    status: Literal["available", "reserved", "sold", "blocked"]
    reservedUntil: str | None
    changedAt: str | None


class UnitRead(UnitFields):
    """A unit as the API returns it: every field present, unset ones null or []."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        description="UUIDv7, canonical lowercase.",
        examples=["019a8f2e-5c1b-7d3e-9a4f-0b1c2d3e4f50"],
    )
    createdAt: str = Field(examples=["2026-11-22T09:30:00.123Z"])
    updatedAt: str = Field(examples=["2026-11-22T09:30:00.123Z"])
    version: int = Field(ge=1)
    publishing: Publishing
    availability: Availability


class HistoryEntry(BaseModel):
    version: int
    at: str
    actor: dict[str, Any]
    action: str
    changes: dict[str, dict[str, Any]]


class HistoryPage(BaseModel):
    data: list[HistoryEntry]
    nextCursor: str | None


class PageMeta(BaseModel):
    page: int
    limit: int
    total: int | None
    totalPages: int | None
    count: Literal["exact", "estimated", "none"]


class PageLinks(BaseModel):
    self: str
    first: str
    prev: str | None
    next: str | None
    last: str | None


class UnitPage(BaseModel):
    data: list[dict[str, Any]] = Field(description="Units, or the projected fields of each.")
    meta: PageMeta
    links: PageLinks


class QueryResult(BaseModel):
    data: list[dict[str, Any]] = Field(
        description="Units (or their projected fields), or one row per aggregate group."
    )
    nextCursor: str | None = Field(default=None, description="Absent for aggregates.")


class BulkResult(BaseModel):
    results: list[dict[str, Any]] | None = Field(
        default=None, description="Per item: {id, status, version} or {id, status, error}."
    )
    succeeded: int | None = None
    failed: int | None = None
    matched: int | None = Field(default=None, description="By filter: units matched.")
    updated: int | None = Field(default=None, description="By filter: units changed.")
