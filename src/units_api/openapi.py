"""The OpenAPI 3.1 document: FastAPI's paths plus the hand-declared schemas and fixes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from units_api import __version__
from units_api.auth.access import SECURITY_SCHEME
from units_api.auth.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyPage, ApiKeyRead
from units_api.channels.schemas import (
    ChannelList,
    ChannelPut,
    ChannelRead,
    ChannelWritten,
    MetaCatalogSettings,
    UnitChannel,
    UnitChannels,
)
from units_api.clock import duration_text
from units_api.config import Settings
from units_api.events.schemas import Event, EventPage
from units_api.events.types import (
    CHANNEL_EVENT_TYPES,
    EVENT_TYPES,
    JOB_EVENT_TYPES,
    TEST_EVENT_TYPE,
)
from units_api.exports.schemas import ExportCreate
from units_api.feeds.router import SECURITY_SCHEME as FEED_SECURITY_SCHEME
from units_api.filters import geo
from units_api.filters.parser import MAX_LENGTH as MAX_FILTER_LENGTH
from units_api.http.docs import problem
from units_api.job_kinds import JOB_KINDS
from units_api.jobs.schemas import job_schemas
from units_api.names.schemas import DisplayNameList, DisplayNameRead, DisplayNameWrite
from units_api.search.normalize import SEARCH_FIELDS
from units_api.units.schemas import (
    AvailabilityAction,
    BulkByFilter,
    BulkItems,
    BulkResult,
    HistoryPage,
    PublishingAction,
    QueryRequest,
    QueryResult,
    UnitListed,
    UnitPage,
    UnitPatch,
    UnitRead,
    UnitWrite,
)
from units_api.webhooks.schemas import (
    Delivery,
    DeliveryAttempt,
    DeliveryAttempts,
    DeliveryPage,
    TestResult,
    WebhookCreate,
    WebhookCreated,
    WebhookPage,
    WebhookPatch,
    WebhookRead,
)
from units_api.webhooks.service import RETRY_DELAYS, ROTATION_GRACE

_SEARCHED = ", ".join(f"`{name}`" for name in SEARCH_FIELDS[:-1]) + f" or `{SEARCH_FIELDS[-1]}`"
DESCRIPTION = f"""\
Inventory of real-estate units (apartments, villas, offices...) with bilingual English/Arabic
content, prices, payment plans, floor plans and meter readings.

Every `/api/v2` call needs `Authorization: Bearer <key>`. Errors are
`application/problem+json` (RFC 9457). Money is kept exactly as sent. Every path answers with
and without a trailing slash.

While the database is out of reach (restarting, failing over, not answering), a call answers
within `UNITS_API_DB_UNAVAILABLE_SECONDS` (default 5) with a 503 `/problems/unavailable` and
`Retry-After`, and every call succeeds again within seconds of the database answering. A read
whose connection broke is run again once by the server; repeat a write with the same
`Idempotency-Key` and it is done once.

## Filters (`p` on the list, `filter` in the query, key policies)

RSQL: `selector operator value`, joined with `;` (AND) and `,` (OR), grouped with parentheses.

| Operator | Meaning |
|---|---|
| `==`, `!=` | equal, not equal; on text case-insensitive, `*` is a wildcard (`name==*villa*`) |
| `=lt=` `=le=` `=gt=` `=ge=` (or `<` `<=` `>` `>=`) | order; numbers as numbers, times as times |
| `=in=(a,b)`, `=out=(a,b)` | one of, none of |
| `=null=true`, `=null=false` | unset, set |
| `=within=(west,south,east,north)` | on `unitLocation`: in the box, edges included |
| `=near=(lng,lat,meters)` | on `unitLocation`: at most `meters` from the point |
| `=inside=(lng1,lat1,lng2,lat2,...)` | on `unitLocation`: in the polygon |

