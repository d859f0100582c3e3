"""Schemas of the unit and of every request about units: what a client may write, and what the
API returns.

One model per shape: `UnitWrite` validates create and replace bodies (and the result of a
merge patch); `UnitPatch` documents PATCH; `UnitRead` documents the returned record.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    create_model,
    field_validator,
)
from pydantic.fields import FieldInfo

from units_api.filters.parser import MAX_LENGTH as MAX_FILTER_LENGTH
from units_api.http.paging import CURSOR_PATTERN, Limit
from units_api.units.fields import AGGREGATABLE, COMPUTED_SORTS, GROUPABLE, RELEVANCE, SORTABLE
from units_api.units.types import (
    Amount,
    Coordinate,
    Country,
    Currency,
    IsoDate,
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


OfferingType = Literal["sale", "rent"]
CompletionStatus = Literal["ready", "offPlan"]


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
    currency: Currency | None = Field(
        default=None,
        description="ISO 4217 code of the unit's prices; null means the server's default "
        "currency (UNITS_API_DEFAULT_CURRENCY).",
        examples=["EGP"],
    )
    country: Country | None = Field(
        default=None, description="ISO 3166-1 alpha-2 code.", examples=["EG"]
    )
    offeringType: OfferingType | None = Field(
        default=None,
        description="For sale or for rent (a rent's price is per month); null means sale.",
        examples=["sale"],
    )
    bedrooms: Whole | None = Field(default=None, description="0 is a studio.", examples=[3])
    bathrooms: Whole | None = Field(default=None, examples=[2])
    completionStatus: CompletionStatus | None = Field(default=None, examples=["offPlan"])
    handoverDate: IsoDate | None = Field(
        default=None,
        description="When an off-plan unit is handed over; only with completionStatus offPlan.",
        examples=["2028-06-30"],
    )


EDITABLE_FIELDS: tuple[str, ...] = tuple(UnitFields.model_fields)
SERVER_FIELDS: tuple[str, ...] = (
    "id",
    "createdAt",
    "updatedAt",
    "version",
    "publishing",
    "availability",
)
# A document's fields in the order the API writes them (`record.UnitRecord.document`): the
# id, the client's fields, then the rest of the server's.
DOCUMENT_ORDER = (SERVER_FIELDS[0], *EDITABLE_FIELDS, *SERVER_FIELDS[1:])
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
                    "currency": "EGP",
                    "country": "EG",
                    "offeringType": "sale",
                    "bedrooms": 4,
                    "bathrooms": 3,
                    "completionStatus": "offPlan",
                    "handoverDate": "2028-06-30",
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


def _patched(info: FieldInfo) -> Any:
    """A field's type in a merge patch, as documented: an array is replaced whole, so it is
    the unit's own array (or null, which clears it); anything else may be partial (objects
    merge key by key) and is checked on the merged unit."""
    if get_origin(info.annotation) is not list:
        return Any
    return Annotated[(info.annotation, *info.metadata)]


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
        name: (_patched(info), Field(default=None, description=info.description))
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


class UnitListed(UnitRead):
    """A unit in a list or a query's answer: the record, and its distance when sorted by one."""

    distanceMeters: float | None = Field(
        default=None,
        description="Sorted by distance only: metres from the `=near=` point.",
    )


class UnitPage(BaseModel):
    # Typed for clients as the record; projected fields (`fields=`) come as a partial object.
    data: list[UnitListed | dict[str, Any]] = Field(
        description="Units, or the projected fields of each; sorted by distance, each also "
        "has `distanceMeters`, its distance in metres from the `=near=` point."
    )
    meta: PageMeta
    links: PageLinks


class QueryResult(BaseModel):
    data: list[UnitListed | dict[str, Any]] = Field(
        description="Units (or their projected fields), or one row per aggregate group; "
        "sorted by distance, each unit also has `distanceMeters`, its distance in metres from "
        "the `=near=` point."
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


# What a list or query may return: every field, server fields first.
PROJECTABLE_ORDER = (*SERVER_FIELDS, *EDITABLE_FIELDS)
PROJECTABLE = frozenset(PROJECTABLE_ORDER)
MAX_QUERY_LENGTH = 500  # of a search text (`q`)
QUERY_LIMIT = Limit(default=100, maximum=1000)
MAX_ITEMS = 1000  # of a bulk update by items
MAX_MATCHED = 10_000  # units a bulk update by filter may match


# --- The query endpoint -----------------------------------------------------------------

SortField = Literal[(*SORTABLE, *COMPUTED_SORTS)]  # type: ignore[valid-type]
GroupField = Literal[tuple(GROUPABLE)]  # type: ignore[valid-type]
Alias = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")]
# Checked by hand so a bad one is named as today (a 422, a 400 for the filter and cursor);
# the document says what the checks accept.
ProjectedField = Annotated[str, Field(json_schema_extra={"enum": list(PROJECTABLE_ORDER)})]


class SortSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: SortField
    order: Literal["asc", "desc"] | None = Field(
        default=None,
        description="asc by default; desc (best first) for relevance",
    )

    @property
    def descending(self) -> bool:
        if self.order is None:
            return bool(self.field == RELEVANCE)
        return self.order == "desc"


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


# --- Bulk update ------------------------------------------------------------------------


class BulkItems(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "units": [
                        {
                            "id": "019a8f2e-5c1b-7d3e-9a4f-0b1c2d3e4f50",
                            "version": 3,
                            "price": 4100000,
                        }
                    ],
                    "atomic": True,
                }
            ]
        },
    )

    units: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_ITEMS,
        description="Merge patches, each with the unit's `id` and optionally its `version`.",
    )
    atomic: bool = Field(default=True, description="All or nothing (default), or item by item.")


class BulkByFilter(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "filter": "subProjectId==mivida-2;priceBase==total",
                    "patch": {"guaranty": 2},
                    "dryRun": True,
                }
            ]
        },
    )

    filter: str = Field(description=f"RSQL; at most {MAX_MATCHED:,} units may match.")
    patch: dict[str, Any] = Field(description="One merge patch applied to every matching unit.")
    dryRun: bool = False


# --- State machine actions --------------------------------------------------------------


def _channel_name(value: str) -> str:
    if "\x00" in value or not value.strip():
        raise ValueError("must be a non-blank name")
    return value


Channel = Annotated[
    str, StringConstraints(min_length=1, max_length=100), AfterValidator(_channel_name)
]


class PublishingAction(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"action": "publish", "channels": ["website", "app"]},
                {"action": "schedule", "at": "2026-12-01T08:00:00Z", "channels": ["website"]},
                {"action": "unpublish"},
            ]
        },
    )

    action: Literal["publish", "unpublish", "schedule", "archive", "restore"]
    at: str | None = Field(default=None, description="RFC 3339, in the future; for schedule.")
    channels: list[Channel] | None = Field(
        default=None, max_length=50, description="Where the unit is published; kept if absent."
    )


class AvailabilityAction(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"action": "reserve", "until": "2026-12-01T18:00:00Z"},
                {"action": "sell"},
            ]
        },
    )

    action: Literal["reserve", "release", "sell", "block", "unblock"]
    until: str | None = Field(default=None, description="RFC 3339, in the future; for reserve.")
