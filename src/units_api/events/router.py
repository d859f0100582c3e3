"""The change feed's route."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from units_api.auth.access import authorize
from units_api.auth.scopes import EVENTS_READ
from units_api.context import app_context
from units_api.events.sequencer import sequence
from units_api.events.service import FEED_LIMIT, View, parse_after, parse_types, read_feed
from units_api.events.types import EVENT_TYPES
from units_api.http import docs
from units_api.http.docs import problems, success
from units_api.http.json import JSONResponse

router = APIRouter(prefix="/api/v2/events", tags=["events"])

_AFTER = docs.query(
    "after",
    "`nextCursor` of the previous page (opaque). Absent: from the oldest kept event.",
    {"type": "string", "pattern": r"^[0-9]{1,18}$"},
)
_TYPES = docs.query(
    "types", "Only events of these types (a comma list).", docs.comma_list(EVENT_TYPES)
)


@router.get(
    "",
    operation_id="listEvents",
    summary="Follow the change feed",
    description=(
        "Every committed change, once, in commit order: the events of one unit in version "
        "order, and an event never before one whose transaction committed before its own "
        "began. A write's event is in the feed by the time the write's response has returned. "
        "`nextCursor` is never null: at the end it is the position to poll from. A key with a "
        "policy reads only the events of units inside it (judged on the unit as the event "
        "carries it; a deletion by the unit as it was), and no job events; and the event by "
        "which a unit leaves it (inside before the change, outside after), with "
        '`"left": true` and `data` `{"unitId"}` alone. Events are kept '
        "`UNITS_API_EVENTS_RETENTION_DAYS` days; a cursor older than the oldest kept event is "
        "a 410 whose `currentCursor` is the feed's end."
    ),
    responses={**success(200, "EventPage", "A page of events"), **problems(400, 410)},
    openapi_extra={"parameters": [_AFTER, docs.limit(FEED_LIMIT), _TYPES]},
)
async def list_events(request: Request) -> Response:
    principal = await authorize(request, EVENTS_READ)
    context = app_context(request)
    params = request.query_params
    after = parse_after(params.get("after"))
    limit = FEED_LIMIT.parse(params.get("limit"))
    types = parse_types(params.get("types"))
    policy = principal.policy_tree
    view = None if policy is None else View.of(policy)
    # The page holds every event committed before the request: they are numbered first.
    await sequence(context.db)
    async with context.db.read() as conn:
        body = await read_feed(conn, after, limit, types, view)
    return JSONResponse(body)