Values may be quoted with `'` or `"` (backslash escapes). Selectors: every scalar field
(`price`, `city`, `unitNameAr`...), `id`, `createdAt`, `updatedAt`, `version`, `status`
(publishing), `availability`, `channel`; dotted paths into objects (`expense.value`,
`unitLocation.type`) and into lists, which match when ANY element does (`floorsPlan.rooms=ge=3`,
`specs.featureTag==pool`, `paymentPlans.downPayment=le=10`, `gallery==*.webp`). `==`, ordering
and `=in=` are false on an unset value; `!=` and `=out=` are true. Examples:
`city==Cairo;price=ge=1000000;price=le=5000000`,
`(type==villa,type==townhouse);floorsPlan.rooms=ge=4`, `createdAt=gt=2026-11-01T00:00:00Z`.
A syntax error, an unknown selector or a value of the wrong type is a 400 naming the parameter
and the position. A filter may be up to {MAX_FILTER_LENGTH:,} characters (a long one goes in a
body: the query endpoint, bulk updates, exports, key policies, webhooks).

## Map search (`unitLocation`)

Longitude and latitude in degrees, as in the record's GeoJSON point; a unit without one never
matches (`unitLocation=null=true` finds those). `=within=` takes the box's west, south, east
and north edges, edges included; `west` greater than `east` is a box across the antimeridian
(`unitLocation=within=(179,-20,-179,20)`). `=near=` takes a point and a distance in metres,
more than 0 and at most {geo.MAX_METERS:,}: the great-circle (haversine) distance on a sphere
of radius {geo.EARTH_RADIUS:,} m. `=inside=` takes a polygon of {geo.MIN_VERTICES} to
{geo.MAX_VERTICES:,} vertices, closed implicitly; its edges are straight lines in
longitude/latitude that never wrap at the antimeridian (across it, join two polygons with `,`).
A point on an edge (within {geo.ON_EDGE:g} degrees of it) or a vertex is inside; otherwise the
even-odd rule decides, so where a self-crossing polygon covers a place twice (the middle of a
five-pointed star drawn in one stroke) it is outside. A longitude outside -180..180, a latitude
outside -90..90, a distance out of range, a wrong count of numbers or a map operator on another
selector is a 400 with the position. With exactly one `=near=` joined to the rest by `;`,
`sortBy=distance` on the list (`"sort": [{{"field": "distance"}}]` in the query) gives the
nearest first (`order=desc`: the farthest), ties on `id`, and adds `distanceMeters` (a number)
to every unit, projected or not. Example: `unitLocation=near=(31.2357,30.0444,1500);type==villa`
with `sortBy=distance`.

## Search (`q`)

