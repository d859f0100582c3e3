"""The home-listings feeds of meta-catalog channels (section 17): `/feeds/{channel}.xml` and
`.csv`, read with HTTP Basic (the channel's name and its feed token), outside /api/."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Path, Request
from starlette.responses import Response, StreamingResponse

from units_api.channels.readiness import SOLD_KEPT
from units_api.channels.router import check_public_limit, public_base
from units_api.clock import utcnow
from units_api.context import app_context
from units_api.feeds import service
from units_api.feeds.listings import DESCRIPTION_MAX, IMAGES_MAX, Channel
from units_api.feeds.render import CSV_COLUMNS, FORMATS
from units_api.http.compression import GzipStream, accepts_gzip
from units_api.http.conditional import http_date, not_modified
from units_api.http.docs import header, ref

router = APIRouter(tags=["feeds"])
PREFIX = "/feeds"
# The OpenAPI security scheme of the feeds (openapi.py adds it beside the API key's).
SECURITY_SCHEME = {
    "FeedToken": {
        "type": "http",
        "scheme": "basic",
        "description": "The channel's name as the user, its feed token (`uft_...`) as the "
        "password.",
    }
}
ChannelName = Annotated[str, Path(description="A meta-catalog channel's name.")]

_FIELDS = (
    "`home_listing_id` (the id), `name`, `availability` (`for_sale` or `for_rent` by "
    "`offeringType` when available, `sale_pending` when reserved, `recently_sold` for "
    f"{SOLD_KEPT.days} days after the sale, then left out), `address` "
    "(`addr1` the location, `city`, `region` the city, `country`), `latitude`, `longitude`, "
    "`neighborhood` (the location), `price` (`4850000 EGP`: the amount exact, the currency "
    "or UNITS_API_DEFAULT_CURRENCY), `image` (the unit's image then the gallery, http(s) "
    f"only, at most {IMAGES_MAX}), `url` (the channel's `urlTemplate`, else the unit's page "
    f"on the website), `description` (`unitDesc`, else `unitShortDesc`; at most "
    f"{DESCRIPTION_MAX:,} characters), `num_beds`, `num_baths`, `property_type` (by the "
    "channel's `propertyTypes`, else `other`) and `listing_type` (`new_construction` when "
    "off-plan, else `for_sale_by_agent` or `for_rent_by_agent`)"
)
_COMMON = (
    "Every unit live on the channel (published, on the channel, not blocked, meeting its "
    "readiness rules and with a `country`; a unit that is not is left out, and "
    "GET /api/v2/units/{id}/channels says what it lacks), one listing each: "
    f"{_FIELDS}. Read with HTTP Basic: the channel's name and its feed token (`feedToken` "
    "when the channel was created or its token rotated); anything else, a channel that does "
    "not exist or is not a meta-catalog included, is a 401 with `WWW-Authenticate: Basic "
    'realm="feeds"`. Streamed in constant memory whatever the number of units. Carries '
    "`ETag` and `Last-Modified`; `If-None-Match` (or, without it, `If-Modified-Since`) "
    "answers 304 when nothing it depends on changed. gzip when `Accept-Encoding` allows it "
    "(the entity-tag then ends in `-gzip`). Characters XML 1.0 forbids are left out of every "
    "value, in both formats."
)
_HEADERS = {
    "ETag": {"description": "The feed's entity-tag.", "schema": {"type": "string"}},
    "Last-Modified": {"description": "When the feed last changed.", "schema": {"type": "string"}},
    "Vary": {"description": "`Accept-Encoding`.", "schema": {"type": "string"}},
    "Content-Encoding": {"description": "`gzip` when asked for.", "schema": {"type": "string"}},
}


def _responses(media_type: str, what: str) -> dict[int | str, dict[str, object]]:
    problem = {"application/problem+json": {"schema": ref("Problem")}}
    return {
        200: {
            "description": what,
            "content": {media_type: {"schema": {"type": "string"}}},
            "headers": _HEADERS,
        },
        304: {"description": "Not modified (If-None-Match or If-Modified-Since)"},
        401: {
            "description": 'Missing or wrong credentials (`WWW-Authenticate: Basic realm="feeds"`)',
            "content": problem,
        },
        404: {"description": "No such route (a name with a slash)", "content": problem},
        429: {
            "description": "Past UNITS_API_PUBLIC_RATE_LIMIT for this address (`Retry-After`)",
            "content": problem,
        },
    }


def _parameters() -> dict[str, object]:
    return {
        "parameters": [
            header("If-None-Match", "Answer 304 if the feed's ETag is one of these."),
            header(
                "If-Modified-Since",
                "Without If-None-Match: answer 304 if the feed has not changed since.",
            ),
            header("Accept-Encoding", "`gzip` for a gzip-compressed feed."),
        ],
        "security": [{"FeedToken": []}],
    }


async def _feed(request: Request, name: str, extension: str) -> Response:
    context = app_context(request)
    settings = context.settings
    await check_public_limit(request)
    gzip = accepts_gzip(request.headers.get("accept-encoding"))
    async with context.db.read() as conn:
        row = await service.channel_for(conn, name, request.headers.get("authorization"))
        listed = Channel.of(
            name,
            orjson.loads(row["settings"]),
            public_base(request),
            settings.default_currency,
            utcnow(),
        )
        found = await service.validators(conn, row, extension, listed, gzip)
    headers = {
        "ETag": found.etag,
        "Last-Modified": http_date(found.last_modified),
        "Vary": "Accept-Encoding",
        "Cache-Control": "private, no-cache",
    }
    if not_modified(request.headers, found.etag, found.last_modified):
        return Response(status_code=304, headers=headers)
    if gzip:
        headers["Content-Encoding"] = "gzip"
    form = FORMATS[extension]
    body = service.stream(context.db, listed, form, GzipStream() if gzip else None)
    return StreamingResponse(body, media_type=form.media_type, headers=headers)


@router.get(
    PREFIX + "/{channel}.xml",
    operation_id="getListingsFeedXml",
    summary="A meta-catalog channel's home-listings feed, as XML",
    description=f"{_COMMON} Meta's XML: `<listings><listing>...</listing></listings>`, the "
    'address as `<address format="simple">` with `<component name="addr1|city|region|'
    'country">` children, each image as `<image><url>...</url></image>`.',
    response_class=Response,
    responses=_responses("application/xml", "The listings, as XML (UTF-8)"),
    openapi_extra=_parameters(),
)
async def listings_xml(request: Request, channel: ChannelName) -> Response:
    return await _feed(request, channel, "xml")


@router.get(
    PREFIX + "/{channel}.csv",
    operation_id="getListingsFeedCsv",
    summary="A meta-catalog channel's home-listings feed, as CSV",
    description=f"{_COMMON} CSV (UTF-8, RFC 4180 quoting) with a header row whose nested "
    f"fields are JSON paths: {', '.join(f'`{name}`' for name in CSV_COLUMNS[:9])}, ..., "
    f"`image[0].url` to `image[{IMAGES_MAX - 1}].url`, ...; an absent value is an empty cell.",
    response_class=Response,
    responses=_responses("text/csv", "The listings, as CSV (UTF-8)"),
    openapi_extra=_parameters(),
)
async def listings_csv(request: Request, channel: ChannelName) -> Response:
    return await _feed(request, channel, "csv")