Every word must occur, as a word or the start of one, in {_SEARCHED}.
Case- and accent-insensitive; Arabic is normalised on both sides (tashkeel and
tatweel removed; أ إ آ ٱ → ا; ى → ي; ة → ه; ؤ → و; ئ → ي; Arabic-Indic and Persian digits →
0-9), so `q=شقة` finds `شقّة` and `مدينتى` finds `مدينتي`.
"""
# Paths documented with a trailing slash, as clients have always called them.
SEED_PATHS = {"/api/v2/units": "/api/v2/units/", "/api/v2/units/{id}": "/api/v2/units/{id}/"}


class FieldError(BaseModel):
    field: str = Field(examples=["paymentPlans[1].minPrice"])
    message: str = Field(examples=["must be less than or equal to maxPrice"])


class ItemError(BaseModel):
    """One failed item of a bulk update."""

    index: int
    id: str | None
    status: int = Field(examples=[404, 412, 422, 403])
    errors: list[FieldError]


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = Field(examples=["/problems/validation-error"])
    title: str
    status: int
    detail: str
    instance: str
    requestId: str | None
    errors: list[FieldError | ItemError] | None = Field(
        default=None,
        description="On 422: every violation (per item, for bulk updates); on a 400 for "
        "unknown query parameters: each of them.",
    )
    allowedActions: list[str] | None = Field(default=None, description="On a state conflict.")
    parameter: str | None = Field(
        default=None, description="On a bad query parameter (the first, if several)."
    )
    header: str | None = Field(default=None, description="On a malformed header.")
    currentVersion: int | None = Field(default=None, description="On 412.")
    currentCursor: str | None = Field(
        default=None, description="On 410 from the feed: its current end, to follow from."
    )


# A job: the fields every job has, then each kind's own.
Job, JobPage = job_schemas(JOB_KINDS.all())
DOC_MODELS: tuple[type[BaseModel], ...] = (
    Problem,
    UnitWrite,
    UnitPatch,
    UnitRead,
    UnitListed,
    UnitPage,
    HistoryPage,
    QueryRequest,
    QueryResult,
    PublishingAction,
    AvailabilityAction,
    BulkItems,
    BulkByFilter,
    BulkResult,
    ApiKeyCreate,
    ApiKeyRead,
    ApiKeyCreated,
    ApiKeyPage,
    Event,
    EventPage,
    WebhookCreate,
    WebhookPatch,
    WebhookRead,
    WebhookCreated,
    WebhookPage,
    Delivery,
    DeliveryPage,
    DeliveryAttempt,
    DeliveryAttempts,
    TestResult,
    ExportCreate,
    Job,
    JobPage,
    ChannelPut,
    MetaCatalogSettings,
    ChannelRead,
    ChannelWritten,
    ChannelList,
    UnitChannel,
    UnitChannels,
    DisplayNameWrite,
    DisplayNameRead,
    DisplayNameList,
)


# Documented as they are read; every other model as the server writes it (a unit's arrays,
# say: a client may send null for one, a returned record always carries the array).
REQUEST_BODIES: frozenset[type[BaseModel]] = frozenset(
    {
        UnitWrite,
        UnitPatch,
        QueryRequest,
        PublishingAction,
        AvailabilityAction,
        BulkItems,
        BulkByFilter,
        ApiKeyCreate,
        WebhookCreate,
        WebhookPatch,
        ExportCreate,
        ChannelPut,
        MetaCatalogSettings,
        DisplayNameWrite,
    }
)


def _components() -> dict[str, Any]:
    _, schema = models_json_schema(
        [
            (model, "validation" if model in REQUEST_BODIES else "serialization")
            for model in DOC_MODELS
        ],
        ref_template="#/components/schemas/{model}",
    )
    return dict(schema.get("$defs", {}))


def _tidy_responses(paths: dict[str, Any]) -> None:
    """Query parameters are parsed by hand (a bad one is a 400), so FastAPI's 422 never
    occurs; and a declared `$ref` must not carry the framework's default schema beside it."""
    for operations in paths.values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            schema = responses.get("422", {}).get("content", {}).get("application/json", {})
            if schema.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
                del responses["422"]
            for response in responses.values():
                for media in response.get("content", {}).values():
                    if "$ref" in media.get("schema", {}):
                        media["schema"] = {"$ref": media["schema"]["$ref"]}


def _request_problems(paths: dict[str, Any]) -> None:
    """What any operation may answer before its handler runs: a 400 for a query parameter
    it does not declare (http/parameters.py), a 408 for a request that arrives too slowly
    (http/clients.py), a 414 for a URL over the limit; and under /api/, whose every
    operation reads its key from the database, a 503 while the database is out of reach."""
    for path, operations in paths.items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for code in (400, 408, 414, *((503,) if path.startswith("/api/") else ())):
                responses.setdefault(str(code), problem(code))


def _storage_problems(paths: dict[str, Any]) -> None:
    """A write that storage cannot take: SQLite's disk full or failing (and an upload the file
    store cannot keep) is a 507."""
    for path, operations in paths.items():
        if path.startswith("/api/"):
            for method, operation in operations.items():
                if method in ("post", "put", "patch", "delete"):
                    operation.setdefault("responses", {}).setdefault("507", problem(507))


def _require_keys(paths: dict[str, Any]) -> None:
    for path, operations in paths.items():
        if path.startswith("/api/"):
            for operation in operations.values():
                operation["security"] = [{"ApiKey": []}]


# A receiver's time to answer (by default) and the waits before each retry, as text.
_SEND_TIMEOUT = duration_text(
    float(Settings.model_fields["webhook_timeout_seconds"].default), short=True
)
_RETRY_SCHEDULE = ", ".join(duration_text(delay, short=True) for delay in RETRY_DELAYS[:-1])
_RETRY_SCHEDULE += f" and {duration_text(RETRY_DELAYS[-1], short=True)}"

_DELIVERY_HEADERS = {
    "webhook-id": "The event's id: the same on every attempt (deduplicate on it).",
    "webhook-timestamp": "Unix seconds of this attempt.",
    "webhook-signature": "`v1,<base64 HMAC-SHA256 of id.timestamp.body>`; two, space-separated, "
    f"for {duration_text(ROTATION_GRACE.total_seconds())} after a secret rotation.",
}
# Sent only when the server records traces (the OTEL_* variables).
_TRACE_HEADERS = {
    "traceparent": "The W3C trace context of this attempt's span, when the server records "
    "traces: the receiver may continue the trace.",
}
_EVENT_DATA = {
    "unit.created": "`data.unit`: the unit as created.",
    "unit.updated": "`data.unit`: the unit after the change; `data.changes`: "
    "`{field: {from, to}}`.",
    "unit.deleted": "`data.unit`: the unit as it was.",
}


def _header(name: str, text: str, required: bool) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": required,
        "description": text,
        "schema": {"type": "string"},
    }


def _webhooks() -> dict[str, Any]:
    """OpenAPI 3.1 `webhooks`: what a receiver is sent, one entry per event type."""
    entries: dict[str, Any] = {}
    for name in (*EVENT_TYPES, TEST_EVENT_TYPE):
        if name in JOB_EVENT_TYPES:
            data = "`data`: the job; `unitId` and `version` are null."
        elif name in CHANNEL_EVENT_TYPES:
            data = (
                "`data`: the channel as GET /api/v2/channels/{name} shows it (deleted: as it "
                "was); `unitId` and `version` are null."
            )
        elif name == TEST_EVENT_TYPE:
            data = "Sent by POST /api/v2/webhooks/{id}/test only; `data.webhookId`."
        else:
            data = _EVENT_DATA.get(name, "`data.unit`: the unit after the action.")
        entries[name] = {
            "post": {
                "summary": f"`{name}`",
                "description": f"{data} Signed per Standard Webhooks; a 2xx within "
                f"{_SEND_TIMEOUT} is success, anything else is retried after about "
                f"{_RETRY_SCHEDULE}; a 410 disables the webhook.",
                "parameters": [
                    *(_header(name, text, True) for name, text in _DELIVERY_HEADERS.items()),
                    *(_header(name, text, False) for name, text in _TRACE_HEADERS.items()),
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Event"}}
                    },
                },
                "responses": {
                    "2XX": {"description": "Received"},
                    "410": {"description": "Gone: disables the webhook"},
                },
            }
        }
    return entries


def build_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    document = get_openapi(
        title="Units API",
        version=__version__,
        openapi_version="3.1.0",
        description=DESCRIPTION,
        routes=app.routes,
    )
    paths = document.get("paths", {})
    _tidy_responses(paths)
    _request_problems(paths)
    _storage_problems(paths)
    document["paths"] = {SEED_PATHS.get(path, path): ops for path, ops in paths.items()}
    _require_keys(document["paths"])
    components = document.setdefault("components", {})
    components["securitySchemes"] = {**SECURITY_SCHEME, **FEED_SECURITY_SCHEME}
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas.update(_components())
    document["webhooks"] = _webhooks()
    app.openapi_schema = document
    return document
